#!/usr/bin/env python3
"""The failures each engine can print on its startup path, read from its own source, per version.

    tools/engine_messages.py extract vllm 0.32.0 DIR      # DIR: an unpacked source tree or wheel
    tools/engine_messages.py extract tgi 3.3.7 GITDIR@v3.3.7
    tools/engine_messages.py check [--source vllm-0.32.0=DIR ...]
    tools/engine_messages.py coverage
    tools/engine_messages.py reclassify                   # after a change of the mapping

``extract`` lists every failure site on the engine's startup path (see ``STARTUP_PATH``; what
is read per language is in ``message_extract``), turns each message into a pattern (literal text
escaped, each value the program fills in a lazy wildcard), gives it a class by the reviewable
mapping of ``message_classes`` and writes ``src/bringup/data/messages/<engine>-<version>.jsonl``:
a header line (``meta``: the source, the startup path, digests of the files read and of the
mapping, the coverage) and one row per site: engine, version, file, line, function, kind, type,
template (``{}`` for a value), pattern, class, rule, load, why. Only the message templates and
their places are kept: no code. ``check`` says whether the tables are current: always, that the
mapping still gives every row its class; with ``--source`` for a table, that the source still
gives the same rows. ``coverage`` prints, per table, the share of its sites bringup recognises
with a class (the figure the issue sets goals for); resource warnings and Go errors that only
wrap another (kind ``wrap``: ``"%s: %w"``, whose wrapped error's own site is counted) are listed
apart from it. ``reclassify`` gives the stored rows the mapping's classes again (no source).

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

import argparse
import fnmatch
import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import message_classes
import message_extract as mx

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "bringup" / "data" / "messages"

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

# a warning is listed only when it names a resource limit (it is a cause only with a death)
_RESOURCE = re.compile(
    r"memory|\bOOM\b|KV cache|cache blocks|/dev/shm|shared memory|GiB|\bMiB\b|timeout|timed out"
    r"|exceed|insufficient|not enough|too (?:large|small|many)|limit",
    re.IGNORECASE,
)
MIN_LITERAL = 14  # the longest literal run of a pattern; a shorter one matches too many lines
MIN_WORDS = 3  # words in the pattern's literal text


# -- sources -----------------------------------------------------------------------------------


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


# -- templates to patterns ---------------------------------------------------------------------


def template_text(template: mx.Template) -> str:
    """The template as stored: ``{}`` for a value, literal braces doubled."""
    return "".join("{}" if p is None else p.replace("{", "{{").replace("}", "}}") for p in template)


def parse_template(text: str) -> mx.Template:
    """The inverse of :func:`template_text`."""
    return mx.normalise(mx.split_braces(text))


def readable(template: mx.Template) -> str:
    """The message's text with its values shown as ``…`` (what the mapping reads)."""
    return "".join("…" if p is None else p for p in template)


def _lines(template: mx.Template) -> list[list[mx.Part]]:
    lines: list[list[mx.Part]] = [[]]
    for part in template:
        if part is None:
            lines[-1].append(None)
            continue
        pieces = part.split("\n")
        lines[-1].append(pieces[0])
        lines.extend([piece] for piece in pieces[1:])
    return lines


def _literal_len(parts: list[mx.Part]) -> int:
    return sum(len(p.strip()) for p in parts if p is not None)


def pattern_of(template: mx.Template) -> tuple[str | None, str]:
    """(the regex a log line of this message matches, why not when None).

    One line of a multi-line message is one log line: the first line (it follows the
    exception's type, or the logger's header), unless another has more literal text and the
    first too little. Values at its ends are dropped, values inside become ``.*?``.
    """
    lines = _lines(template)
    first = _trim(lines[0]) if lines else []
    best = first if _enough(first) else _trim(max(lines, key=_literal_len)) if lines else []
    literals = [p for p in best if p is not None]
    if not literals:
        return None, "no literal text (the whole message is a value)"
    if not _enough(best):
        longest = max(len(p.strip()) for p in literals)
        n = words(" ".join(literals))
        return None, f"too little literal text to be recognised ({longest} chars, {n} words)"
    return "".join(".*?" if part is None else re.escape(part) for part in best), ""


