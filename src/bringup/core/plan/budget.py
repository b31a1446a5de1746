"""vLLM's budget rule on one GPU rank, and the first failure a startup would hit.

Per rank, with ``T`` the GPU's total memory and ``u`` the utilization (engines.md 1.6):

1. ``requested = ceil(T x u)``; the startup fails at ``distributed_init`` if the free memory
   at start is below it (other processes count).
2. Before the snapshot, the CUDA context and NCCL take ``C``: outside the budget.
3. Weights ``W`` load (``cuda_oom`` at ``weights_loading`` if ``C + W > T``), the profile run
   adds the activation peak ``A`` and non-torch growth ``N`` (``cuda_oom`` at
   ``memory_profiling`` if ``C + W + A + N > T``).
4. ``KV = requested - W - A - N`` (``- G`` from 0.21, when the graph pool ``G`` is estimated
   and charged to the budget); the minimum over ranks is used. ``KV ≤ 0`` or less than one
   ``max_model_len`` request is ``kv_cache_insufficient`` at ``kv_cache_alloc``.
5. After the pool: graphs are captured (before 0.21 outside the budget) into the room the
   profile peak ``A`` left in the budget and the memory outside it (``cuda_oom`` at
   ``cuda_graph_capture`` when ``G > T - requested - C + A``), then the sampler warmup runs.
   The profile run already measured a sampler pass inside ``A``; what the warmup needs beyond
   it, ``S`` (``peaks``: 0 for the V1 runner, the V2 runner's extra fp32 tensors), and the
   graphs outside the budget come out of ``headroom = T - requested - C - G_outside - S``,
   which must stay ≥ 0, else ``cuda_oom`` at ``warmup``. With the V1 runner this happens when
   graphs outside the budget fill the room kept for the sampler (vllm#15105, llm-d#787 at
   0.95, both before 0.21); the rule is conservative by ``A`` minus the sampler's own peak.

Per version (from vLLM's code; the setting that carries each rule is in ``settings``):

- **V1 before 0.9** (``vllm/v1/worker/gpu_worker.py::determine_available_memory``, 0.7-0.8):
  ``KV = T x u - (torch peak + non-torch)``, with non-torch the device's used memory minus
  torch's: the CUDA context, NCCL and other processes' memory are *inside* the budget, and
  there is no free-memory check at start (``Settings.context_in_budget``);
- **the V0 engine** (``vllm/worker/worker.py::determine_num_available_blocks``, every release
  0.5-0.10): no free-memory check at start; the non-torch baseline is read in ``init_device``
  after the CUDA context and before distributed init, so the context and other processes'
  memory are *outside* the budget and NCCL is inside; except 0.6.4, which charged the whole
  device's non-torch use like V1 before 0.9 (``settings.whole_device_in_budget`` cites each
  release's code). V0 profiles one batch of ``max_num_batched_tokens`` = ``max(max_model_len,
  2048)`` unless chunked prefill is on (``settings.v0_batch_defaults``);
- **0.9 to 0.20** (``gpu_worker.py`` with ``memory_profiling(init_snapshot, ...)``): a snapshot
  after device init; ``non_kv = weights + torch peak increase + non-torch increase``; the
  context is outside the budget; startup fails when the free memory is below ``T x u``;
  graphs are captured after the pool, outside the budget;
- **0.21 and later** (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` defaults to True in
  ``vllm/envs.py``): the CUDA-graph estimate is subtracted from the KV budget.

The sampler warmup per model runner (``settings.model_runner``; the bytes in ``peaks``):

- **V1 runner** (``vllm/v1/worker/gpu_worker.py::compile_or_warm_up_model``, after
  ``capture_model``, ``_dummy_sampler_run`` on ``min(max_num_seqs, max_num_batched_tokens)``
  rows): the same pass as the end of ``gpu_model_runner.py::profile_run``, so ``S = 0``;
- **V2 runner** (``vllm/v1/worker/gpu/warmup.py::_warmup_kernels``, after the KV pool, before
  graph capture): the profile skipped top-k/top-p/logprobs, so ``S`` is their fp32 tensors;
- **V0 engine**: no warmup after the pool (``S = 0``).

The parts of :class:`~bringup.core.plan.result.PerGpu` add up to ``T``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from bringup.core import vllm_compile
from bringup.core.checkpoint import TensorInfo
from bringup.core.plan import kv as kvmod
from bringup.core.plan import peaks
from bringup.core.plan.arch import Architecture
from bringup.core.plan.checks import parallel_problem
from bringup.core.plan.quant import mxfp4_moe_padding
from bringup.core.plan.settings import Settings, parse_release, parse_version
from bringup.core.plan.weights import Parallel, StageWeights, weights_per_stage
from bringup.core.vocab import FailureClass, Phase
from bringup.core.words import plural
from bringup.units import format_bytes


@dataclass(frozen=True, slots=True)
class GpuSet:
    """The GPUs one instance runs on."""

    name: str
    count: int  # GPUs available
    total_bytes: int  # per GPU (the smallest)
    free_bytes: int  # the least free memory among them at start (= total when unknown)
    treats_as_a100: bool = False
    compute_capability: tuple[int, int] | None = None  # from the catalog, when known
    interconnect: str | None = None  # "nvlink" | "pcie" | "xgmi" (AMD)


@dataclass(frozen=True, slots=True)
class Calibration:
    """Corrections measured from a successful startup log of the same model and GPUs."""

    weights_scale: float = 1.0
    overhead_delta_bytes: int = 0  # measured minus predicted (activation + non-torch [+ graphs])
    cuda_graph_bytes: int | None = None
    kv_bytes_per_token_scale: float = 1.0


@dataclass(frozen=True, slots=True)
class RankBudget:
    """Everything on one rank of one pipeline stage, in bytes."""

    stage: int
    total: int
    requested: int
    weights: int
    activation: int
    non_torch_in_budget: int
    context: int  # outside the budget
    graphs: int
    graphs_in_budget: bool
    kv: int
    sampler: int
    spec: kvmod.KvSpec
    vocab: int = 0  # the padded vocabulary the sampler runs over (last stage; else 0)
    capture: vllm_compile.GraphCapture | None = None  # the graphs ``graphs`` is for

    @property
    def headroom(self) -> int:
        """Free at the worst moment after the KV pool exists (sampler warmup)."""
        graphs_outside = 0 if self.graphs_in_budget else self.graphs
        # an overdrawn budget allocates no pool: its shortfall comes out of the headroom
        return (
            self.total
            - self.requested
            - self.context
            - graphs_outside
            - self.sampler
            + min(self.kv, 0)
        )


def stages_for(
    arch: Architecture,
    tensors: Sequence[TensorInfo],
    s: Settings,
    gpus: GpuSet | None = None,
) -> list[StageWeights]:
    """Weights per rank for each pipeline stage under these settings (on these GPUs)."""
    par = Parallel(
        s.tensor_parallel_size,
        s.pipeline_parallel_size,
        s.enable_expert_parallel,
        moe_padding(arch, s, gpus),
        dp=s.data_parallel_size,
    )
    return weights_per_stage(tensors, arch, par)


def moe_padding(arch: Architecture, s: Settings, gpus: GpuSet | None) -> tuple[int, int]:
    """The padding of MXFP4 experts for the GPU's MoE kernel in this version
    (:func:`~bringup.core.plan.quant.mxfp4_moe_padding`); (1, 1) for other weights."""
    quant = str((arch.quantization or {}).get("quant_method", "")).lower()
    if gpus is not None and (quant == "mxfp4" or (s.quantization or "").lower() == "mxfp4"):
        return mxfp4_moe_padding(
            gpus.compute_capability, gpus.interconnect, parse_version(s.engine_version)
        )
    return (1, 1)


def rank_budgets(
    arch: Architecture,
    stages: Sequence[StageWeights],
    gpus: GpuSet,
    s: Settings,
    calib: Calibration | None = None,
) -> list[RankBudget]:
    """The budget of one rank per pipeline stage."""
    c = calib or Calibration()
    return [_rank(arch, gpus, s, c, st, last=st.stage == len(stages) - 1) for st in stages]


def _rank(
    arch: Architecture, gpus: GpuSet, s: Settings, c: Calibration, st: StageWeights, *, last: bool
) -> RankBudget:
    tp = s.tensor_parallel_size
    spec = kvmod.kv_spec(
        arch, st.layers, tp, s.kv_cache_dtype, s.decode_context_parallel_size, s.block_size
    )
    if c.kv_bytes_per_token_scale != 1.0:
        spec = replace(
            spec,
            full_bytes_per_token=round(spec.full_bytes_per_token * c.kv_bytes_per_token_scale),
            sliding_bytes_per_token=round(
                spec.sliding_bytes_per_token * c.kv_bytes_per_token_scale
            ),
        )
    # --cpu-offload-gb: vLLM keeps up to that many bytes of each rank's weights in CPU memory
    weights = max(0, round(st.total_bytes * c.weights_scale) - s.cpu_offload_bytes)
    activation = peaks.activation_peak_bytes(
        arch,
        tp,
        s.max_num_seqs,
        s.max_num_batched_tokens,
        last_stage=last,
        expert_parallel=s.enable_expert_parallel,
        runner=s.model_runner,
        dp=s.data_parallel_size,
        release=parse_release(s.engine_version),
    )
    activation = max(0, activation + c.overhead_delta_bytes)
    capture = graph_capture(arch, s)
    graphs = peaks.cuda_graph_bytes(
        arch,
        st.layers[1] - st.layers[0],
        s.max_num_seqs,
        enforce_eager=s.enforce_eager,
        version=parse_version(s.engine_version),
        v0_engine=s.v0_engine,
        max_num_batched_tokens=s.max_num_batched_tokens,
        capture=capture,
    )
    if c.cuda_graph_bytes is not None and capture.mode != "NONE":
        graphs = c.cuda_graph_bytes
    in_budget = s.cuda_graphs_in_budget
    requested = math.ceil(gpus.total_bytes * s.gpu_memory_utilization)
    non_torch = peaks.non_torch_growth_bytes(s.world_size)
    context = peaks.context_bytes(s.world_size)
    others = gpus.total_bytes - gpus.free_bytes
    if s.context_in_budget:
        # V1 before 0.9 and V0 0.6.4 (settings.whole_device_in_budget): non-torch memory is
        # the whole device's use minus torch's, so the CUDA context, NCCL and other processes'
        # memory are charged to the budget, and no free-memory check precedes it
        non_torch += context + others
        context = 0
    elif s.v0_engine:
        # the other V0 releases: the baseline is taken after the CUDA context, before NCCL
        # (settings.whole_device_in_budget); other processes stay outside, unchecked
        nccl = peaks.nccl_bytes(s.world_size)
        non_torch += nccl
        context += others - nccl
    kv = requested - weights - activation - non_torch - (graphs if in_budget else 0)
    sampler = (
        peaks.sampler_warmup_bytes(arch, s.max_num_seqs, s.max_num_batched_tokens, s.model_runner)
        if last
        else 0
    )
    return RankBudget(
        st.stage,
        gpus.total_bytes,
        requested,
        weights,
        activation,
        non_torch,
        context,
        graphs,
        in_budget,
        kv,
        sampler,
        spec,
        peaks.padded_vocab(arch) if last else 0,
        capture,
    )


def graph_capture(arch: Architecture, s: Settings) -> vllm_compile.GraphCapture:
    """The CUDA graphs these settings capture: the flags' compilation config read with the
    version's rules (``core.vllm_compile.graph_capture``), gpt-oss's own ceiling."""
    return vllm_compile.graph_capture(
        s.compilation,
        parse_version(s.engine_version),
        max_num_seqs=s.max_num_seqs,
        max_num_batched_tokens=s.max_num_batched_tokens,
        enforce_eager=s.enforce_eager,
        v0_engine=s.v0_engine,
        ceiling=peaks.capture_ceiling(arch),
    )


def tightest(ranks: Sequence[RankBudget], s: Settings) -> RankBudget:
    """The rank that decides: the first to fail, else the one with the least KV capacity."""
    failing = [r for r in ranks if _failure(r, s, None) is not None]
    if failing:
        return failing[0]
    return min(
        ranks,
        key=lambda r: kvmod.max_concurrency(
            r.spec, r.kv, s.max_model_len, s.max_num_batched_tokens
        ),
    )


@dataclass(frozen=True, slots=True)
class Found:
    """A predicted failure."""

    failure_class: FailureClass
    phase: Phase
    reason: str


def first_failure(
    ranks: Sequence[RankBudget], s: Settings, gpus: GpuSet, arch: Architecture
) -> Found | None:
    """The first failure in startup order, over all ranks; None if the startup would succeed."""
    config = config_failure(arch, s, gpus)
    if config is not None:
        return config
    found = [f for f in (_failure(r, s, gpus) for r in ranks) if f is not None]
    return min(found, key=lambda f: f.phase.order) if found else None


def config_failure(arch: Architecture, s: Settings, gpus: GpuSet) -> Found | None:
    """Settings vLLM rejects before touching a GPU."""
    tp = s.tensor_parallel_size
    if s.local_gpus > gpus.count:
        layout = "tensor x pipeline parallel"
        if s.data_parallel_size > 1:
            local = s.data_parallel_size_local or s.data_parallel_size
            layout = f"tensor x pipeline x data parallel ({local} DP {plural(local, 'rank')} here)"
        return Found(
            FailureClass.CONFIG_ERROR,
            Phase.CONFIG,
            f"{layout} = {s.local_gpus} GPUs, but only {gpus.count} "
            f"{plural(gpus.count, 'is')} available",
        )
    problem = parallel_problem(
        arch, tp, s.pipeline_parallel_size, expert_parallel=s.enable_expert_parallel
    )
    if problem is not None:
        return Found(FailureClass.CONFIG_ERROR, Phase.CONFIG, problem)
    if s.max_model_len > arch.max_position_embeddings and not s.allow_long_max_model_len:
        return Found(FailureClass.CONFIG_ERROR, Phase.CONFIG, long_max_model_len(arch, s))
    if s.max_num_batched_tokens < s.max_num_seqs:
        return Found(
            FailureClass.CONFIG_ERROR,
            Phase.CONFIG,
            f"max_num_batched_tokens ({s.max_num_batched_tokens}) must be at least max_num_seqs ({s.max_num_seqs})",
        )
    return None


def long_max_model_len(arch: Architecture, s: Settings) -> str:
    """vLLM's refusal of a max_model_len above the model's own, in the plan's words
    (``vllm/config/model.py::_get_and_verify_max_len``: a ValueError at config time unless
    ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``)."""
    return (
        f"max_model_len {s.max_model_len} is above the model's {arch.max_position_embeddings} "
        f"({arch.max_len_key} in config.json): vLLM refuses to start unless "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, and with it a RoPE model's positions past "
        f"{arch.max_position_embeddings} give NaN"
    )


def _failure(r: RankBudget, s: Settings, gpus: GpuSet | None) -> Found | None:
    fb = format_bytes
    checked = not (s.context_in_budget or s.v0_engine)  # no V0 release checks it
    if gpus is not None and checked and gpus.free_bytes < r.requested:
        return Found(
            FailureClass.GPU_MEMORY_UTILIZATION,
            Phase.DISTRIBUTED_INIT,
            f"free memory at start ({fb(gpus.free_bytes)}) is below utilization "
            f"{s.gpu_memory_utilization} x {fb(r.total)} = {fb(r.requested)}",
        )
    if r.context + r.weights > r.total:
        return Found(
            FailureClass.CUDA_OOM,
            Phase.WEIGHTS_LOADING,
            f"weights need {fb(r.weights)} per GPU, more than the {fb(r.total - r.context)} a GPU has",
        )
    if r.context + r.weights + r.activation + r.non_torch_in_budget > r.total:
        return Found(
            FailureClass.CUDA_OOM,
            Phase.MEMORY_PROFILING,
            f"weights {fb(r.weights)} + profile peak {fb(r.activation)} exceed the GPU",
        )
    if r.kv <= 0:
        return Found(
            FailureClass.KV_CACHE_INSUFFICIENT,
            Phase.KV_CACHE_ALLOC,
            f"no memory left for the KV cache: {fb(r.requested)} budget minus weights, "
            f"activations{' and graphs' if r.graphs_in_budget else ''} is {fb(r.kv)}",
        )
    need = kvmod.request_bytes(r.spec, s.max_model_len, s.max_num_batched_tokens)
    if need > r.kv:
        longest = kvmod.longest_fitting_len(r.spec, r.kv, s.max_num_batched_tokens, s.max_model_len)
        return Found(
            FailureClass.KV_CACHE_INSUFFICIENT,
            Phase.KV_CACHE_ALLOC,
            f"one request of max_model_len {s.max_model_len} needs {fb(need)} of KV cache, "
            f"{fb(r.kv)} is available; the longest that fits is {longest}",
        )
    # the graphs are captured into the room the profile peak left and the memory outside
    room = r.total - r.requested - r.context + r.activation
    if s.v0_engine and room < 0:
        # V0 allocates the pool with the CUDA context and other processes outside its budget
        # (settings.whole_device_in_budget) and checks nothing before it
        return Found(
            FailureClass.CUDA_OOM,
            Phase.KV_CACHE_ALLOC,
            f"the KV pool fills the {fb(r.requested)} budget, but the CUDA context and other "
            f"processes hold {fb(r.context)} outside it: {fb(-room)} more than the GPU has",
        )
    if not r.graphs_in_budget and r.graphs > room:
        return Found(
            FailureClass.CUDA_OOM,
            Phase.CUDA_GRAPH_CAPTURE,
            f"CUDA graphs need {fb(r.graphs)} outside the budget, {fb(room)} is left",
        )
    # V0 has no sampler warmup after the pool (vllm/worker/worker.py::_warm_up_model captures
    # the graphs only): nothing more to fit once they are captured
    if r.headroom < 0 and not s.v0_engine:
        return Found(FailureClass.CUDA_OOM, Phase.WARMUP, warmup_shortfall(r, s))
    return None


RUNNER_NAMES = {"v0": "V0 engine", "v1": "V1 model runner", "v2": "V2 model runner"}


def sampler_shape(r: RankBudget, s: Settings, n: int | None = None) -> str:
    """``1024 dummy requests x 200,064 vocabulary x 12 B = 2.29 GiB``: the warmup's tensors
    beyond the profile (V2), else the profile run's sampler pass that the warmup repeats."""
    rows = peaks.sampler_requests(s.max_num_seqs, s.max_num_batched_tokens) if n is None else n
    per = peaks.warmup_extra_bytes_per_element(s.model_runner) or (
        peaks.profile_sampler_bytes_per_element(s.model_runner, parse_release(s.engine_version))
    )
    return (
        f"{rows} dummy requests x {r.vocab:,} vocabulary x {per} B = "
        f"{format_bytes(rows * r.vocab * per)}"
    )


