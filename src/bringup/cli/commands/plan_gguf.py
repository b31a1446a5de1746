"""``bringup plan MODEL.gguf``: llama.cpp's buffers for a GGUF model, before launch.

The model comes from the GGUF's own tensor infos and metadata (``core.gguf_plan``, checked
against what llama.cpp's server prints); the settings from the flags or the llama.cpp command
after ``--`` (llama-server's ``-c``/``-np``/``-ctk``/``-ctv``/``-fa`` or llama-cpp-python's
``--n_ctx``/``--flash_attn``). Memory is the GPU's (``--gpu``/``--gpu-memory``) or, without
one, this machine's available RAM (llama.cpp on the CPU).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import psutil

from bringup.cli.commands.plan_shared import cpu_processor, parse_memory, parse_rate
from bringup.core import engine_args
from bringup.core.checkpoint import Checkpoint
from bringup.core.gguf_plan import GgufPlan, plan_gguf, read_shape, row_bytes
from bringup.core.gpu_catalog import lookup
from bringup.core.plan import decode
from bringup.core.plan.flags import int_flag
from bringup.core.words import count_word
from bringup.errors import UsageError
from bringup.render.busy import Busy, quiet
from bringup.units import format_bytes

_N_CTX = ("--n-ctx", "--n_ctx", "-c", "--ctx-size")
_PARALLEL = ("-np", "--parallel", "--n-parallel")
_TYPE_K = ("-ctk", "--cache-type-k")
_TYPE_V = ("-ctv", "--cache-type-v")
_FLASH = ("-fa", "--flash-attn", "--flash_attn")
_THREADS = ("-t", "--threads", "--n_threads")


def build_gguf(
    ckpt: Checkpoint, args: Any, passthrough: Sequence[str], busy: Busy = quiet
) -> dict[str, Any]:
    """The GGUF plan as the ``plan --json`` object (``busy``: the spinner while this CPU's
    bandwidth is measured)."""
    metadata = ckpt.gguf_metadata or {}
    words = [*(["--n-ctx", args.n_ctx] if args.n_ctx else []), *passthrough]
    n_ctx = int_flag(words, *_N_CTX)
    n_parallel = int_flag(words, *_PARALLEL)
    settings = {
        "n_ctx": _train_ctx(metadata) if n_ctx is None else n_ctx,
        "n_parallel": 1 if n_parallel is None else n_parallel,
        "cache_type_k": engine_args.get_flag(words, *_TYPE_K) or "f16",
        "cache_type_v": engine_args.get_flag(words, *_TYPE_V) or "f16",
        "flash_attn": engine_args.has_flag(words, *_FLASH),
    }
    plan = _plan(ckpt, settings)
    memory_bytes, where = _memory(args)
    result = _result(ckpt, settings, plan, memory_bytes, where)
    result["decode"] = _decode(ckpt, args, words, busy)
    return result


def decode_workload(ckpt: Checkpoint, context_tokens: int) -> decode.Workload:
    """What one token costs llama.cpp: the GGUF's tensors and its f16 KV cache at the context."""
    shape = read_shape(ckpt.gguf_metadata or {}, ckpt.tensors)
    kv_per_token = sum(
        row_bytes("f16", shape.head_dim_k * heads) + row_bytes("f16", shape.head_dim_v * heads)
        for heads in shape.n_head_kv
    )
    return decode.gguf_workload(
        dict(ckpt.gguf_metadata or {}),
        ckpt.tensors,
        kv_bytes_per_token=kv_per_token,
        context_tokens=context_tokens,
    )


def _decode(
    ckpt: Checkpoint, args: Any, words: Sequence[str], busy: Busy
) -> decode.DecodeSpeed | None:
    """Batch-1 decode on the GPU given, else on this CPU with the server's thread count; None
    for a GPU known only by its memory (``--gpu-memory``) and no ``--memory-bandwidth``."""
    bandwidth = parse_rate(args.memory_bandwidth) if args.memory_bandwidth else None
    workload = decode_workload(ckpt, args.context_tokens)
    if args.gpu:
        return decode.predict(workload, decode.gpu_processor(lookup(args.gpu), bandwidth), None)
    if args.gpu_memory:
        if bandwidth is None:
            return None
        return decode.predict(workload, decode.Processor("GPU", "gpu", bandwidth, "given"), None)
    return decode.predict(workload, cpu_processor(bandwidth, llamacpp_threads(words), busy), None)


