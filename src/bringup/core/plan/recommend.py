"""Recommendations: flags to append that the planner has checked make the startup fit.

Every candidate is re-planned; only settings predicted to fit, with at least
:data:`MARGIN_BYTES` free at the worst moment, are recommended:

- ``--max-num-seqs``: the largest value (a multiple of 64, or a power of two below 64) that
  leaves headroom for the sampler warmup and graphs;
- ``--gpu-memory-utilization``: lower (warmup, graphs, other processes) or higher (KV) in
  steps of 0.01;
- ``--max-model-len``: the longest (a multiple of 256) one request of which fits the KV pool;
- ``--kv-cache-dtype fp8``: halves KV bytes per token;
- ``--tensor-parallel-size``: sizes vLLM accepts for the model (:mod:`.checks`: heads and KV
  heads), that fit on the GPUs there are, and fit in memory;
- ``--enforce-eager``: no graphs, when graphs are what does not fit.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from bringup.core.plan import kv as kvmod
from bringup.core.plan.budget import RankBudget, sampler_shape
from bringup.core.plan.checks import dcp_problem, parallel_problem
from bringup.core.plan.result import Recommendation
from bringup.core.plan.settings import Settings
from bringup.core.vocab import FailureClass, Phase
from bringup.units import MiB, format_bytes

if TYPE_CHECKING:
    from bringup.core.plan.planner import Outcome, Planner

MARGIN_BYTES = 256 * MiB


def recommend(planner: Planner, outcome: Outcome) -> list[Recommendation]:
    """Recommendations for a plan that does not fit (none when it fits)."""
    f = outcome.failure
    if f is None:
        return []
    s = outcome.settings
    recs: list[Recommendation | None] = []
    if f.failure_class is FailureClass.GPU_MEMORY_UTILIZATION:
        recs.append(_lower_utilization(planner, s))
    elif f.phase in (Phase.WARMUP, Phase.CUDA_GRAPH_CAPTURE):
        recs += [_max_num_seqs(planner, s), _lower_utilization(planner, s)]
        if f.phase is Phase.CUDA_GRAPH_CAPTURE:
            recs.append(_eager(planner, s))
    elif f.failure_class is FailureClass.KV_CACHE_INSUFFICIENT:
        recs += [
            _max_model_len(planner, outcome),
            _raise_utilization(planner, s),
            _fp8_kv(planner, s),
        ]
        recs += list(_tensor_parallel(planner, s))
    elif f.phase is Phase.MEMORY_PROFILING:
        recs += [_max_num_batched_tokens(planner, s), *_tensor_parallel(planner, s)]
    else:  # weights do not fit, or tp does not divide the heads / exceeds the GPUs
        recs += list(_tensor_parallel(planner, s))
    return [r for r in recs if r is not None]


def _fits(planner: Planner, s: Settings) -> bool:
    o = planner.evaluate(s)
    return o.fits and o.rank.headroom >= MARGIN_BYTES


def _nice_below(n: int) -> Iterator[int]:
    """Candidate max_num_seqs values below ``n``, largest first."""
    start = (n - 1) // 64 * 64
    yield from range(start, 63, -64)
    p = 32
    while p >= 1:
        if p < n:
            yield p
        p //= 2


def _max_num_seqs(planner: Planner, s: Settings) -> Recommendation | None:
    for n in _nice_below(s.max_num_seqs):
        candidate = s.with_(max_num_seqs=n)
        if _fits(planner, candidate):
            r = planner.evaluate(candidate).rank
            return Recommendation("--max-num-seqs", str(n), _seqs_why(r, candidate))
    return None


def _seqs_why(r: RankBudget, s: Settings) -> str:
    """What fits at the recommended max_num_seqs, in the terms of the model runner."""
    left = f"leaving {format_bytes(r.headroom)} free"
    if r.sampler:
        return (
            f"largest value whose sampler warmup ({sampler_shape(r, s)} beyond the profile "
            f"run) fits, {left}"
        )
    if r.vocab == 0:  # an earlier pipeline stage decides: no sampler there
        return f"largest value whose CUDA graphs fit, {left}"
    where = "inside" if r.graphs_in_budget else "outside"
    return (
        f"largest value whose CUDA graphs ({format_bytes(r.graphs)}, {where} the budget) and "
        f"the sampler pass the warmup repeats ({sampler_shape(r, s)}, inside the budget) "
        f"fit, {left}"
    )


def _lower_utilization(planner: Planner, s: Settings) -> Recommendation | None:
    u = round(s.gpu_memory_utilization - 0.01, 2)
    while u >= 0.5:
        candidate = s.with_(gpu_memory_utilization=u)
        if _fits(planner, candidate):
            r = planner.evaluate(candidate).rank
            return Recommendation(
                "--gpu-memory-utilization",
                f"{u:.2f}",
                f"leaves {format_bytes(r.headroom)} outside the budget for what comes after "
                f"the KV pool; KV cache shrinks to {format_bytes(max(0, r.kv))} per GPU",
            )
        u = round(u - 0.01, 2)
    return None


def _raise_utilization(planner: Planner, s: Settings) -> Recommendation | None:
    u = round(s.gpu_memory_utilization + 0.01, 2)
    while u <= 0.98:
        candidate = s.with_(gpu_memory_utilization=u)
        if _fits(planner, candidate):
            r = planner.evaluate(candidate).rank
            return Recommendation(
                "--gpu-memory-utilization",
                f"{u:.2f}",
                f"gives the KV cache {format_bytes(r.kv)} per GPU, enough for one "
                f"{s.max_model_len}-token request, with {format_bytes(r.headroom)} still free",
            )
        u = round(u + 0.01, 2)
    return None


def _max_model_len(planner: Planner, outcome: Outcome) -> Recommendation | None:
    s, r = outcome.settings, outcome.rank
    if r.kv <= 0:
        return None
    longest = kvmod.longest_fitting_len(r.spec, r.kv, s.max_num_batched_tokens, s.max_model_len)
    length = longest // 256 * 256
    if length < 256 or not _fits(planner, s.with_(max_model_len=length)):
        return None
    return Recommendation(
        "--max-model-len",
        str(length),
        f"the longest request (rounded down to 256) whose KV cache fits the "
        f"{format_bytes(r.kv)} available per GPU",
    )


def _fp8_kv(planner: Planner, s: Settings) -> Recommendation | None:
    if s.kv_cache_dtype.startswith("fp8") or not _fits(planner, s.with_(kv_cache_dtype="fp8")):
        return None
    o = planner.evaluate(s.with_(kv_cache_dtype="fp8"))
    return Recommendation(
        "--kv-cache-dtype",
        "fp8",
        f"halves KV bytes per token to {o.rank.spec.bytes_per_token}; "
        f"{kvmod.tokens_in(o.rank.spec, o.rank.kv)} tokens fit",
    )


def _max_num_batched_tokens(planner: Planner, s: Settings) -> Recommendation | None:
    n = s.max_num_batched_tokens // 2
    while n >= max(s.max_num_seqs, 256):
        if _fits(planner, s.with_(max_num_batched_tokens=n)):
            return Recommendation(
                "--max-num-batched-tokens",
                str(n),
                "a smaller profile batch lowers the activation peak enough to fit",
            )
        n //= 2
    return None


def _eager(planner: Planner, s: Settings) -> Recommendation | None:
    if s.enforce_eager or not _fits(planner, s.with_(enforce_eager=True)):
        return None
    return Recommendation(
        "--enforce-eager", None, "no CUDA graphs: their pool is what does not fit (slower decode)"
    )


def _tensor_parallel(planner: Planner, s: Settings) -> Iterator[Recommendation]:
    gpus = planner.gpus.count // s.pipeline_parallel_size
    fitting = [
        tp
        for tp in range(1, gpus + 1)
        if tp != s.tensor_parallel_size
        and parallel_problem(
            planner.arch, tp, s.pipeline_parallel_size, expert_parallel=s.enable_expert_parallel
        )
        is None
        and dcp_problem(planner.arch, tp, s.decode_context_parallel_size) is None
        and _fits(planner, s.with_(tensor_parallel_size=tp))
    ]
    if fitting:
        o = planner.evaluate(s.with_(tensor_parallel_size=fitting[0]))
        others = ", ".join(str(t) for t in fitting[1:])
        yield Recommendation(
            "--tensor-parallel-size",
            str(fitting[0]),
            f"the smallest tensor-parallel size that fits ({format_bytes(o.rank.weights)} of "
            f"weights per GPU){'; also fit: ' + others if others else ''}",
        )
