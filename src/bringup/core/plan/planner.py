"""Make a plan: the budget of every rank, the verdict, the recommendations.

``Planner`` holds what does not change between candidate settings (architecture, tensors,
GPUs, calibration) and caches weights per rank by parallel layout, so the recommendation
search can try many settings cheaply.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bringup.core.checkpoint import TensorInfo
from bringup.core.plan import kv as kvmod
from bringup.core.plan import peaks
from bringup.core.plan.arch import Architecture
from bringup.core.plan.budget import (
    Calibration,
    Found,
    GpuSet,
    RankBudget,
    first_failure,
    moe_padding,
    rank_budgets,
    stages_for,
    tightest,
)
from bringup.core.plan.result import KvCache, ModelInfo, PerGpu, SamplerWarmup, Verdict
from bringup.core.plan.settings import Settings, parse_version
from bringup.core.plan.weights import StageWeights, layer_of, parameter_count
from bringup.units import format_bytes


@dataclass(frozen=True, slots=True)
class Outcome:
    """One evaluation of one set of settings."""

    settings: Settings
    ranks: tuple[RankBudget, ...]
    rank: RankBudget  # the tightest
    failure: Found | None

    @property
    def fits(self) -> bool:
        """Whether the startup is predicted to succeed."""
        return self.failure is None


@dataclass
class Planner:
    """Evaluates settings for one model on one set of GPUs."""

    arch: Architecture
    tensors: Sequence[TensorInfo]
    gpus: GpuSet
    calibration: Calibration | None = None
    _stages: dict[tuple[int, int, bool, int, tuple[int, int]], list[StageWeights]] = field(
        default_factory=dict
    )

    def stages(self, s: Settings) -> list[StageWeights]:
        """Weights per rank for each stage (cached by parallel layout and MoE padding, which
        the version can change: settings of several versions share one planner)."""
        key = (
            s.tensor_parallel_size,
            s.pipeline_parallel_size,
            s.enable_expert_parallel,
            s.data_parallel_size,
            moe_padding(self.arch, s, self.gpus),
        )
        if key not in self._stages:
            self._stages[key] = stages_for(self.arch, self.tensors, s, self.gpus)
        return self._stages[key]

    def evaluate(self, s: Settings) -> Outcome:
        """Budget every rank and find the first failure."""
        ranks = tuple(rank_budgets(self.arch, self.stages(s), self.gpus, s, self.calibration))
        failure = first_failure(ranks, s, self.gpus, self.arch)
        return Outcome(s, ranks, tightest(ranks, s), failure)

    def model_info(self) -> ModelInfo:
        """Architecture, parameters and stored weight bytes."""
        layers = self.arch.num_layers
        kept = [t for t in self.tensors if (layer_of(t.name) or 0) < layers]
        return ModelInfo(
            self.arch.name, parameter_count(kept, self.arch), sum(t.nbytes for t in kept)
        )


def per_gpu(r: RankBudget) -> PerGpu:
    """The per-GPU breakdown of one rank; the parts add up to its total."""
    return PerGpu(
        total_bytes=r.total,
        weights_bytes=r.weights,
        activation_peak_bytes=r.activation,
        non_torch_bytes=r.context + r.non_torch_in_budget,
        cuda_graph_bytes=r.graphs,
        kv_cache_bytes=max(0, r.kv),
        sampler_warmup_bytes=r.sampler,
        headroom_bytes=r.headroom,
        cuda_graph_mode=r.capture.mode if r.capture and r.graphs else "NONE",
        cuda_graph_capture_sizes=r.capture.sizes if r.capture and r.graphs else (),
    )


def sampler_warmup(o: Outcome) -> SamplerWarmup | None:
    """The sampler warmup of the last pipeline stage (where the sampler runs), as computed for
    the settings' model runner; None with the V0 engine (no warmup after the KV pool)."""
    s = o.settings
    if s.model_runner == "v0":
        return None
    r = o.ranks[-1]
    n = peaks.sampler_requests(s.max_num_seqs, s.max_num_batched_tokens)
    profile = peaks.profile_sampler_bytes_per_element(s.model_runner)
    extra = peaks.warmup_extra_bytes_per_element(s.model_runner)
    return SamplerWarmup(
        model_runner=s.model_runner,
        requests=n,
        vocab_size=r.vocab,
        profile_bytes_per_element=profile,
        profile_bytes=n * r.vocab * profile,
        extra_bytes_per_element=extra,
        extra_bytes=r.sampler,
        free_bytes=r.headroom + r.sampler,
    )


def kv_cache(r: RankBudget, s: Settings) -> KvCache:
    """KV capacity of the tightest rank."""
    pool = max(0, r.kv)
    concurrency = kvmod.max_concurrency(r.spec, pool, s.max_model_len, s.max_num_batched_tokens)
    tokens = kvmod.reported_tokens(
        r.spec,
        pool,
        version=parse_version(s.engine_version),
        max_model_len=s.max_model_len,
        max_num_batched_tokens=s.max_num_batched_tokens,
        pipeline_parallel=s.pipeline_parallel_size,
    )
    return KvCache(
        r.spec.bytes_per_token, tokens, round(concurrency, 2), s.decode_context_parallel_size
    )


def verdict(o: Outcome) -> Verdict:
    """The verdict in diagnose's vocabulary."""
    if o.failure is None:
        r = o.rank
        return Verdict(
            True,
            None,
            None,
            f"fits: {format_bytes(max(0, r.kv))} of KV cache per GPU and "
            f"{format_bytes(r.headroom)} free at the sampler warmup",
        )
    return Verdict(False, o.failure.failure_class, o.failure.phase, o.failure.reason)
