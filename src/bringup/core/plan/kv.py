"""KV cache bytes per token per GPU rank, and what a KV pool of a given size holds.

Per layer and token, on one rank (vLLM ``kv_cache_interface``):

- full or sliding attention (MHA/GQA): ``2 x max(1, kv_heads // tp) x head_dim x dtype``
  (K and V; heads replicated when TP exceeds the KV heads);
- MLA: ``(kv_lora_rank + qk_rope_head_dim) x dtype``, the same on every TP rank (the
  latent is replicated); ``fp8_ds_mla`` is a fixed 656 bytes;
- linear-attention/mamba layers: a constant state per request, no per-token cost.

A sliding-window layer needs at most ``window - 1 + max_num_batched_tokens`` tokens (plus a
block) per request, so it bounds per-request memory but not the token count vLLM reports:
"GPU KV cache size" is ``pool // bytes_per_token`` (all attention layers counted), and the
concurrency at ``max_model_len`` accounts for the windows.

Decode context parallelism (``-dcp N``, vLLM 0.32 ``v1/core/kv_cache_utils.py::
resolve_dcp_kv_block_size`` and ``v1/kv_cache_interface.py``): attention layers are
``dcp_sharded``, so each rank of a DCP group stores every N-th token. A rank's pages and its
bytes per token are unchanged, the pool holds the same number of blocks, but one block spans
``block_size x N`` tokens of the scheduler's view: a request of ``max_model_len`` needs
``cdiv(cdiv(max_model_len, N), block_size)`` blocks per rank
(``FullAttentionSpec.max_memory_usage_bytes``), so the tokens vLLM reports and the max
concurrency are N times those of one rank, counted across the DCP group (0.9-0.20
``_report_kv_cache_config`` multiplied the token count by ``dcp_world_size`` and said so in
"Multiplying the GPU KV cache size by the dcp_world_size N"). Linear-attention/mamba state is
not sharded; sliding-window layers refuse DCP (``SlidingWindowSpec``: "DCP not support
sliding window", see :func:`~bringup.core.plan.checks.dcp_problem`).
"""

from __future__ import annotations

from dataclasses import dataclass

from bringup.core.plan.arch import Architecture

FP8_DS_MLA_BYTES = 656


@dataclass(frozen=True, slots=True)
class KvSpec:
    """KV cost on one rank of one pipeline stage."""

    full_bytes_per_token: int  # summed over the stage's full-attention layers
    sliding_bytes_per_token: int  # summed over its sliding-window layers
    sliding_window: int | None
    state_bytes_per_request: int  # linear-attention / mamba state
    block_size: int
    full_layers: int = 0  # attention layers of each kind on this rank (for vLLM's groups)
    sliding_layers: int = 0
    dcp: int = 1  # decode context parallel size: attention tokens are sharded over this many ranks

    @property
    def bytes_per_token(self) -> int:
        """Bytes one token costs in every attention layer (what vLLM divides the pool by)."""
        return self.full_bytes_per_token + self.sliding_bytes_per_token


def kv_dtype_bytes(kv_cache_dtype: str, model_dtype_bytes: int) -> int:
    """Bytes per KV element for ``--kv-cache-dtype``."""
    d = kv_cache_dtype.lower()
    if d.startswith(("fp8", "int8")):
        return 1
    if d in ("fp4", "nvfp4", "int4"):
        return 1  # stored with scales; treated as one byte per element (conservative)
    if d in ("float32", "fp32"):
        return 4
    return model_dtype_bytes if d == "auto" else 2


