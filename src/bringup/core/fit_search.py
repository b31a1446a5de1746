"""What would make a setup that does not fit fit: the smallest change of each kind, each one
planned (re-budgeted by the planner, with the recommendations' margin), never guessed.

The kinds, in the order they are printed:

- the layout: the smallest tensor-parallel size vLLM accepts for the model (heads and KV heads
  divisible, :mod:`core.plan.checks`) that fits, on as many GPUs as it needs (the plan says
  how many more than given);
- FP8 weights: ``--quantization fp8`` (vLLM quantizes BF16/FP16 weights to FP8 as it loads
  them), for an unquantized model, at the given layout or the smallest that fits;
- a quantized checkpoint of the same model that bringup bundles (``Qwen/Qwen3-30B-A3B-FP8``
  for ``Qwen/Qwen3-30B-A3B``), likewise;
- the KV cache in FP8 (``--kv-cache-dtype fp8``);
- a shorter ``--max-model-len`` (the longest multiple of 1,024 that fits);
- ``--cpu-offload-gb N``: the fewest whole GiB of each GPU's weights kept in CPU memory
  (vLLM's UVA offload: it fits, and decode crosses PCIe).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from bringup.core.checkpoint import TensorInfo
from bringup.core.plan import assemble
from bringup.core.plan.arch import Architecture
from bringup.core.plan.budget import GpuSet
from bringup.core.plan.checks import dcp_problem, parallel_problem
from bringup.core.plan.planner import Planner
from bringup.core.plan.quant import format_from_config
from bringup.core.plan.recommend import MARGIN_BYTES
from bringup.core.plan.result import FitChange, Recommendation
from bringup.core.plan.settings import Settings
from bringup.core.plan.synth import synthesize

GiB = 1024**3
TENSOR_PARALLEL = (1, 2, 4, 8, 16)  # the sizes tried, as GPU servers come
# a quantized checkpoint: (its name for people, its architecture)
Variant = tuple[str, Architecture]


def changes_that_fit(
    arch: Architecture,
    tensors: Sequence[TensorInfo] | None,
    gpus: GpuSet,
    s: Settings,
    variants: Sequence[Variant] = (),
) -> tuple[FitChange, ...]:
    """The smallest change of each kind that makes ``s`` fit (none of a kind: left out)."""
    base = assemble.planner_for(arch, tensors, gpus, s)
    layout = _layout(base, s, "", ())
    found: list[FitChange | None] = [layout]
    weights: list[FitChange | None] = []
    if arch.quantization is None and not s.quantization:
        fp8 = Planner(arch, synthesize(arch, format_from_config(None, "fp8")), gpus)
        q = s.with_(quantization="fp8")
        weights.append(_layout(fp8, q, "--quantization fp8", ("--quantization", "fp8"), keep=True))
    for name, v_arch in variants:
        planner = assemble.planner_for(v_arch, None, gpus, s)
        change = _layout(planner, s, f"the quantized checkpoint {name}", (), keep=True)
        weights.append(dataclasses.replace(change, model=name) if change else None)
    # smaller weights that need a new layout anyway count only when they need fewer GPUs
    found += [
        w
        for w in weights
        if w is not None
        and (layout is None or "--tensor-parallel-size" not in w.flags or w.gpus < layout.gpus)
    ]
    if s.kv_cache_dtype == "auto":
        found.append(_same(base, s.with_(kv_cache_dtype="fp8"), ("--kv-cache-dtype", "fp8")))
    found.append(_shorter(base, s))
    found.append(_offload(base, s))
    out: list[FitChange] = []
    for change in found:
        if change is not None and change not in out:
            out.append(change)
    return tuple(out)


def not_recommended(
    changes: Sequence[FitChange], recommendations: Sequence[Recommendation]
) -> tuple[FitChange, ...]:
    """The changes the plan's recommendations do not already make: a single flag and value
    the plan says to append is left out (another checkpoint, or more flags, stays)."""
    appended = {(r.flag, r.value) for r in recommendations}
    return tuple(
        c for c in changes if c.model or tuple(c.flags[:2]) not in appended or len(c.flags) != 2
    )


def _fits(planner: Planner, s: Settings) -> bool:
    o = planner.evaluate(s)
    return o.fits and o.rank.headroom >= MARGIN_BYTES


def _allowed(arch: Architecture, s: Settings, tp: int) -> bool:
    return (
        parallel_problem(
            arch, tp, s.pipeline_parallel_size, expert_parallel=s.enable_expert_parallel
        )
        is None
        and dcp_problem(arch, tp, s.decode_context_parallel_size) is None
    )


def _layout(
    planner: Planner, s: Settings, what: str, flags: tuple[str, ...], *, keep: bool = False
) -> FitChange | None:
    """The smallest tensor-parallel size that fits (``keep``: the given one first, and a
    change ``what`` that is not only the layout)."""
    sizes = sorted({s.tensor_parallel_size, *TENSOR_PARALLEL})
    if not keep:
        sizes = [t for t in sizes if t != s.tensor_parallel_size]
    # one planner on enough GPUs for every size tried (its weights per layout are cached)
    most = max(sizes) * s.pipeline_parallel_size
    wider = dataclasses.replace(planner.gpus, count=max(planner.gpus.count, most))
    p = Planner(planner.arch, planner.tensors, wider, planner.calibration)
    for tp in sizes:
        if not _allowed(planner.arch, s, tp):
            continue
        world = tp * s.pipeline_parallel_size
        candidate = s.with_(tensor_parallel_size=tp)
        if not _fits(p, candidate):
            continue
        words = [what] if what else []
        tp_flags: tuple[str, ...] = ()
        if tp != s.tensor_parallel_size or not what:
            more = world - planner.gpus.count
            on = f" on {world} GPU{'s' if world > 1 else ''}" + (
                f" ({more} more than given)" if more > 0 else ""
            )
            words.append(f"-tp {tp}{on}")
            tp_flags = ("--tensor-parallel-size", str(tp))
        return _change(" with ".join(words), (*flags, *tp_flags), p, candidate)
    return None


def _same(planner: Planner, candidate: Settings, flags: tuple[str, ...]) -> FitChange | None:
    if not _fits(planner, candidate):
        return None
    return _change(" ".join(flags), flags, planner, candidate)


def _shorter(planner: Planner, s: Settings) -> FitChange | None:
    """The longest max_model_len (a multiple of 1,024) below the given one that fits."""
    lo, hi = 1, s.max_model_len // 1024
    if hi < 1 or not _fits(planner, s.with_(max_model_len=1024)):
        return None
    while lo < hi:  # the largest k with k x 1024 fitting
        mid = (lo + hi + 1) // 2
        if _fits(planner, s.with_(max_model_len=mid * 1024)):
            lo = mid
        else:
            hi = mid - 1
    length = lo * 1024
    if length >= s.max_model_len:
        return None
    return _change(
        f"--max-model-len {length}",
        ("--max-model-len", str(length)),
        planner,
        s.with_(max_model_len=length),
    )


def _offload(planner: Planner, s: Settings) -> FitChange | None:
    """The fewest whole GiB of ``--cpu-offload-gb`` that fit."""
    weights = planner.evaluate(s).rank.weights
    top = -(-weights // GiB)
    if top < 1 or not _fits(planner, s.with_(cpu_offload_bytes=top * GiB)):
        return None
    lo, hi = 1, top
    while lo < hi:
        mid = (lo + hi) // 2
        if _fits(planner, s.with_(cpu_offload_bytes=mid * GiB)):
            hi = mid
        else:
            lo = mid + 1
    return _change(
        f"--cpu-offload-gb {lo} (decode then crosses PCIe)",
        ("--cpu-offload-gb", str(lo)),
        planner,
        s.with_(cpu_offload_bytes=lo * GiB),
    )


def _change(what: str, flags: tuple[str, ...], planner: Planner, s: Settings) -> FitChange:
    plan = assemble.make_plan(planner, s)
    return FitChange(
        what, flags, None, s.world_size, plan.per_gpu.weights_bytes, plan.kv_cache.tokens
    )
