"""How sure a plan's verdict is: the same settings under what the facts leave open.

"Honest confidence beats a confident wrong answer" (issue 25). The verdict is ``uncertain``
when an alternative that the facts do not rule out gives another verdict (fits against not,
or another failure first); each reason names the alternative and what it gives. The plan's
numbers stay what vLLM's rules give: the error bars below are measured on public startups
and are **not** terms of the point estimate, only of the confidence (and of
``kv_cache.tokens_low``). Four sources, each a general rule:

(a) **the engine version is not known** (no ``--engine-version``, no ``--calibrate`` log):
    the settings are evaluated under the rules of every vLLM release bringup has distinct
    rules for (0.5.0 to 0.33: per minor release, and per patch of 0.5 and 0.6, whose V0
    sampler and accounting changed by patch). What differs: the context inside the budget
    before 0.9, the CUDA-graph pool charged to it from 0.21, the model runner, the capture
    sizes and the defaults (``settings``, ``peaks``). Uncertain when they disagree; the reason
    gives the version ranges and their verdicts.
(b) **a model class whose non-KV memory the plan under-counts**: MoE models of at least
    :data:`LARGE_MOE_PARAMETERS` parameters with FP8 or INT4 weights. On 6 of 7 public
    startups of such models vLLM's KV pool was smaller than planned by up to
    :data:`LARGE_MOE_RESIDUAL_BYTES` per GPU (the list below), at TP 1 to 8, with no term in
    vLLM's code found for it. The pessimistic alternative charges that much more to every
    rank's budget (the error bar, measured on data the planner's constants were not set from).
(c) **memory shared with the CPU** (the catalog's ``unified`` parts: GB10, MI300A, Strix
    Halo, GH200) without ``--gpu-free``: what the OS and the host side hold is unknown. The
    pessimistic alternative has :data:`UNIFIED_HELD_SHARE` of the memory held at the start
    (vLLM 0.9+ refuses a start with less free than ``T x u``) and the same share of vLLM's
    budget ``T x u`` taken inside it: on the unified parts vLLM's ``MemorySnapshot`` reads the
    system's available memory, so what the host side takes during the start counts as
    non-torch memory in the budget. How much it takes is not known; the share held at boot
    bounds it here, scaled to the budget (a small budget loads a small model).
(d) **a margin inside the plan's measured error**: the KV pool against one
    ``max_model_len`` request, within :data:`KV_MEDIAN_ERROR` of the pool; and, while
    graphs are captured outside the budget (before 0.21), the capture room and the headroom
    at the sampler warmup within :data:`GRAPH_MEDIAN_ERROR` of the graph pool.

A plan calibrated from a log of the same model and GPUs measured its overhead: (b) and (d)
do not apply to it, and its version is the log's. An uncertain verdict exits like its
nominal one (``bringup plan``: 0 fits, 1 does not fit).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bringup.core.plan import kv as kvmod
from bringup.core.plan.arch import Architecture
from bringup.core.plan.budget import Found, RankBudget, first_failure
from bringup.core.plan.planner import Outcome, Planner, kv_cache
from bringup.core.plan.quant import format_from_config
from bringup.core.plan.result import Plan
from bringup.core.plan.settings import NEWEST_KNOWN, OLDEST_KNOWN, PATCH_RULES, Settings
from bringup.units import GiB, format_bytes

# (b) The KV pool per GPU the plan gave minus the one vLLM printed, GiB, for MoE models of
# 100B+ parameters in FP8/INT4 (bench/results/plan_memory_batch2.md at main 8b35e99, points
# of ../shared/corpus/memory/batch2.jsonl; bench/RESULTS.md "Issue 25, memory: what was
# looked at (i25k)" for what was ruled out as the missing term):
LARGE_MOE_POOL_SHORTFALLS_GIB = (
    3.41,  # Qwen3-235B-A22B FP8, TP4 H100, ~0.10 (11.52 planned / 8.11)
    5.71,  # the same at max_model_len 240k, TP4 EP, 0.20 (7.03 / 1.32)
    8.36,  # MiniMax-M2.7 FP8, TP2 H200, 0.20 (20.56 / 12.20)
    5.31,  # MiniMax-M2.7 FP8, TP4 A100 (Marlin), 0.20 (18.03 / 12.72)
    8.39,  # Kimi-K2.5 INT4, TP8 H200, 0.15, eager (54.23 / 45.84)
    7.99,  # the same with CUDA graphs (54.23 / 46.24)
    0.13,  # Qwen3-235B-A22B FP8, TP8 EP L40S, 0.10.2 (10.78 / 10.65)
)
# the error bar: the largest shortfall seen (the smallest is none: the L40S point, and
# MiniMax-M2.5 FP8 on MI300X in bench/results/plan_memory.md, +1.4 % KV tokens)
LARGE_MOE_RESIDUAL_BYTES = round(max(LARGE_MOE_POOL_SHORTFALLS_GIB) * GiB)
# the class: the startups above are of 229B to 1T parameters; the MoE models below it that
# the corpus holds are planned within their error (Qwen3-30B-A3B AWQ on an RTX 3090 +1.3 %
# KV tokens, bench/results/plan_memory.md point 106), so the line is drawn between them, at
# a round 100B, not at a fitted figure
LARGE_MOE_PARAMETERS = 100_000_000_000
# FP8 (block or per channel) and INT4 (AWQ, GPTQ, compressed-tensors w4a16) weights; MXFP4 is
# left out: gpt-oss-120b's startups are planned within 0.65 GiB (plan_memory_batch2.md)
UNDERCOUNTED_FORMATS = frozenset({"fp8", "fp8-channel", "awq", "gptq", "int4"})

# (c) On DGX Spark (GB10, 121.69 GiB as CUDA reports it), free memory at boot caps at
# 101.3-102.2 GiB, headless and with the page cache dropped: 16-17 % held
# (github.com/MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks issue 47); vLLM's own GB10 recipe
# needs --gpu-memory-utilization 0.85, "GB10's unified memory can't satisfy the default 0.92"
# (vllm-project/recipes PR 632). vLLM reads the system's available memory on the shared-memory
# parts (vllm/utils/mem_utils.py MemorySnapshot.measure, SM 8.7/11.0/12.1: Orin, Thor, Spark).
UNIFIED_HELD_SHARE = 0.17

# (d) The plan's median |error| of the KV cache tokens on startups its rules were not written
# from: 16.7 % over 15 points (bench/results/plan_memory_batch2.md at main cf852d2; 17.3 %
# before the V0 rules of 6df912e).
KV_MEDIAN_ERROR = 0.167
# The CUDA-graph pool's median |error| against vLLM's "Graph capturing finished ... took":
# 52.6 % over 20 startups (bench/results/plan_memory.md at main 8b35e99 and cf852d2).
GRAPH_MEDIAN_ERROR = 0.526


@dataclass(frozen=True, slots=True)
class Doubt:
    """One reason the verdict is uncertain."""

    label: str  # a few words for the verdict line
    why: str  # the sentence for ``uncertain_because``


@dataclass(frozen=True, slots=True)
class Facts:
    """What the plan was told, besides the settings: what decides which rules apply."""

    version_known: bool  # --engine-version, or a --calibrate log's version
    calibrated: bool = False  # corrections measured from a log of this model and GPUs
    unified_gpu: str | None = None  # the catalog name of a unified-memory part, free unknown


def verdict_key(o: Outcome) -> str:
    """``fits`` or the first failure's class: what the alternatives are compared on."""
    return _key(o.failure)


