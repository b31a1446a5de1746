"""Remedies for vLLM's CPU build, and the switch that picks them when the log shows a CPU run.

On the CPU platform the KV cache is host memory sized by ``VLLM_CPU_KVCACHE_SPACE`` (whole
GiB; it overrides ``--kv-cache-memory-bytes``), ``--gpu-memory-utilization`` is the share of the
NUMA node's memory vLLM requires free at start, and tensor-parallel workers need their OpenMP
threads bound to separate cores (``VLLM_CPU_OMP_THREADS_BIND``). GPU advice (raise the GPU
utilisation, more GPUs, nvidia-smi) is wrong there. The run is known to be on the CPU from the
``device`` fact (``device_config=cpu`` in the engine's config line).
"""

from __future__ import annotations

import math

from bringup.core.diagnosis import Remedy
from bringup.core.packs import memory_remedies as mem
from bringup.core.packs import remedies as r
from bringup.core.packs.types import RemedyBuilder, RemedyContext


def on_cpu(ctx: RemedyContext) -> bool:
    return str(ctx.facts.get("device", "")).lower() == "cpu"


def by_platform(gpu: RemedyBuilder, cpu: RemedyBuilder) -> RemedyBuilder:
    """A builder that gives ``cpu``'s remedies on a CPU run and ``gpu``'s otherwise."""

    def build(ctx: RemedyContext) -> tuple[Remedy, ...]:
        return cpu(ctx) if on_cpu(ctx) else gpu(ctx)

    build.__doc__ = f"{gpu.__doc__} (on the CPU build: {cpu.__doc__})"
    return build


def _kv_space(gib: int, why: str) -> Remedy:
    return Remedy(
        f"Give the KV cache {gib} GiB of host memory with VLLM_CPU_KVCACHE_SPACE={gib}: {why}",
        env=f"VLLM_CPU_KVCACHE_SPACE={gib}",
    )


def kv_max_len(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """one max-length request does not fit: cap --max-model-len, or a larger VLLM_CPU_KVCACHE_SPACE"""
    out: list[Remedy] = [
        mem.cap_max_model_len(
            ctx, "Lower --max-model-len so one full-length request fits in the KV cache."
        )
    ]
    needed = r.number(ctx, "needed")
    gib = max(1, math.ceil(needed)) if needed is not None else 4
    out.append(_kv_space(gib, "on the CPU build that variable sizes the KV cache."))
    return tuple(out)


def no_kv_memory(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """nothing for the KV cache: set VLLM_CPU_KVCACHE_SPACE to whole GiB of host memory"""
    return (
        _kv_space(
            4,
            "VLLM_CPU_KVCACHE_SPACE was 0 or the memory left after the weights was too small "
            "(check `free -g`).",
        ),
    )


def free_memory(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """less host memory free than --gpu-memory-utilization asks: lower it, or free memory"""
    out: list[Remedy] = []
    free, total = r.number(ctx, "free_gib"), r.number(ctx, "total_gib")
    if free is not None and total:
        value = math.floor((free / total - 0.05) * 100) / 100
        if value >= 0.05:
            text = f"{value:.2f}".rstrip("0").rstrip(".")
            out.append(
                Remedy(
                    f"Lower --gpu-memory-utilization to {text}: on the CPU build it is the "
                    f"share of the NUMA node's memory that must be free at start, and only "
                    f"{free:g} of {total:g} GiB are.",
                    "--gpu-memory-utilization",
                    text,
                )
            )
    out.append(
        Remedy(
            "Or free host memory: stop other servers or processes using it "
            "(`ps aux --sort=-rss | head`)."
        )
    )
    return tuple(out)


def thread_binding(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """tensor-parallel workers without cores to bind: VLLM_CPU_OMP_THREADS_BIND, one core list each"""
    workers = r.number(ctx, "workers") or r.number(ctx, "tensor_parallel_size") or 2
    lists = "|".join(str(i) for i in range(int(workers)))
    return (
        Remedy(
            f"Bind each of the {int(workers)} CPU workers to its own cores with "
            f"VLLM_CPU_OMP_THREADS_BIND='{lists}' (one core list per worker, separated by '|', "
            "e.g. '0-15|16-31'): with one NUMA node vLLM cannot split them by itself.",
            env=f"VLLM_CPU_OMP_THREADS_BIND={lists}",
        ),
        Remedy(
            "Or run one worker (-tp 1): on one NUMA node tensor parallelism buys little on the CPU.",
            "--tensor-parallel-size",
            "1",
        ),
    )