def llamacpp_threads(words: Sequence[str]) -> int:
    """Threads llama.cpp decodes with: ``-t``/``--n_threads``, else its default (llama-server:
    every core; llama-cpp-python's server: half of them, at least one)."""
    import os

    given = engine_args.get_flag(words, *_THREADS)
    if given and given.isdigit() and int(given) > 0:
        return int(given)
    cores = len(os.sched_getaffinity(0))
    return max(1, cores // 2) if any("llama_cpp" in w for w in words) else cores


def _plan(ckpt: Checkpoint, settings: dict[str, Any], **override: Any) -> GgufPlan:
    values = {**settings, **override}
    return plan_gguf(
        ckpt.gguf_metadata or {},
        ckpt.tensors,
        n_ctx=values["n_ctx"],
        n_parallel=values["n_parallel"],
        cache_type_k=values["cache_type_k"],
        cache_type_v=values["cache_type_v"],
        flash_attn=values["flash_attn"],
    )


def _train_ctx(metadata: dict[str, Any]) -> int:
    arch = str(metadata.get("general.architecture", "llama"))
    value = metadata.get(f"{arch}.context_length", 4096)
    return int(value) if isinstance(value, int | float) else 4096


def _memory(args: Any) -> tuple[int, str]:
    if args.gpu_memory:
        return parse_memory("--gpu-memory", args.gpu_memory), "GPU"
    if args.gpu:
        return lookup(args.gpu).memory_bytes, "GPU"
    return int(psutil.virtual_memory().available), "host RAM"


def _result(
    ckpt: Checkpoint, settings: dict[str, Any], plan: GgufPlan, memory_bytes: int, where: str
) -> dict[str, Any]:
    fits = plan.total_bytes <= memory_bytes
    reason = (
        f"{format_bytes(plan.total_bytes)} needed, {format_bytes(memory_bytes)} of {where}"
        if fits
        else f"llama.cpp needs {format_bytes(plan.total_bytes)} (KV cache {format_bytes(plan.kv_cache_bytes)} at "
        f"n_ctx {plan.n_ctx}) but {format_bytes(memory_bytes)} of {where} is available"
    )
    weights_alone = plan.weights_bytes > memory_bytes  # the context's buffers aside
    too_big = "cuda_oom" if where == "GPU" else "host_oom"
    verdict: dict[str, Any] = {
        "fits": fits,
        "failure_class": None if fits else (too_big if weights_alone else "kv_cache_insufficient"),
        "phase": None if fits else ("weights_loading" if weights_alone else "kv_cache_alloc"),
        "reason": reason,
        # vLLM's plans weigh what the facts leave open (core.plan.confidence); llama.cpp's
        # arithmetic here has no version or class rule to weigh
        "confidence": "certain",
        "uncertain_because": [],
    }
    per_token = plan.kv_cache_bytes / max(1, plan.kv_cells + plan.swa_cells)
    return {
        "model": {
            "architecture": (ckpt.gguf_metadata or {}).get("general.architecture"),
            "parameters": sum(math.prod(t.shape) for t in ckpt.tensors),
            "weights_bytes_total": plan.weights_bytes,
        },
        "settings": {**settings, "n_ctx_padded": plan.n_ctx, "engine": "llamacpp"},
        "memory": {
            "total_bytes": memory_bytes,
            "where": where,
            "weights_bytes": plan.weights_bytes,
            "kv_cache_bytes": plan.kv_cache_bytes,
            "compute_buffer_bytes": plan.compute_buffer_bytes,
            "output_buffer_bytes": plan.output_buffer_bytes,
            "needed_bytes": plan.total_bytes,
            "headroom_bytes": memory_bytes - plan.total_bytes,
        },
        "kv_cache": {"bytes_per_token": round(per_token), "tokens": plan.kv_cells},
        "verdict": verdict,
        "recommendations": [] if fits else _recommend(ckpt, settings, memory_bytes),
        "notes": list(plan.notes),
    }


def _recommend(
    ckpt: Checkpoint, settings: dict[str, Any], memory_bytes: int
) -> list[dict[str, str]]:
    out = []
    low, high = 0, settings["n_ctx"]
    while high - low > 256:  # the largest context (to 256 tokens) whose buffers fit
        mid = (low + high) // 2
        if _plan(ckpt, settings, n_ctx=mid).total_bytes <= memory_bytes:
            low = mid
        else:
            high = mid
    if low >= 256:
        out.append(
            {
                "flag": "-c",
                "value": str(low // 256 * 256),
                "why": "the largest context whose KV cache and buffers fit (--n_ctx for llama-cpp-python)",
            }
        )
    if settings["cache_type_k"] == "f16":
        q8 = _plan(ckpt, settings, cache_type_k="q8_0")
        if q8.total_bytes <= memory_bytes:
            out.append(
                {"flag": "-ctk", "value": "q8_0", "why": "a q8_0 K cache halves its bytes and fits"}
            )
    return out


def check_not_mixed(args: Any) -> None:
    """vLLM-only flags make no sense for a GGUF plan."""
    check_gguf_layout(
        tensor_parallel=getattr(args, "tensor_parallel_size", None),
        pipeline_parallel=getattr(args, "pipeline_parallel_size", None),
        expert_parallel=bool(getattr(args, "enable_expert_parallel", None)),
        decode_context_parallel=getattr(args, "decode_context_parallel_size", None),
        quantization=getattr(args, "quantization", None),
        what="a GGUF plan",
    )


def check_gguf_layout(
    *,
    tensor_parallel: int | None,
    pipeline_parallel: int | None,
    expert_parallel: bool,
    decode_context_parallel: int | None,
    quantization: str | None,
    what: str,
) -> None:
    """UsageError naming the vLLM layout flags given for a GGUF checkpoint: llama.cpp's plan
    and decode speed are one model on one device, its weights in the GGUF's own types, so
    ``-tp``, ``-pp``, ``--enable-expert-parallel``, ``-dcp`` and ``-q`` mean nothing there."""
    given = [
        f"{flag} {value}" if value is not True else flag
        for flag, value, default in (
            ("-tp", tensor_parallel, 1),
            ("-pp", pipeline_parallel, 1),
            ("--enable-expert-parallel", expert_parallel or None, None),
            ("-dcp", decode_context_parallel, 1),
            ("-q", quantization, None),
        )
        if value not in (None, default)
    ]
    if given:
        flags = " ".join(g.split()[0] for g in given)
        raise UsageError(
            f"{', '.join(given)} {count_word(len(given), 'vLLM layout flag', verb=True)}, "
            f"not used by {what}: llama.cpp runs a GGUF in its own weight types and splits "
            "its layers over GPUs with --tensor-split",
            hint=f"drop {flags}",
        )