_QUOTES = "'\"`"


def _unquote(line: list[mx.Part]) -> list[mx.Part]:
    """The quotes around a value are the value's (one version writes '{}', another `{}`)."""
    out = list(line)
    for i, part in enumerate(out):
        if part is None:
            continue
        if i + 1 == len(out) or out[i + 1] is None:
            part = part.rstrip(_QUOTES)
        if i == 0 or out[i - 1] is None:
            part = part.lstrip(_QUOTES)
        out[i] = part
    return list(mx.normalise(out))


def _trim(line: list[mx.Part]) -> list[mx.Part]:
    """A line without the values and spaces at its ends, and the quotes around its values."""
    best = _unquote(list(mx.normalise(line)))
    while best and (best[0] is None or not str(best[0]).strip()):
        best.pop(0)
    while best and (best[-1] is None or not str(best[-1]).strip()):
        best.pop()
    if best and isinstance(best[0], str):
        best[0] = best[0].lstrip()
    if best and isinstance(best[-1], str):
        best[-1] = best[-1].rstrip()
    return best


# the words of a text: letter runs, a camelCase name's parts apart (``cuDeviceGetCount`` names
# four: an API call is as telling as a phrase)
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]{2,}(?![a-z])|[A-Z][a-z]*")


def words(text: str) -> int:
    return sum(len(_WORD.findall(run)) for run in re.findall(r"[A-Za-z]{2,}", text))


def _enough(line: list[mx.Part]) -> bool:
    """Whether a line has literal text enough to tell it from other lines."""
    literals = [p.strip() for p in line if p is not None]
    if not literals:
        return False
    return max(len(p) for p in literals) >= MIN_LITERAL and words(" ".join(literals)) >= MIN_WORDS


# -- rows --------------------------------------------------------------------------------------


@dataclass
class Row:
    engine: str
    version: str
    file: str
    line: int
    function: str
    kind: str
    type: str
    template: str
    pattern: str | None
    cls: str | None
    rule: str | None
    load: bool
    why: str
    phase: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "engine": self.engine,
            "version": self.version,
            "file": self.file,
            "line": self.line,
            "function": self.function,
            "kind": self.kind,
            "type": self.type,
            "template": self.template,
            "pattern": self.pattern,
            "class": self.cls,
            "rule": self.rule,
            "load": self.load,
            "why": self.why,
            "phase": self.phase,
        }

    @classmethod
    def from_json(cls, d: dict[str, object]) -> Row:
        return cls(
            str(d["engine"]),
            str(d["version"]),
            str(d["file"]),
            int(str(d["line"])),
            str(d["function"]),
            str(d["kind"]),
            str(d["type"]),
            str(d["template"]),
            None if d["pattern"] is None else str(d["pattern"]),
            None if d["class"] is None else str(d["class"]),
            None if d["rule"] is None else str(d["rule"]),
            bool(d["load"]),
            str(d["why"]),
            None if d.get("phase") is None else str(d["phase"]),
        )


def classify(row: Row) -> Row:
    """The row with its class, rule, load and why set from the mapping and its pattern."""
    template = parse_template(row.template)
    text = readable(template)
    cls, rule = message_classes.classify(text, row.type, row.file, row.function)
    pattern, why = pattern_of(template)
    load = pattern is not None and cls is not None and row.kind not in APART
    if row.kind == "wrap":
        why = "only wraps another error (its own site says the message): listed apart"
    elif cls is None:
        why = why or "no rule of the mapping places it"
    elif row.kind == "log.warning":
        why = why or "a warning: a cause only when a death follows, never loaded on its own"
    row.cls, row.rule, row.pattern, row.load, row.why = cls, rule, pattern, load, why
    row.phase = message_classes.phase_of(cls, row.file)
    return row


