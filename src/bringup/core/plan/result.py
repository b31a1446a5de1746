"""The plan as values: exactly the ``bringup plan --json`` object.

``{"model": {...}, "settings": {...}, "per_gpu": {...}, "kv_cache": {...},
"verdict": {"fits", "failure_class", "phase", "reason", "confidence", "uncertain_because"},
"recommendations": [{"flag", "value", "why"}],
"decode": {...} or null, "sampler_warmup": {...} or null, "startup": {...} or null}`` (``decode``: :class:`~bringup.core.plan.decode.DecodeSpeed`)
(the verdict's ``failure_class`` keeps that name in JSON, as the issue spells it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bringup.core.plan.decode import DecodeSpeed
from bringup.core.plan.settings import Settings
from bringup.core.startup_time import StartupPrediction
from bringup.core.vocab import FailureClass, Phase


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What model this is."""

    architecture: str
    parameters: int
    weights_bytes_total: int  # all ranks together, as stored (no replication or padding)


@dataclass(frozen=True, slots=True)
class PerGpu:
    """One GPU (the tightest rank), in bytes. The parts add up to ``total_bytes``."""

    total_bytes: int
    weights_bytes: int
    activation_peak_bytes: int
    non_torch_bytes: int  # CUDA context + NCCL (before vLLM's snapshot) + growth while profiling
    cuda_graph_bytes: int
    kv_cache_bytes: int
    sampler_warmup_bytes: int
    headroom_bytes: int  # what is still free at the worst moment after the KV pool exists
    # the CUDA graphs the pool is planned for: vLLM's cudagraph_mode ("NONE": none captured)
    # and the batch sizes captured, ascending (core.vllm_compile.graph_capture)
    cuda_graph_mode: str = "NONE"
    cuda_graph_capture_sizes: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class KvCache:
    """KV capacity. Under decode context parallelism ``tokens`` and ``max_concurrency`` are
    counted across the DCP group of ``dcp_group_size`` ranks (each holds 1/N of every
    request's tokens), as vLLM reports them; ``bytes_per_token`` stays one rank's."""

    bytes_per_token: int  # one token, every attention layer, one rank
    tokens: int
    max_concurrency: float  # requests of max_model_len tokens at once
    dcp_group_size: int = 1  # the ranks ``tokens`` is counted across (-dcp; 1 without it)
    # the tokens with the measured error bar of the model class or of unified memory charged
    # to the pool (core.plan.confidence); None where neither applies
    tokens_low: int | None = None


@dataclass(frozen=True, slots=True)
class SamplerWarmup:
    """The sampler warmup after the KV pool, as the plan computed it for the model runner
    (``settings.model_runner``; the rule in :mod:`~bringup.core.plan.peaks`), on the last
    pipeline stage of the tightest rank. ``[requests, vocab_size]`` is the shape of every
    tensor it holds; ``extra_bytes`` is ``per_gpu.sampler_warmup_bytes``."""

    model_runner: str  # "v1" or "v2"
    requests: int  # min(max_num_seqs, max_num_batched_tokens) dummy requests
    vocab_size: int  # the vocabulary padded to a multiple of 64, as vLLM pads it
    profile_bytes_per_element: int  # the profile run's sampler pass, inside the budget
    profile_bytes: int
    extra_bytes_per_element: int  # what the warmup needs beyond the profile: 0 (V1), 12 (V2)
    extra_bytes: int
    free_bytes: int  # outside the budget when the warmup runs (CUDA graphs there are out)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Fits, or the first failure a startup would hit, in diagnose's vocabulary; and how sure
    it is (:mod:`~bringup.core.plan.confidence`): ``"uncertain"`` when an alternative the
    facts leave open gives another verdict, each named in ``uncertain_because``."""

    fits: bool
    failure_class: FailureClass | None
    phase: Phase | None
    reason: str
    confidence: str = "certain"  # "certain" or "uncertain"
    uncertain_because: tuple[str, ...] = ()
    # a few words per reason, for the verdict line (people only)
    uncertain_labels: tuple[str, ...] = field(default=(), metadata={"json": None})


@dataclass(frozen=True, slots=True)
class Recommendation:
    """A flag to append to the server command, and why."""

    flag: str
    value: str | None  # None for boolean flags
    why: str


@dataclass(frozen=True, slots=True)
class Change:
    """One thing calibration changed: what, from → to, and the log line it came from."""

    what: str
    before: str
    after: str
    line: str | None


@dataclass(frozen=True, slots=True)
class CalibrationReport:
    """What ``--calibrate LOG`` did (the JSON ``calibration`` object)."""

    log: str
    engine_version: str | None  # the log's vLLM version (its rules were used)
    changes: tuple[Change, ...]
    mismatches: tuple[str, ...] = ()  # why the log looks like another model (when forced)


@dataclass(frozen=True, slots=True)
class FitChange:
    """One change that makes a setup that does not fit fit, as the planner planned it (the
    JSON ``what_fits`` items)."""

    change: str  # in words: "-tp 4 on 4 GPUs (2 more than given)", "--quantization fp8"
    flags: tuple[str, ...]  # the vLLM flags to set (with their values)
    model: str | None  # another checkpoint to serve (a quantized one), else None
    gpus: int  # GPUs the changed setup uses
    weights_per_gpu_bytes: int
    kv_tokens: int  # the changed setup's KV cache tokens


@dataclass(frozen=True, slots=True)
class Plan:
    """The whole prediction."""

    model: ModelInfo
    settings: Settings
    per_gpu: PerGpu
    kv_cache: KvCache
    verdict: Verdict
    recommendations: tuple[Recommendation, ...] = ()
    decode: DecodeSpeed | None = None  # batch-1 decode speed; None when the bandwidth is unknown
    warnings: tuple[str, ...] = ()  # what the plan assumed (nearest version, generic architecture)
    calibration: CalibrationReport | None = None  # what --calibrate LOG changed, and from where
    sampler_warmup: SamplerWarmup | None = None  # None on a CPU, with the V0 engine, on no KV
    startup: StartupPrediction | None = None  # time to ready, phase by phase (core.startup_time)
    what_fits: tuple[FitChange, ...] = ()  # when it does not fit: the smallest changes that do