# the last patch release of each minor version whose patches change a rule
# (settings.PATCH_RULES; vLLM's releases on PyPI: 0.5.0-0.5.5, 0.6.0-0.6.6)
LAST_PATCH = {(0, 5): 5, (0, 6): 6}


def known_versions() -> list[str]:
    """Every release bringup has distinct rules for, oldest first: each minor version from
    0.5 to 0.33, and each patch of those whose patches change a rule (0.5.0 ... 0.6.6)."""
    major = OLDEST_KNOWN[0]
    assert NEWEST_KNOWN[0] == major  # one major release so far
    out: list[str] = []
    for minor in range(OLDEST_KNOWN[1], NEWEST_KNOWN[1] + 1):
        if (major, minor) in PATCH_RULES:
            last = LAST_PATCH[(major, minor)]
            out += [f"{major}.{minor}.{patch}" for patch in range(last + 1)]
        else:
            out.append(f"{major}.{minor}")
    return out


def version_doubt(nominal: Outcome, outcome_at: Callable[[str], Outcome]) -> Doubt | None:
    """(a): the verdict under every known version's rules; a doubt when they disagree."""
    keys = [(v, verdict_key(outcome_at(v))) for v in known_versions()]
    if len({k for _v, k in keys}) == 1:
        return None
    spans: list[tuple[str, str, str]] = []  # (first version, last version, verdict)
    for version, key in keys:
        if spans and spans[-1][2] == key:
            spans[-1] = (spans[-1][0], version, key)
        else:
            spans.append((version, version, key))
    ranges = ", ".join(f"{a}-{b} {k}" if a != b else f"{a} {k}" for a, b, k in spans)
    return Doubt(
        "version not given",
        f"the vLLM version is not given (planned with {nominal.settings.engine_version}'s "
        f"rules) and the verdict depends on it: {ranges} (give --engine-version)",
    )