def warmup_shortfall(r: RankBudget, s: Settings) -> str:
    """Why the sampler warmup does not fit, for this model runner (module docstring)."""
    fb = format_bytes
    runner = f"vLLM {s.engine_version}'s {RUNNER_NAMES.get(s.model_runner, s.model_runner)}"
    if r.sampler:
        return (
            f"the sampler warmup of {runner} needs {sampler_shape(r, s)} beyond what its "
            f"profile run measured (which skipped top-k, top-p and logprobs); only "
            f"{fb(r.sampler + r.headroom)} is free outside the budget"
        )
    pass_ = (
        f"the sampler pass {runner} repeats in the warmup ({sampler_shape(r, s)}, inside the budget)"
        if r.vocab
        else f"what {runner} allocates in the warmup on stage {r.stage} (no sampler there)"
    )
    if not r.graphs_in_budget and r.graphs:
        return (
            f"CUDA graphs ({fb(r.graphs)}, captured outside the budget before 0.21) take the "
            f"room the profile run kept for {pass_}; the warmup comes {fb(-r.headroom)} short"
        )
    return (
        f"the memory outside the budget ({fb(r.total - r.requested)}) is less than the CUDA "
        f"context and NCCL ({fb(r.context)}) before {pass_}; {fb(-r.headroom)} short"
    )
