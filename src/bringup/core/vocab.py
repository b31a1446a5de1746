"""The canonical vocabulary every command's JSON uses. Spelled exactly; never renamed.

Phases are ordered: a startup moves forward through them, and ``Phase.order`` compares
them. Failure classes name *why* a startup did not reach ``ready``.
"""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    """Startup phases, in the order a server goes through them."""

    START = "start"  # process started, imports, argument parsing
    CONFIG = "config"  # model config, tokenizer, architecture resolved
    DISTRIBUTED_INIT = "distributed_init"  # device and NCCL/process-group init; free-memory check
    WEIGHTS_LOADING = "weights_loading"  # shards being read (progress a/b)
    WEIGHTS_LOADED = "weights_loaded"  # weights on the GPU ("Model loading took ...")
    TORCH_COMPILE = (
        "torch_compile"  # torch.compile / inductor graphs (vLLM without --enforce-eager)
    )
    MEMORY_PROFILING = "memory_profiling"  # dummy forward at max_num_batched_tokens (warm-up run)
    KV_CACHE_ALLOC = "kv_cache_alloc"  # KV cache sized and allocated
    CUDA_GRAPH_CAPTURE = "cuda_graph_capture"  # graphs captured (progress n/m)
    WARMUP = "warmup"  # sampler warmup / engine warmup requests
    API_SERVER_STARTING = "api_server_starting"  # HTTP app built, about to listen
    READY = "ready"  # the engine says it is ready (bringup also asks the model)

    @property
    def order(self) -> int:
        """Position in the startup order (``start`` is 0)."""
        return _ORDER[self]

    @classmethod
    def ordered(cls) -> tuple[Phase, ...]:
        """All phases, in startup order."""
        return tuple(cls)


_ORDER = {phase: i for i, phase in enumerate(Phase)}


class FailureClass(StrEnum):
    """Why a startup failed. Each class has remedies in the knowledge packs."""

    CUDA_OOM = "cuda_oom"  # GPU memory exhausted while loading, profiling, capturing or warming up
    KV_CACHE_INSUFFICIENT = (
        "kv_cache_insufficient"  # not enough KV cache for one max-length request
    )
    GPU_MEMORY_UTILIZATION = (
        "gpu_memory_utilization"  # free memory at start below the requested share
    )
    NCCL_ERROR = "nccl_error"  # collective communication failed
    UNSUPPORTED_HARDWARE = "unsupported_hardware"  # GPU too old/new for the build, dtype or kernel
    MISSING_OR_CORRUPT_WEIGHTS = (
        "missing_or_corrupt_weights"  # files absent, truncated or unreadable
    )
    CONFIG_ERROR = "config_error"  # bad flags or model configuration
    PORT_IN_USE = "port_in_use"  # the HTTP port is already taken
    ENGINE_CORE_DIED = "engine_core_died"  # a process died and nothing more specific is in the log
    HOST_OOM = "host_oom"  # killed by the kernel (exit -9)
    TIMEOUTS = "timeouts"  # the engine's own startup timeout, or a stall bringup detected

    @property
    def is_retryable(self) -> bool:
        """Whether changing a setting and starting again can help."""
        return self not in _NOT_RETRYABLE


_NOT_RETRYABLE = frozenset(
    {
        FailureClass.CONFIG_ERROR,
        FailureClass.MISSING_OR_CORRUPT_WEIGHTS,
        FailureClass.UNSUPPORTED_HARDWARE,
    }
)


class Engine(StrEnum):
    """Inference engines bringup has knowledge packs for."""

    VLLM = "vllm"
    SGLANG = "sglang"
    TGI = "tgi"
    LLAMACPP = "llamacpp"
    OLLAMA = "ollama"


class Outcome(StrEnum):
    """Verdict on a startup log (``diagnose``) or a followed startup (``run``/``watch``)."""

    READY = "ready"  # reached ready (and, live, answered a smoke request)
    FAILED = "failed"  # a root cause was found, or the process died
    HUNG = "hung"  # the log stops in a phase known to hang (NCCL init) without an error
    INCOMPLETE = "incomplete"  # the log ends mid-startup with no verdict
    STALLED = "stalled"  # live only: no progress for --stall, or past --deadline