def undercounted_class(arch: Architecture, s: Settings, parameters: int) -> str | None:
    """(b): the class's name for this model (``MoE, FP8, 235B``), or None outside it."""
    fmt = format_from_config(arch.quantization, s.quantization).method
    if arch.moe is None or fmt not in UNDERCOUNTED_FORMATS or parameters < LARGE_MOE_PARAMETERS:
        return None
    kind = "FP8" if fmt.startswith("fp8") else "INT4"
    return f"an MoE model of {parameters / 1e9:.0f}B parameters in {kind}"


def charged(ranks: Sequence[RankBudget], extra: int) -> list[RankBudget]:
    """Every rank with ``extra`` bytes more non-KV memory inside its budget."""
    return [
        dataclasses.replace(r, kv=r.kv - extra, non_torch_in_budget=r.non_torch_in_budget + extra)
        for r in ranks
    ]


def _words(found: Found | None) -> str:
    return "fits" if found is None else f"{found.failure_class.value} at {found.phase.value}"


@dataclass(frozen=True, slots=True)
class _Residual:
    """One error bar of (b) or (c): bytes more inside every rank's budget, and for (c) the
    free memory at start."""

    label: str
    what: str
    charged: int
    free_at_start: int | None = None


def _residuals(
    planner: Planner, nominal: Outcome, facts: Facts, parameters: int
) -> list[_Residual]:
    s, gpus = nominal.settings, planner.gpus
    out: list[_Residual] = []
    model_class = None if facts.calibrated else undercounted_class(planner.arch, s, parameters)
    if model_class is not None:
        what = (
            f"for {model_class} vLLM kept up to {format_bytes(LARGE_MOE_RESIDUAL_BYTES)} per "
            "GPU more non-KV memory than the plan counts on public startups"
        )
        out.append(_Residual("model class", what, LARGE_MOE_RESIDUAL_BYTES))
    if facts.unified_gpu is not None:
        held = round(UNIFIED_HELD_SHARE * gpus.total_bytes)
        taken = round(UNIFIED_HELD_SHARE * nominal.rank.requested)
        what = (
            f"{facts.unified_gpu}'s memory is shared with the CPU and what the OS holds is not "
            f"known: with {UNIFIED_HELD_SHARE:.0%} of it held at the start "
            f"({format_bytes(held)}, as on public DGX Spark boots) and of vLLM's budget taken "
            f"by the host side ({format_bytes(taken)}; --gpu-free SIZE settles it)"
        )
        free = min(gpus.free_bytes, gpus.total_bytes - held)
        out.append(_Residual("unified memory", what, taken, free))
    return out


