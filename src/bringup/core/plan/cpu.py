"""vLLM's CPU build: the KV cache it allocates, and the "CPU KV cache size" it reports.

The rules are vLLM 0.32's (the CPU build bringup runs for real), read from its code:

- **Budget** (``vllm/platforms/cpu.py::check_and_update_config``,
  ``vllm/v1/worker/cpu_worker.py::determine_available_memory``): ``VLLM_CPU_KVCACHE_SPACE=N``
  sets ``kv_cache_memory_bytes = N GiB`` (whole GiB; it overrides ``--kv-cache-memory-bytes``),
  and that is the KV pool, exactly. Without either, the pool is
  ``ceil(total x gpu_memory_utilization) - RSS`` of the worker after a warm-up forward, which
  depends on the process: bringup then says the figure is an estimate.
  ``VLLM_CPU_KVCACHE_SPACE=0`` gives a 0-byte pool: "No available memory for the cache blocks".
- **Block size** (``cpu.py``): 128 tokens unless ``--block-size`` is given.
- **Defaults** (``vllm/engine/arg_utils.py::get_batch_defaults``, CPU branch): for
  ``vllm serve`` ``max_num_batched_tokens = 2048 x world_size`` and
  ``max_num_seqs = 128 x world_size`` (4096 and 256 for the ``LLM`` class).
- **Page** (``vllm/v1/kv_cache_interface.py::AttentionSpec``): one block of one layer is
  ``kv_heads_per_rank x block_size x (head_size + head_size_v) x dtype_bytes``.
- **Groups** (``vllm/v1/core/kv_cache_utils.py::get_kv_cache_groups``; the CPU platform
  supports the hybrid KV cache manager): one group when every layer has the same spec;
  otherwise layers are bucketed by type, and every bucket split into groups of
  ``group_size`` layers (the fewest layers of any type, or the most when that is under 1.5x
  the fewest), the last padded.
- **Pool** (``get_kv_cache_config_from_groups``): ``bytes_per_block`` is the largest group's
  pages summed (``group_size x page``); ``num_blocks = pool // bytes_per_block``.
- **Reported size** (``get_max_concurrency_for_kv_cache_config``, ``update_kv_cache_capacity``):
  a request of ``max_model_len`` takes ``cdiv(max_model_len, block)`` blocks in a full-attention
  group and ``cdiv(min(window - 1 + max_in_flight, max_model_len), block) + 1`` in a
  sliding-window group (``SlidingWindowSpec.max_admission_blocks_per_request``; the CPU build
  schedules synchronously, so ``max_in_flight = pp x max_num_batched_tokens``); the
  concurrency is ``num_blocks / Σ blocks per request`` and "CPU KV cache size: N tokens" is
  ``int(concurrency x max_model_len)``.
- **Check** (``_check_enough_kv_cache_memory``): the pool must hold one request of
  ``max_model_len``, else "To serve at least one request with the model's max seq len".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from bringup.core.checkpoint import TensorInfo
from bringup.core.plan.arch import Architecture
from bringup.core.plan.kv import kv_dtype_bytes
from bringup.core.plan.result import KvCache, ModelInfo, PerGpu, Plan, Verdict
from bringup.core.plan.settings import Settings
from bringup.core.plan.weights import Parallel, layer_of, parameter_count, weights_per_stage
from bringup.core.vocab import FailureClass, Phase
from bringup.errors import UsageError
from bringup.units import GiB, format_bytes, parse_size

DEFAULT_BLOCK_SIZE = 128
SERVE_MAX_NUM_BATCHED_TOKENS = 2048  # per world rank, `vllm serve`
SERVE_MAX_NUM_SEQS = 128


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True, slots=True)
class CpuKvGroup:
    """One KV cache group: its kind, its layers (padding included) and its page."""

    kind: str  # "full" | "sliding"
    layers: int
    page_bytes: int  # one block of one layer


@dataclass(frozen=True, slots=True)
class CpuKv:
    """What vLLM's CPU build allocates and reports."""

    pool_bytes: int
    block_size: int
    groups: tuple[CpuKvGroup, ...]
    bytes_per_block: int
    num_blocks: int
    blocks_per_request: int
    max_concurrency: float
    tokens: int  # "CPU KV cache size: N tokens"
    bytes_per_token: int  # every attention layer, one token (pool bytes a token costs)
    fits_one_request: bool


