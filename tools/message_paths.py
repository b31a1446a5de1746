"""Where each engine's startup path is in its source, and the failure sites read from it.

The startup path (what runs from the command line to "ready"; request handling, the step
loop, state save/restore and tests are left out by function name, ``RUNTIME_FUNCTIONS``):

- vLLM (0.6 V0 and V1 layouts both listed; a glob a version lacks matches nothing): argument
  parsing (``engine/arg_utils.py``, ``entrypoints/openai/cli_args.py``, ``entrypoints/cli/
  serve.py``/``main.py``, ``entrypoints/openai/api_server.py``), configuration (``config.py``,
  ``config/``, ``transformers_utils/config.py``, the tokenizer loaders, the model registry,
  ``model_executor/layers/quantization/__init__.py``), the engine (``engine/llm_engine.py``,
  ``engine/async_llm_engine.py``, ``engine/multiprocessing/``, ``v1/engine/core.py``,
  ``core_client.py``, ``utils.py``, ``async_llm.py``, ``llm_engine.py``), executors
  (``executor/``, ``v1/executor/``), workers (``worker/``, ``v1/worker/`` top level), the KV
  cache sizing (``v1/core/kv_cache_utils.py``, ``core/block_manager*.py``), the loader
  (``model_executor/model_loader/`` top level), distributed init (``distributed/
  parallel_state.py``, ``distributed/utils.py``, ``distributed/device_communicators/``) and the
  platforms (``platforms/``).
- SGLang: ``srt/server_args.py``, ``srt/arg_groups/``, ``srt/entrypoints/engine.py``/
  ``http_server.py``, ``srt/managers/`` (scheduler, tp worker, data-parallel controller, the
  tokenizer manager's start), ``srt/model_executor/model_runner*.py``/``cuda_graph_runner.py``,
  ``srt/model_loader/``, ``srt/mem_cache/memory_pool.py``, ``srt/configs/model_config.py``/
  ``load_config.py``/``device_config.py``, ``srt/distributed/parallel_state.py``,
  ``srt/hf_transformers_utils.py``/``srt/utils/hf_transformers_utils.py``.
- TGI: the launcher (``launcher/src/``), the router's start (``router/src/server.rs``/
  ``main.rs``, ``backends/v3/src/main.rs``/``lib.rs``/``backend.rs``) and the Python shard's start (``server/text_generation_server/cli.py``, ``server.py``,
  ``models/__init__.py``, ``utils/weights.py``, ``utils/hub.py``, ``utils/dist.py``).
- llama.cpp: the model loader and context (``src/llama.cpp``, ``src/llama-model-loader.cpp``,
  ``src/llama-model.cpp``, ``src/llama-context.cpp``, ``src/llama-kv-cache*.cpp``,
  ``src/llama-vocab.cpp``, ``src/llama-adapter.cpp``), GGUF reading (``ggml/src/gguf.cpp``),
  the backends' device and buffer setup (``ggml/src/ggml-backend*.cpp``, ``ggml/src/ggml-cuda/
  ggml-cuda.cu``), argument parsing (``common/arg.cpp``, ``common/common.cpp``) and the server's
  start (``tools/server/server.cpp``, ``server-context.cpp``, ``server-http.cpp``, older
  ``examples/server/server.cpp``).
- Ollama: ``server/sched.go`` and ``server/routes.go`` (scheduling, the model's load), ``llm/`` (the runner's launch and
  memory fit), ``runner/`` (the runners), ``envconfig/``, ``discover/`` (GPUs), ``fs/ggml/``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
import subprocess
from pathlib import Path

import message_extract as mx

_V = "vllm/"
_SG = "python/sglang/srt/"  # in the repository; a wheel has sglang/srt/ (both listed)
STARTUP_PATH: dict[str, tuple[str, ...]] = {
    "vllm": tuple(
        _V + p
        for p in (
            "engine/arg_utils.py",
            "engine/llm_engine.py",
            "engine/async_llm_engine.py",
            "engine/multiprocessing/*.py",
            "entrypoints/openai/cli_args.py",
            "entrypoints/openai/api_server.py",
            "entrypoints/cli/serve.py",
            "entrypoints/cli/main.py",
            "config.py",
            "config/*.py",
            "transformers_utils/config.py",
            "transformers_utils/tokenizer.py",
            "tokenizers/hf.py",
            "tokenizers/registry.py",
            "model_executor/models/registry.py",
            "model_executor/layers/quantization/__init__.py",
            "v1/engine/core.py",
            "v1/engine/core_client.py",
            "v1/engine/utils.py",
            "v1/engine/async_llm.py",
            "v1/engine/llm_engine.py",
            "executor/*.py",
            "v1/executor/*.py",
            "worker/*.py",
            "v1/worker/*.py",
            "v1/core/kv_cache_utils.py",
            "core/block_manager*.py",
            "model_executor/model_loader/*.py",
            "distributed/parallel_state.py",
            "distributed/utils.py",
            "distributed/device_communicators/*.py",
            "platforms/*.py",
        )
    ),
    "sglang": tuple(
        prefix + p
        for prefix in (_SG, "sglang/srt/")
        for p in (
            "server_args.py",
            "arg_groups/*.py",
            "entrypoints/engine.py",
            "entrypoints/http_server.py",
            "managers/scheduler.py",
            "managers/tp_worker.py",
            "managers/data_parallel_controller.py",
            "managers/tokenizer_manager.py",
            "managers/detokenizer_manager.py",
            "model_executor/model_runner*.py",
            "model_executor/cuda_graph_runner.py",
            "model_loader/*.py",
            "mem_cache/memory_pool.py",
            "configs/model_config.py",
            "configs/load_config.py",
            "configs/device_config.py",
            "distributed/parallel_state.py",
            "hf_transformers_utils.py",
            "utils/hf_transformers_utils.py",
        )
    ),
    "tgi": (
        "launcher/src/*.rs",
        "router/src/server.rs",
        "router/src/main.rs",
        "backends/v3/src/main.rs",
        "backends/v3/src/lib.rs",
        "backends/v3/src/backend.rs",
        "server/text_generation_server/cli.py",
        "server/text_generation_server/server.py",
        "server/text_generation_server/models/__init__.py",
        "server/text_generation_server/utils/weights.py",
        "server/text_generation_server/utils/hub.py",
        "server/text_generation_server/utils/dist.py",
    ),
    "llamacpp": (
        "src/llama.cpp",
        "src/llama-model-loader.cpp",
        "src/llama-model.cpp",
        "src/llama-context.cpp",
        "src/llama-kv-cache*.cpp",
        "src/llama-vocab.cpp",
        "src/llama-adapter.cpp",
        "ggml/src/gguf.cpp",
        "ggml/src/ggml-backend*.cpp",
        "ggml/src/ggml-cuda/ggml-cuda.cu",
        "common/arg.cpp",
        "common/common.cpp",
        "tools/server/server.cpp",
        "tools/server/server-context.cpp",
        "tools/server/server-http.cpp",
        "examples/server/server.cpp",
    ),
    "ollama": (
        "server/sched.go",
        "server/routes.go",
        "llm/*.go",
        "runner/*.go",
        "runner/*/*.go",
        "envconfig/*.go",
        "discover/*.go",
        "fs/ggml/*.go",
    ),
}
# what runs per request or per step once serving, wherever its file is: not the startup path
# (the last part of the function's name; the data movers of the communicators, the request
# loop, pause/resume, sleep, weight updates, elastic rescaling)
RUNTIME_FUNCTIONS = re.compile(
    r"(?:^|\.)(?:execute_model\w*|step\w*|_?add_request\w*|abort\w*|_handle_client_request"
    r"|process_input\w*|preprocess_add_request|pause\w*|resume\w*|sleep|wake_up|\w*weight_update\w*"
    r"|_set_draft_weight_update_target|\w*reconfigur\w*|eep_\w*|\w*elastic\w*|send\w*|recv\w*"
    r"|isend\w*|irecv\w*|broadcast\w*|_?all_reduce\w*|_?all_gather\w*|_?reduce_scatter\w*"
    r"|gather|all2all\w*|dequeue|enqueue|acquire_read|acquire_write|_?sample\w*|generate\w*"
    r"|_copy_pooler_output\w*|_update_states|_prepare_inputs|get_output\w*|_?verify_\w*signature"
    r"|put|copy_to_buffer|allocate_buf|deserialize|_validate_monotonic_id|__getitem__|__getattr__"
    r"|__setattr__|get_handle|batch_isend_irecv|_populate_metadata|scale_\w*|_process_\w*output\w*"
    r"|handle_\w*request\w*|_handle_mm_cache_miss|update_\w*|_serve_\w*|stream\w*|decode\w*"
    r"|detokeni\w*|_run_\w*step|run_busy_loop|_process_engine_step|forward\w*|infer\w*|completion\w*"
    r"|chat\w*|tokenize\w*|embed\w*|score\w*|encode|\w*_loras?|\w*prompt_adapters?|start_profile"
    r"|stop_profile|profile|validate_outputs?|_validate_token_prompt|_validate_model_inputs"
    r"|add_logger|remove_logger|_has_remaining_steps|_process_request|handle_new_input"
    r"|get_decoding_config|check_health|start_background_loop|run_output_handler_loop"
    r"|_enqueue_task|hash_request_tokens|popleft|remove|__reduce__|signal_handler|test\w*"
    r"|prefill|filterbatch|clearcache|health\w*|\w*handler|\w*state_(?:read|write|load|save|get|set)\w*"
    r"|\w*_seq_\w*|\w*restore\w*|\w*save\w*|apply\w*template|filter_send_generations|allocate|free"
    r"|evict|insert_|split_node|add_node_to_parent|remove_node|detokeni\w*|embedding\w*"
    r"|\w*chat\w*|\w*stream\w*|\w*tool_?calls?\w*|\w*media\w*|normalize|llama_decode|llama_encode"
    r"|graph_compute|process_ubatch|process_mtmd_chunk|process_single_task|opt_\w+|memory_update"
    r"|get_sub_batch|common_tokenize|common_replay_last_token|output_resolve_row|get_embeddings\w*"
    r"|extract_layer_inputs|find_slot|set_input_\w+|iterate|handle_completions\w*|ex_wrapper|dsv4_\w+"
    r"|parse_\w+_response|fs_write_atomic|getServerStatusRetry|scheduleRunner"
    r"|_invoke_utility_method|call_utility\w*|_gather_mm_embeddings|raise_if_nan_logits"
    r"|\w*sleep\w*|shutdown\w*|monitor_workers|enqueue_output|get_persistent\w*"
    r"|_ensure_workspace_size|_get_workspace_id|_reset_caches|reinitialize_distributed)$"
    # a method get_model hands out the model already built (a runner's accessor); the module
    # function of that name builds it at the start (TGI's shard: models/__init__.py)
    r"|\w\.get_model$",
    re.IGNORECASE,
)
# the model file's reader is the start wherever its function names say "decode" (Ollama's
# fs/ggml Decode parses the GGUF the scheduler loads), as is what it calls
STARTUP_READERS = re.compile(r"(?:^|/)fs/ggml/")
_LANG = {".py": "python", ".rs": "rust", ".go": "go", ".cpp": "cpp", ".cu": "cpp", ".c": "cpp"}
_SKIP = re.compile(r"(?:^|/)(?:tests?|test_\w+\.py|\w+_test\.go|benches)(?:/|$)")


class Source:
    """A source tree: a directory, or ``GITDIR@REF`` read with git (a bare mirror will do)."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        if "@" in spec and not Path(spec).exists():
            gitdir, _, self.ref = spec.rpartition("@")
            self.gitdir: Path | None = Path(gitdir)
            self.dir: Path | None = None
        else:
            self.gitdir, self.ref, self.dir = None, "", Path(spec)

    def files(self) -> list[str]:
        if self.dir is not None:
            return sorted(str(p.relative_to(self.dir)) for p in self.dir.rglob("*") if p.is_file())
        out = self._git("ls-tree", "-r", "--name-only", self.ref)
        return sorted(out.splitlines())

    def read(self, path: str) -> str:
        if self.dir is not None:
            return (self.dir / path).read_text(encoding="utf-8", errors="replace")
        return self._git("show", f"{self.ref}:{path}")

    def _git(self, *args: str) -> str:
        assert self.gitdir is not None
        done = subprocess.run(
            ["git", "--git-dir", str(self.gitdir), *args],
            check=True,
            capture_output=True,
            text=True,
            errors="replace",
        )
        return done.stdout


def startup_files(source: Source, engine: str) -> list[str]:
    globs = STARTUP_PATH[engine]
    return [
        f
        for f in source.files()
        if Path(f).suffix in _LANG
        and not _SKIP.search(f)
        and any(fnmatch.fnmatchcase(f, g) and f.count("/") == g.count("/") for g in globs)
    ]


def sites(source: Source, engine: str) -> tuple[list[mx.Site], str]:
    """The failure sites of the engine's startup path, and a digest of the files read."""
    digest = hashlib.sha256()
    found: list[mx.Site] = []
    for path in startup_files(source, engine):
        text = source.read(path)
        digest.update(path.encode() + b"\0" + text.encode("utf-8", "replace") + b"\0")
        lang = _LANG[Path(path).suffix]
        if lang == "python":
            found.extend(mx.python_sites(path, text))
        else:
            found.extend(mx.regex_sites(path, text, lang))
    return found, digest.hexdigest()