def pessimistic_doubts(
    planner: Planner, nominal: Outcome, facts: Facts, parameters: int
) -> tuple[list[Doubt], int | None]:
    """(b) and (c): each error bar that alone gives another verdict (else, where both apply
    and only together they do, both); and the KV tokens with all of them charged (None
    where neither applies)."""
    residuals = _residuals(planner, nominal, facts, parameters)
    if not residuals:
        return [], None
    s, gpus = nominal.settings, planner.gpus

    def world(chosen: Sequence[_Residual]) -> Found | None:
        free = [r.free_at_start for r in chosen if r.free_at_start is not None]
        at = dataclasses.replace(gpus, free_bytes=min(free)) if free else gpus
        ranks = charged(nominal.ranks, sum(r.charged for r in chosen))
        return first_failure(ranks, s, at, planner.arch)

    low_rank = dataclasses.replace(
        nominal.rank, kv=nominal.rank.kv - sum(r.charged for r in residuals)
    )
    tokens_low = kv_cache(low_rank, s).tokens
    nominal_key = verdict_key(nominal)
    flips = [(r, f) for r in residuals if _key(f := world([r])) != nominal_key]
    if flips:
        return [Doubt(r.label, f"{r.what}; with it: {_words(f)}") for r, f in flips], tokens_low
    both = world(residuals)
    if len(residuals) < 2 or _key(both) == nominal_key:
        return [], tokens_low
    return [
        Doubt(r.label, f"{r.what}; with the {len(residuals)} together: {_words(both)}")
        for r in residuals
    ], tokens_low


def _key(found: Found | None) -> str:
    return "fits" if found is None else found.failure_class.value


def margin_doubts(o: Outcome) -> list[Doubt]:
    """(d): margins the verdict hangs on that are smaller than the plan's measured error."""
    s = o.settings
    out: list[Doubt] = []
    failing = o.failure.phase.value if o.failure is not None else None
    r = o.rank
    pool = max(0, r.kv)
    need = kvmod.request_bytes(r.spec, s.max_model_len, s.max_num_batched_tokens)
    if (
        pool > 0
        and failing in (None, "kv_cache_alloc")
        and abs(pool - need) < KV_MEDIAN_ERROR * pool
    ):
        side = "above" if pool >= need else "below"
        out.append(
            Doubt(
                "KV margin",
                f"the KV cache ({format_bytes(pool)} per GPU) is {abs(pool - need) / pool:.1%} "
                f"{side} what one {s.max_model_len:,}-token request needs "
                f"({format_bytes(need)}): within the plan's median KV error "
                f"({KV_MEDIAN_ERROR:.1%} on startups its rules were not written from)",
            )
        )
    for rank in o.ranks:
        doubt = _graph_doubt(rank, failing)
        if doubt is not None:
            out.append(doubt)
            break
    return out


def _graph_doubt(r: RankBudget, failing: str | None) -> Doubt | None:
    """(d) for graphs captured outside the budget: the capture room, the warmup's headroom."""
    if r.graphs_in_budget or not r.graphs:
        return None
    bar = GRAPH_MEDIAN_ERROR * r.graphs
    room = r.total - r.requested - r.context + r.activation - r.graphs
    checks = (
        ("cuda_graph_capture", "the room for CUDA graph capture", room),
        ("warmup", "the headroom at the sampler warmup", r.headroom),
    )
    for phase, what, margin in checks:
        if failing in (None, phase) and abs(margin) < bar:
            return Doubt(
                "warmup margin" if phase == "warmup" else "capture margin",
                f"{what} ({format_bytes(margin)}) is within the error of the CUDA graph pool "
                f"it hangs on ({GRAPH_MEDIAN_ERROR:.1%} of the {format_bytes(r.graphs)} "
                "planned, its median error against vLLM's figures)",
            )
    return None


def assess(
    plan: Plan,
    planner: Planner,
    facts: Facts,
    outcome_at: Callable[[str], Outcome],
) -> Plan:
    """The plan with its verdict's confidence and, under (b)/(c), ``kv_cache.tokens_low``.
    ``outcome_at(version)``: the same request evaluated under that version's rules."""
    nominal = planner.evaluate(plan.settings)
    doubts: list[Doubt] = []
    if not facts.version_known:
        doubt = version_doubt(nominal, outcome_at)
        if doubt is not None:
            doubts.append(doubt)
    pessimistic, tokens_low = pessimistic_doubts(planner, nominal, facts, plan.model.parameters)
    doubts += pessimistic
    if not facts.calibrated:
        doubts += margin_doubts(nominal)
    verdict = dataclasses.replace(
        plan.verdict,
        confidence="uncertain" if doubts else "certain",
        uncertain_because=tuple(d.why for d in doubts),
        uncertain_labels=tuple(d.label for d in doubts),
    )
    kv = dataclasses.replace(plan.kv_cache, tokens_low=tokens_low)
    return dataclasses.replace(plan, verdict=verdict, kv_cache=kv)