def page_bytes(arch: Architecture, tp: int, block_size: int, dtype_bytes: int) -> int:
    """One block of one attention layer on one rank."""
    heads = max(1, arch.num_kv_heads // tp)
    return heads * block_size * 2 * arch.head_dim * dtype_bytes


def kv_groups(arch: Architecture, page: int) -> tuple[CpuKvGroup, ...]:
    """vLLM's KV cache groups for this model's attention layers (see the module docstring)."""
    kinds = [k for k in arch.layer_kinds if k in ("full", "sliding")]
    buckets = {k: kinds.count(k) for k in ("full", "sliding") if kinds.count(k)}
    if len(buckets) <= 1:
        kind, count = next(iter(buckets.items()), ("full", 0))
        return (CpuKvGroup(kind, count, page),)
    fewest, most = min(buckets.values()), max(buckets.values())
    size = most if most < fewest * 1.5 else fewest
    groups: list[CpuKvGroup] = []
    for kind, count in buckets.items():
        groups += [CpuKvGroup(kind, size, page)] * _cdiv(count, size)
    return tuple(groups)


def cpu_kv(
    arch: Architecture,
    pool_bytes: int,
    *,
    max_model_len: int,
    max_num_batched_tokens: int,
    tp: int = 1,
    pp: int = 1,
    block_size: int = DEFAULT_BLOCK_SIZE,
    dtype_bytes: int | None = None,
) -> CpuKv:
    """The KV cache vLLM's CPU build makes from a pool of ``pool_bytes``."""
    d = arch.dtype_bytes if dtype_bytes is None else dtype_bytes
    page = page_bytes(arch, tp, block_size, d)
    groups = kv_groups(arch, page)
    per_block = max(g.layers * g.page_bytes for g in groups)
    blocks = pool_bytes // per_block if per_block > 0 and pool_bytes > 0 else 0
    in_flight = pp * max_num_batched_tokens
    need = 0
    for g in groups:
        if g.kind == "sliding" and arch.sliding_window:
            tokens = min(arch.sliding_window - 1 + in_flight, max_model_len)
            need += _cdiv(tokens, block_size) + 1
        else:
            need += _cdiv(max_model_len, block_size)
    concurrency = blocks / need if need else 0.0
    attention_layers = sum(1 for k in arch.layer_kinds if k in ("full", "sliding"))
    return CpuKv(
        pool_bytes=pool_bytes,
        block_size=block_size,
        groups=groups,
        bytes_per_block=per_block,
        num_blocks=blocks,
        blocks_per_request=need,
        max_concurrency=concurrency,
        tokens=int(concurrency * max_model_len),
        bytes_per_token=page // block_size * attention_layers,
        fits_one_request=blocks >= need > 0,
    )


def kv_space_from_env(value: str | None) -> int | None:
    """``VLLM_CPU_KVCACHE_SPACE`` in bytes (whole GiB, as vLLM reads it); None when unset/empty."""
    if value is None or value.strip() == "":
        return None
    return int(value.strip()) * GiB


def kv_pool(
    arch: Architecture,
    tensors: Sequence[TensorInfo],
    s: Settings,
    *,
    memory_total_bytes: int,
    env_value: str | None,
    explicit: str | None,
) -> tuple[int, bool]:
    """(the KV pool's bytes, whether that is an estimate): ``VLLM_CPU_KVCACHE_SPACE``
    (``env_value``), else ``--kv-cache-memory-bytes`` (``explicit``), else vLLM's own
    sizing: ceil(total x utilization) - the worker's RSS, which holds at least the weights."""
    try:
        pool = kv_space_from_env(env_value)
    except ValueError as exc:
        raise UsageError(
            f"VLLM_CPU_KVCACHE_SPACE must be a whole number of GiB, got {env_value!r}"
        ) from exc
    if pool is None and explicit is not None:
        pool = parse_size(str(explicit))
    if pool is not None:
        return pool, False
    weights = weights_per_rank(arch, tensors, s)
    return max(0, math.ceil(memory_total_bytes * s.gpu_memory_utilization) - weights), True


def weights_per_rank(arch: Architecture, tensors: Sequence[TensorInfo], s: Settings) -> int:
    """Weight bytes one CPU worker holds (the largest rank)."""
    par = Parallel(s.tensor_parallel_size, s.pipeline_parallel_size, s.enable_expert_parallel)
    return max(st.total_bytes for st in weights_per_stage(tensors, arch, par))


def plan_cpu(
    arch: Architecture,
    tensors: Sequence[TensorInfo],
    s: Settings,
    *,
    pool_bytes: int,
    memory_total_bytes: int,
    pool_is_estimate: bool,
) -> Plan:
    """The plan for vLLM's CPU build: weights in host memory, the KV pool and what it holds.

    ``per_gpu`` describes the host (one NUMA node's memory as vLLM reads it): weights, the
    KV pool, and what is left; there are no CUDA graphs, sampler warmup or profile peak to
    charge (the CPU build sizes the pool from the setting, not from a profile).
    """
    weights = weights_per_rank(arch, tensors, s)
    layers = [t for t in tensors if (layer_of(t.name) or 0) < arch.num_layers]
    kv = cpu_kv(
        arch,
        pool_bytes,
        max_model_len=s.max_model_len,
        max_num_batched_tokens=s.max_num_batched_tokens,
        tp=s.tensor_parallel_size,
        pp=s.pipeline_parallel_size,
        dtype_bytes=kv_dtype_bytes(s.kv_cache_dtype, arch.dtype_bytes),
    )
    world = s.world_size
    used = weights * world + pool_bytes * world
    how = (
        "an estimate (no VLLM_CPU_KVCACHE_SPACE: vLLM sizes it from RSS)"
        if pool_is_estimate
        else "VLLM_CPU_KVCACHE_SPACE"
    )
    fb = format_bytes
    if pool_bytes <= 0:
        verdict = Verdict(
            False,
            FailureClass.KV_CACHE_INSUFFICIENT,
            Phase.KV_CACHE_ALLOC,
            "a 0-byte KV pool: vLLM stops with 'No available memory for the cache blocks' "
            "(set VLLM_CPU_KVCACHE_SPACE to a number of GiB)",
        )
    elif not kv.fits_one_request:
        verdict = Verdict(
            False,
            FailureClass.KV_CACHE_INSUFFICIENT,
            Phase.KV_CACHE_ALLOC,
            f"one request of max_model_len {s.max_model_len} needs {kv.blocks_per_request} "
            f"blocks of {kv.block_size} tokens, the {fb(pool_bytes)} pool holds {kv.num_blocks}",
        )
    elif used > memory_total_bytes:
        verdict = Verdict(
            False,
            FailureClass.HOST_OOM,
            Phase.KV_CACHE_ALLOC,
            f"weights {fb(weights * world)} + KV pool {fb(pool_bytes * world)} exceed the "
            f"host's {fb(memory_total_bytes)}",
        )
    else:
        verdict = Verdict(
            True,
            None,
            None,
            f"fits: a {fb(pool_bytes)} KV pool ({how}) holds {kv.num_blocks} blocks of "
            f"{kv.block_size} tokens; vLLM reports 'CPU KV cache size: {kv.tokens:,} tokens'",
        )
    return Plan(
        model=ModelInfo(arch.name, parameter_count(layers, arch), sum(t.nbytes for t in layers)),
        settings=s,
        per_gpu=PerGpu(
            total_bytes=memory_total_bytes,
            weights_bytes=weights,
            activation_peak_bytes=0,
            non_torch_bytes=0,
            cuda_graph_bytes=0,
            kv_cache_bytes=max(0, pool_bytes),
            sampler_warmup_bytes=0,
            headroom_bytes=memory_total_bytes - used,
        ),
        kv_cache=KvCache(kv.bytes_per_token, kv.tokens, round(kv.max_concurrency, 2)),
        verdict=verdict,
    )