def _ambiguous(rows: list[Row]) -> None:
    """One pattern, two classes (the same text checked in two layers): neither is loaded."""
    classes: dict[str, set[str]] = {}
    for row in rows:
        if row.load and row.pattern is not None and row.cls is not None:
            classes.setdefault(row.pattern, set()).add(row.cls)
    for row in rows:
        if row.load and row.pattern is not None and len(classes[row.pattern]) > 1:
            row.load = False
            row.why = "the same text has other classes elsewhere: " + ", ".join(
                sorted(classes[row.pattern])
            )


def build_rows(engine: str, version: str, found: Iterable[mx.Site]) -> list[Row]:
    rows = []
    seen = set()
    for site in found:
        if RUNTIME_FUNCTIONS.search(site.function) and not STARTUP_READERS.search(site.file):
            continue  # served requests, not the start
        if not site.template or all(p is None for p in site.template):
            continue  # a message that is only a value (``raise ValueError(msg)`` unresolved)
        if site.kind == "log.warning" and not _RESOURCE.search(readable(site.template)):
            continue
        key = (site.file, site.line, site.kind, site.template)
        if key in seen:
            continue
        seen.add(key)
        row = Row(
            engine,
            version,
            site.file,
            site.line,
            site.function,
            site.kind,
            site.type,
            template_text(site.template),
            None,
            None,
            None,
            False,
            "",
        )
        rows.append(classify(row))
    _ambiguous(rows)
    return rows


# rows outside the coverage's sites: resource warnings (a cause only with a death) and Go
# errors that only wrap another (``"%s: %w"``: the wrapped error's own site is counted)
APART = ("log.warning", "wrap")


def coverage(rows: list[Row]) -> dict[str, int | float]:
    """Sites (warnings and pure wraps apart), those with a class, those recognised (class and
    pattern)."""
    errors = [r for r in rows if r.kind not in APART]
    classed = [r for r in errors if r.cls is not None]
    loaded = [r for r in errors if r.load]
    share = round(100.0 * len(loaded) / len(errors), 1) if errors else 0.0
    return {
        "sites": len(errors),
        "with_class": len(classed),
        "recognised": len(loaded),
        "share_percent": share,
        "warnings": sum(r.kind == "log.warning" for r in rows),
        "wraps": sum(r.kind == "wrap" for r in rows),
    }


def mapping_digest() -> str:
    text = (Path(__file__).parent / "message_classes.py").read_bytes()
    return hashlib.sha256(text).hexdigest()[:16]


def table_path(engine: str, version: str) -> Path:
    return DATA / f"{engine}-{version}.jsonl"


