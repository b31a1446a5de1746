"""Remedies for memory that runs short on the GPU: the KV cache that does not fit, an out of
memory error by the phase it came in, GPU memory another process holds. Each names the
engine's own memory flags (vLLM's when the engine is not known); ``remedies.own`` drops the
ones an engine lacks."""

from __future__ import annotations

import math
import re

from bringup.core.diagnosis import Remedy
from bringup.core.packs.remedies import number, on_rocm, own
from bringup.core.packs.types import RemedyContext
from bringup.core.vocab import Phase


def _fmt_util(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") if value < 1 else "1.0"


def lower_util(ctx: RemedyContext, why: str) -> Remedy:
    """--gpu-memory-utilization 0.05 below the current value (0.85 when unknown)."""
    util = number(ctx, "gpu_memory_utilization")
    value = round(util - 0.05, 2) if util is not None and util > 0.5 else 0.85
    return Remedy(
        f"Lower --gpu-memory-utilization to {_fmt_util(value)}: {why}",
        "--gpu-memory-utilization",
        _fmt_util(value),
    )


def raise_util(ctx: RemedyContext, why: str) -> Remedy:
    """--gpu-memory-utilization 0.05 above the current value, at most 0.95."""
    util = number(ctx, "gpu_memory_utilization")
    value = min(0.95, round(util + 0.05, 2)) if util is not None else 0.95
    return Remedy(
        f"Raise --gpu-memory-utilization to {_fmt_util(value)}: {why}",
        "--gpu-memory-utilization",
        _fmt_util(value),
    )


def more_tp(ctx: RemedyContext) -> Remedy:
    """Double the tensor-parallel size, so each GPU holds half the weights."""
    tp = number(ctx, "tensor_parallel_size")
    value = str(int(tp) * 2) if tp else "2"
    return Remedy(
        f"Spread the weights over more GPUs with --tensor-parallel-size {value}, "
        "or use a quantized checkpoint.",
        "--tensor-parallel-size",
        value,
    )


def cap_max_model_len(ctx: RemedyContext, without_estimate: str) -> Remedy:
    """``--max-model-len`` set to the estimate the log gives, else ``auto`` with ``without_estimate``."""
    est = ctx.groups.get("estimated")
    if est:
        return Remedy(
            f"Set --max-model-len {est}: the log says that is the longest request "
            "the available KV cache can hold.",
            "--max-model-len",
            est,
        )
    return Remedy(without_estimate, "--max-model-len", "auto")


def max_model_len(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """KV cache too small for one max-length request: cap the length at what fits."""
    out: list[Remedy] = [
        cap_max_model_len(
            ctx,
            "Lower --max-model-len (or pass --max-model-len auto on vLLM >= 0.21) "
            "so one full-length request fits in the KV cache.",
        )
    ]
    out.append(raise_util(ctx, "more memory for the KV cache."))
    out.append(
        Remedy(
            "Store the KV cache in FP8 with --kv-cache-dtype fp8 to halve its size.",
            "--kv-cache-dtype",
            "fp8",
        )
    )
    return tuple(out)


def no_kv_memory(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """Nothing left for the KV cache after weights and activations."""
    return (
        raise_util(ctx, "weights and activations used the whole budget."),
        more_tp(ctx),
        _halve(
            ctx,
            "max_num_batched_tokens",
            "--max-num-batched-tokens",
            8192,
            "a smaller profiling batch leaves more for the KV cache.",
        ),
    )


def _halve(ctx: RemedyContext, fact: str, flag: str, default: int, why: str) -> Remedy:
    current = number(ctx, fact)
    base = int(current) if current else default
    value = str(max(1, base // 2))
    was = f" from {base}" if current else ""
    return Remedy(f"Halve {flag}{was} to {value}: {why}", flag, value)


def sampler_oom(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """The sampler warmup allocates max_num_seqs x vocab logits: quarter (>=1024) or halve it."""
    n = int(number(ctx, "requests") or number(ctx, "max_num_seqs") or 1024)
    if n >= 1024:
        value, how = max(1, n // 4), "a quarter of"
    else:
        value, how = max(1, n // 2), "half of"
    first = Remedy(
        f"Set --max-num-seqs {value} ({how} {n}): the sampler warmup allocates "
        f"{n} x vocabulary float32 logits at once, and that did not fit.",
        "--max-num-seqs",
        str(value),
    )
    return (first, lower_util(ctx, "leaves more headroom outside vLLM's budget for the warmup."))


def _lower_share(ctx: RemedyContext, why: str) -> Remedy:
    """The engine's memory share 0.05 lower (vLLM's --gpu-memory-utilization when not known)."""
    flag = ctx.flags.memory_share or "--gpu-memory-utilization"
    util = number(ctx, ctx.flags.facts.get(flag, "gpu_memory_utilization"))
    value = round(util - 0.05, 2) if util is not None and util > 0.5 else 0.85
    return Remedy(f"Lower {flag} to {_fmt_util(value)}: {why}", flag, _fmt_util(value))


def _eager(ctx: RemedyContext, text: str) -> Remedy:
    """No CUDA graphs, by the engine's own switch (vLLM's --enforce-eager when not known)."""
    flag = ctx.flags.eager or "--enforce-eager"
    return Remedy(text.format(flag=flag), flag)


def cuda_oom(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """GPU out of memory: what to change depends on the phase it happened in (the engine's
    own flags; the ones it lacks are left out). On ROCm the GPU's tool is rocm-smi."""
    out = own(ctx.flags, _cuda_oom(ctx))
    if on_rocm(ctx):
        out = tuple(_rocm_tools(r) for r in out)
    return out


def _rocm_tools(r: Remedy) -> Remedy:
    text = r.text.replace("`nvidia-smi`", "`rocm-smi`")
    return r if text == r.text else Remedy(text, r.flag, r.value, r.env)


def _cuda_oom(ctx: RemedyContext) -> tuple[Remedy, ...]:
    if ctx.phase in (Phase.WEIGHTS_LOADING, Phase.WEIGHTS_LOADED, Phase.DISTRIBUTED_INIT):
        return (more_tp(ctx), Remedy("Free the GPU of other processes (check `nvidia-smi`)."))
    if ctx.phase is Phase.MEMORY_PROFILING:
        return (
            _halve(
                ctx,
                "max_num_batched_tokens",
                "--max-num-batched-tokens",
                8192,
                "the profiling forward pass scales with it.",
            ),
            _halve(
                ctx,
                "max_num_seqs",
                "--max-num-seqs",
                1024,
                "the sampler part of profiling scales with it.",
            ),
        )
    if ctx.phase is Phase.CUDA_GRAPH_CAPTURE:
        return (
            _lower_share(ctx, "CUDA graphs are captured outside the KV budget."),
            _eager(ctx, "Skip CUDA graphs with {flag} (slower decoding, no graph memory)."),
        )
    if ctx.phase is Phase.WARMUP:
        return sampler_oom(ctx)
    return (
        _lower_share(ctx, "leaves headroom for allocations outside the KV cache."),
        _eager(ctx, "Skip CUDA graphs with {flag}."),
    )


def free_memory(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """Another process holds GPU memory: free it, or ask for no more than is free."""
    out = [
        Remedy(
            "Stop the other processes holding GPU memory (often a leftover server from an "
            "earlier run); `nvidia-smi --query-compute-apps=pid,used_memory --format=csv` "
            "lists them."
        )
    ]
    free, total = number(ctx, "free_gib"), number(ctx, "total_gib")
    share = ctx.flags.memory_share  # the engine's own flag (vLLM --gpu-memory-utilization)
    weights = number(ctx, "weights_gib_per_gpu") or _weights_from_name(ctx)
    if free is not None and total and share is not None:
        value = math.floor((free / total - 0.02) * 100) / 100
        budget = value * total
        # never ask for less than the weights need: a share below them cannot start either
        fits = weights is not None and budget >= weights * 1.1 + 1.0
        if value >= 0.1 and fits:
            out.append(
                Remedy(
                    f"Or ask for what is free: {share} "
                    f"{_fmt_util(value)} ({free:g} of {total:g} GiB are free; the weights "
                    f"take about {weights:.3g} GiB).",
                    share,
                    _fmt_util(value),
                )
            )
        elif value >= 0.1:
            out.append(
                Remedy(
                    f"Asking for only what is free ({share} {_fmt_util(value)}, {budget:.1f} "
                    f"GiB) works only if the weights and a KV cache fit in that; "
                    f"{'they take about ' + format(weights, '.3g') + ' GiB per GPU' if weights else 'the log does not say how much the weights take'}: "
                    "free the GPU instead, or check with `bringup plan`."
                )
            )
    return tuple(out)


_PARAMS = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)[Bb](?![A-Za-z])")


def _weights_from_name(ctx: RemedyContext) -> float | None:
    """GiB of weights per GPU guessed from a model name ("Llama-3.1-8B" in bf16: ~15 GiB),
    lower for FP8 and 4-bit names; None when the name gives no size."""
    name = str(ctx.facts.get("model", ""))
    m = _PARAMS.search(name.rsplit("/", 1)[-1])
    if not m:
        return None
    low = name.lower()
    per_param = 0.5 if re.search(r"awq|gptq|int4|4bit|q4", low) else 1.0 if "fp8" in low else 2.0
    tp = number(ctx, "tensor_parallel_size") or 1
    return float(m.group(1)) * 1e9 * per_param / 2**30 / tp