def kv_spec(
    arch: Architecture,
    layers: tuple[int, int],
    tp: int,
    kv_cache_dtype: str,
    dcp: int = 1,
    block_size: int | None = None,
) -> KvSpec:
    """The KV spec of the layers ``[first, last)`` on one rank (``dcp``: its DCP group;
    ``block_size``: ``--block-size``, else the backend's default)."""
    dtype = kv_dtype_bytes(kv_cache_dtype, arch.dtype_bytes)
    if arch.mla is not None:
        per_layer = (
            FP8_DS_MLA_BYTES
            if kv_cache_dtype == "fp8_ds_mla"
            else ((arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim) * dtype)
        )
        block = 64
    else:
        per_layer = 2 * max(1, arch.num_kv_heads // tp) * arch.head_dim * dtype
        block = 16
    kinds = arch.layer_kinds[layers[0] : layers[1]]
    return KvSpec(
        full_bytes_per_token=per_layer * kinds.count("full"),
        sliding_bytes_per_token=per_layer * kinds.count("sliding"),
        sliding_window=arch.sliding_window,
        state_bytes_per_request=arch.linear_state_bytes * kinds.count("linear") // max(1, tp),
        block_size=block_size or block,
        full_layers=kinds.count("full"),
        sliding_layers=kinds.count("sliding"),
        dcp=max(1, dcp),
    )


def _round_up(tokens: int, block: int) -> int:
    return -(-tokens // block) * block


def request_bytes(spec: KvSpec, max_model_len: int, max_num_batched_tokens: int) -> int:
    """KV bytes one request of ``max_model_len`` tokens needs on this rank (under DCP the rank
    holds ``cdiv(max_model_len, dcp)`` of its tokens)."""
    local = -(-max_model_len // spec.dcp)
    full = _round_up(local, spec.block_size) * spec.full_bytes_per_token
    sliding = 0
    if spec.sliding_bytes_per_token:
        window = spec.sliding_window or max_model_len
        tokens = min(window - 1 + max_num_batched_tokens, max_model_len)
        sliding = (
            _round_up(tokens, spec.block_size) + spec.block_size
        ) * spec.sliding_bytes_per_token
    return full + sliding + spec.state_bytes_per_request


def tokens_in(spec: KvSpec, kv_bytes: int) -> int:
    """Tokens a pool of ``kv_bytes`` holds, whole blocks only (vLLM's "GPU KV cache size"),
    across the DCP group."""
    if kv_bytes <= 0 or spec.bytes_per_token <= 0:
        return 0
    blocks = kv_bytes // (spec.bytes_per_token * spec.block_size)
    return int(blocks * spec.block_size * spec.dcp)


def max_concurrency(
    spec: KvSpec, kv_bytes: int, max_model_len: int, max_num_batched_tokens: int
) -> float:
    """How many requests of ``max_model_len`` tokens fit at once."""
    need = request_bytes(spec, max_model_len, max_num_batched_tokens)
    if kv_bytes <= 0 or need <= 0:
        return 0.0
    return kv_bytes / need


def longest_fitting_len(
    spec: KvSpec, kv_bytes: int, max_num_batched_tokens: int, upper: int
) -> int:
    """The longest ``max_model_len`` (≤ ``upper``) one request of which fits in ``kv_bytes``."""
    low, high = 0, upper
    while low < high:
        mid = (low + high + 1) // 2
        if request_bytes(spec, mid, max_num_batched_tokens) <= kv_bytes:
            low = mid
        else:
            high = mid - 1
    return low


def group_layout(full_layers: int, sliding_layers: int) -> tuple[int, int, int]:
    """vLLM's KV cache groups (``kv_cache_utils._get_kv_cache_groups_uniform_page_size``, 0.9+):
    (layers per group, full-attention groups, sliding-window groups). Each attention type is
    split into groups of ``group_size`` layers, the fewest layers of any type (the most when
    that is under 1.5x the fewest), the last group padded."""
    counts = [c for c in (full_layers, sliding_layers) if c]
    if len(counts) < 2:
        return (counts[0] if counts else 0), (1 if full_layers else 0), (1 if sliding_layers else 0)
    fewest, most = min(counts), max(counts)
    size = most if most < fewest * 1.5 else fewest
    return size, -(-full_layers // size), -(-sliding_layers // size)


def reported_tokens(
    spec: KvSpec,
    kv_bytes: int,
    *,
    version: tuple[int, int],
    max_model_len: int,
    max_num_batched_tokens: int,
    pipeline_parallel: int = 1,
) -> int:
    """The "GPU KV cache size: N tokens" vLLM prints for a pool of ``kv_bytes`` on this rank.

    - before 0.9 (V0 "# GPU blocks" x block, and V1 0.8 ``num_blocks x block_size``; hybrid
      models are allocated as all-full attention): ``pool // (bytes/token x block) x block``;
    - 0.9 to 0.20 (``_report_kv_cache_config``): ``num_blocks // len(groups) x block`` with
      ``num_blocks = pool // (group_size x page)``;
    - 0.21 and later (``get_kv_cache_capacity``): ``int(max_concurrency x max_model_len)``,
      ``max_concurrency = num_blocks / Σ_groups cdiv(request bytes, page)`` (a sliding group
      needs ``cdiv(min(window - 1 + pp x max_num_batched_tokens, len), block) + 1`` blocks).

    Under DCP every count is across the group: x ``dcp`` before 0.21, and a full-attention
    request needs ``cdiv(cdiv(len, dcp), block)`` blocks from 0.21 (see the module docstring).
    """
    if kv_bytes <= 0 or spec.bytes_per_token <= 0:
        return 0
    full, sliding = spec.full_layers, spec.sliding_layers
    if version < (0, 9) or (full + sliding) == 0:
        return tokens_in(spec, kv_bytes)
    layers = full + sliding
    per_layer_token = spec.bytes_per_token // layers
    page = per_layer_token * spec.block_size
    size, full_groups, sliding_groups = group_layout(full, sliding)
    blocks = kv_bytes // (size * page)
    if version < (0, 21):
        return int(blocks // (full_groups + sliding_groups) * spec.block_size * spec.dcp)
    local = -(-max_model_len // spec.dcp)  # the tokens of one request on one rank of the group
    need = full_groups * -(-local // spec.block_size)
    if sliding_groups:
        window = spec.sliding_window or max_model_len
        tokens = min(window - 1 + pipeline_parallel * max_num_batched_tokens, max_model_len)
        need += sliding_groups * (-(-tokens // spec.block_size) + 1)
    return int(blocks / need * max_model_len) if need else 0