def write_table(engine: str, version: str, spec: str, rows: list[Row], digest: str) -> Path:
    meta = {
        "meta": {
            "engine": engine,
            "version": version,
            "source": spec_label(spec),
            "startup_path": list(STARTUP_PATH[engine]),
            "source_digest": digest[:16],
            "mapping_digest": mapping_digest(),
            "coverage": coverage(rows),
        }
    }
    path = table_path(engine, version)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(meta, ensure_ascii=False)]
    lines += [json.dumps(r.to_json(), ensure_ascii=False) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def spec_label(spec: str) -> str:
    """Where the source came from, without this machine's paths."""
    if "@" in spec and not Path(spec).exists():
        gitdir, _, ref = spec.rpartition("@")
        name = Path(gitdir).parent.name.replace("+", "/")
        return f"github:{name}@{ref}"
    return Path(spec).name


def read_table(path: Path) -> tuple[dict[str, object], list[Row]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    meta = json.loads(lines[0])["meta"]
    return meta, [Row.from_json(json.loads(line)) for line in lines[1:] if line.strip()]


def tables() -> Iterator[Path]:
    yield from sorted(DATA.glob("*.jsonl"))


# -- commands ----------------------------------------------------------------------------------


def cmd_extract(engine: str, version: str, spec: str) -> int:
    found, digest = sites(Source(spec), engine)
    rows = build_rows(engine, version, found)
    path = write_table(engine, version, spec, rows, digest)
    print(f"{path.relative_to(ROOT)}: {_coverage_line(coverage(rows))}")
    return 0


def _coverage_line(c: dict[str, int | float]) -> str:
    return (
        f"{c['recognised']}/{c['sites']} startup-path failure sites recognised with a class "
        f"({c['share_percent']} %; {c['with_class']} with a class; {c['warnings']} resource "
        f"warnings and {c.get('wraps', 0)} pure wraps listed apart)"
    )


def cmd_check(sources: dict[str, str]) -> int:
    stale = 0
    for path in tables():
        meta, rows = read_table(path)
        name = path.stem
        before = [r.to_json() for r in rows]
        again = [r.to_json() for r in _reclassified(rows)]
        problems = []
        if before != again:
            changed = sum(a != b for a, b in zip(before, again, strict=True))
            problems.append(f"{changed} rows get another class from the mapping now")
        spec = sources.get(name)
        if spec is not None:
            found, digest = sites(Source(spec), str(meta["engine"]))
            fresh = [
                r.to_json() for r in build_rows(str(meta["engine"]), str(meta["version"]), found)
            ]
            if fresh != before:
                problems.append("the source gives other rows")
            if digest[:16] != meta["source_digest"]:
                problems.append(
                    "the source's startup files differ from those the table was read from"
                )
            where = "rows and source checked"
        else:
            where = "source not given: its rows were not read again"
        if problems:
            stale += 1
            print(f"{name}: STALE ({'; '.join(problems)}); regenerate with extract")
        else:
            print(f"{name}: current ({where})")
    return 1 if stale else 0


def _reclassified(rows: list[Row]) -> list[Row]:
    fresh = [
        classify(
            Row(
                **{
                    **r.__dict__,
                    "pattern": None,
                    "cls": None,
                    "rule": None,
                    "load": False,
                    "why": "",
                }
            )
        )
        for r in rows
    ]
    _ambiguous(fresh)
    return fresh


def cmd_reclassify() -> int:
    """Every table's rows given their class by the mapping as it is now (no source needed: the
    rows, their templates and places stay; class, rule, pattern, load, why and phase are
    computed again, and the header's mapping digest and coverage with them)."""
    for path in tables():
        meta, rows = read_table(path)
        fresh = _reclassified(rows)
        meta = {**meta, "mapping_digest": mapping_digest(), "coverage": coverage(fresh)}
        lines = [json.dumps({"meta": meta}, ensure_ascii=False)]
        lines += [json.dumps(r.to_json(), ensure_ascii=False) for r in fresh]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"{path.stem}: {_coverage_line(coverage(fresh))}")
    return 0


def cmd_coverage() -> int:
    for path in tables():
        _meta, rows = read_table(path)
        print(f"{path.stem}: {_coverage_line(coverage(rows))}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("extract", help="read one engine version's source into its table")
    ex.add_argument("engine", choices=sorted(STARTUP_PATH))
    ex.add_argument("version")
    ex.add_argument("source", help="a source directory, or GITDIR@REF")
    ck = sub.add_parser("check", help="say whether the tables are current")
    ck.add_argument("--source", action="append", default=[], metavar="ENGINE-VERSION=SPEC")
    sub.add_parser("coverage", help="print each table's coverage")
    sub.add_parser("reclassify", help="give every table's rows the mapping's classes again")
    args = parser.parse_args(argv)
    if args.command == "reclassify":
        return cmd_reclassify()
    if args.command == "extract":
        return cmd_extract(args.engine, args.version, args.source)
    if args.command == "check":
        return cmd_check(dict(s.split("=", 1) for s in args.source))
    return cmd_coverage()


if __name__ == "__main__":
    raise SystemExit(main())
