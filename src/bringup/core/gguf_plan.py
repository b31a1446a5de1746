"""GGUF memory model: what llama.cpp will allocate for a GGUF model, before it is started.

Pure: it takes the GGUF metadata and tensor table (``bringup.adapters.checkpoint.scan_checkpoint``
returns both) and predicts the four buffers llama.cpp reports in its startup log::

    load_tensors:   CPU_Mapped model buffer size =     0.41 MiB        -> weights_bytes
    llama_context:        CPU  output buffer size =     0.00 MiB       -> output_buffer_bytes
    llama_kv_cache:        CPU KV buffer size =     0.12 MiB           -> kv_cache_bytes
    sched_reserve:        CPU compute buffer size =     5.76 MiB       -> compute_buffer_bytes

    plan = plan_gguf(ckpt.gguf_metadata, ckpt.tensors, n_ctx=8192, cache_type_k="q8_0")
    plan.total_bytes

How each is computed (llama.cpp as vendored in llama-cpp-python 0.3.36):

- weights: the exact bytes of every tensor from the tensor table, by GGML type.
- KV cache: the context is padded to a multiple of 256 cells; with ``n_parallel`` sequences and
  no unified cache each sequence gets ``pad256(n_ctx / n_parallel)`` cells. Per layer, K is
  ``cells x row_size(type_k, head_dim_k x n_head_kv)`` and V likewise. Layers with sliding-window
  attention (SWA) keep only ``pad256(min(cells, n_swa + n_ubatch))`` cells. Quantized types
  store blocks of 32 values (q8_0: 34 bytes, q4_0: 18 bytes, ...), as ggml does.
- compute buffer: ggml's graph allocator keeps the largest set of intermediate tensors alive at
  once; which stage is largest depends on the shape. Three stages are modelled, in 4-byte units
  per token of the micro-batch (``n_ubatch``): attention scores (``n_head x n_kv``) plus the
  mask, the feed-forward block (``3 x n_ff``), and the logits (``n_vocab``); the constants were
  fitted to the CPU backend's reports (bench/results/engine.md lists them). Without flash
  attention the non-flash path is exact on every shape measured; with flash attention it is an
  estimate within about 10 %. GPU backends allocate a similar graph; MoE expert routing,
  MLA and recurrent state are not modelled (``notes`` says so).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bringup.core.checkpoint import TensorInfo
from bringup.errors import InputError

CELL_PAD = 256  # llama.cpp pads the context (and every KV stream) to a multiple of 256 cells
FLOAT_BYTES = 4

# GGML type -> (values per block, bytes per block), from ggml's type traits.
_BLOCKS: dict[str, tuple[int, int]] = {
    "F32": (1, 4),
    "F16": (1, 2),
    "BF16": (1, 2),
    "F64": (1, 8),
    "I8": (1, 1),
    "I16": (1, 2),
    "I32": (1, 4),
    "I64": (1, 8),
    "Q4_0": (32, 18),
    "Q4_1": (32, 20),
    "Q5_0": (32, 22),
    "Q5_1": (32, 24),
    "Q8_0": (32, 34),
    "Q8_1": (32, 36),
    "IQ4_NL": (32, 18),
    "Q2_K": (256, 84),
    "Q3_K": (256, 110),
    "Q4_K": (256, 144),
    "Q5_K": (256, 176),
    "Q6_K": (256, 210),
    "Q8_K": (256, 292),
    "IQ2_XXS": (256, 66),
    "IQ2_XS": (256, 74),
    "IQ2_S": (256, 82),
    "IQ3_XXS": (256, 98),
    "IQ3_S": (256, 110),
    "IQ1_S": (256, 50),
    "IQ1_M": (256, 56),
    "IQ4_XS": (256, 136),
    "TQ1_0": (256, 54),
    "TQ2_0": (256, 66),
    "MXFP4": (32, 17),
}

# The KV cache types llama.cpp accepts for --cache-type-k/-v.
KV_CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")

# Architectures whose SWA layer pattern is fixed in llama.cpp when the GGUF does not store one:
# with period p, layer i uses the sliding window unless i % p == p - 1.
_SWA_PERIOD = {
    "gemma2": 2,
    "gemma3": 6,
    "gemma3n": 5,
    "cohere2": 4,
    "llama4": 4,
    "gpt-oss": 2,
    "exaone4": 4,
}


@dataclass(frozen=True, slots=True)
class GgufShape:
    """The hyperparameters the memory model needs, read from GGUF metadata."""

    arch: str
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: tuple[int, ...]  # per layer (0 for a layer without attention)
    head_dim_k: int
    head_dim_v: int
    n_ff: int
    n_vocab: int
    n_ctx_train: int
    n_swa: int  # sliding window in tokens; 0 when the model has none
    swa_layers: tuple[bool, ...]  # per layer: uses the sliding window


@dataclass(frozen=True, slots=True)
class GgufPlan:
    """Predicted llama.cpp buffers for one GGUF model and context setting (all bytes)."""

    weights_bytes: int  # sum of the tensor data ("model buffer size")
    kv_cache_bytes: int  # K + V over all layers ("KV buffer size")
    compute_buffer_bytes: int  # graph scratch ("compute buffer size")
    output_buffer_bytes: int  # logits of the last token per sequence ("output buffer size")
    total_bytes: int  # everything above
    weights_by_type: dict[str, int]  # GGML type name -> bytes, largest first
    k_cache_bytes: int
    v_cache_bytes: int
    n_ctx: int  # context after llama.cpp's padding (what its log prints as n_ctx)
    n_ctx_seq: int  # cells per sequence
    kv_cells: int  # cells in the full-attention cache, all sequences
    swa_cells: int  # cells in the sliding-window cache, all sequences (0 without SWA layers)
    n_ubatch: int  # micro-batch after clamping to the context
    shape: GgufShape
    notes: tuple[str, ...] = ()


def plan_gguf(
    metadata: Mapping[str, Any],
    tensors: Sequence[TensorInfo],
    *,
    n_ctx: int,
    n_parallel: int = 1,
    cache_type_k: str = "f16",
    cache_type_v: str = "f16",
    n_batch: int = 2048,
    n_ubatch: int = 512,
    flash_attn: bool = False,
    kv_unified: bool = False,
    swa_full: bool = False,
) -> GgufPlan:
    """Predict llama.cpp's model, KV, compute and output buffers for ``n_ctx`` tokens.

    ``n_ctx`` is the whole context (``-c``/``--n_ctx``; 0 means the model's training context),
    shared by ``n_parallel`` sequences (``-np``). Defaults are llama-server's; llama-cpp-python's
    server uses ``n_batch=512`` and no flash attention. Raises InputError for a bad setting or
    metadata that lacks what the model needs.
    """
    shape = read_shape(metadata, tensors)
    _check_settings(n_ctx, n_parallel, cache_type_k, cache_type_v, flash_attn, shape)
    ctx = _context(n_ctx or shape.n_ctx_train, n_parallel, kv_unified)
    n_ctx_pad, n_ctx_seq, n_stream = ctx
    ubatch = min(n_ctx_pad, n_batch, n_ubatch)
    swa_seq = _swa_cells(shape, n_ctx_seq, n_parallel, ubatch, kv_unified, swa_full)
    k_bytes, v_bytes = _kv_bytes(shape, n_ctx_seq, swa_seq, n_stream, cache_type_k, cache_type_v)
    n_kv = n_ctx_seq if not all(shape.swa_layers) else swa_seq
    compute = compute_buffer_bytes(shape, n_kv=n_kv, n_ubatch=ubatch, flash_attn=flash_attn)
    by_type = weights_by_type(tensors)
    weights = sum(by_type.values())
    output = shape.n_vocab * FLOAT_BYTES * n_parallel
    return GgufPlan(
        weights_bytes=weights,
        kv_cache_bytes=k_bytes + v_bytes,
        compute_buffer_bytes=compute,
        output_buffer_bytes=output,
        total_bytes=weights + k_bytes + v_bytes + compute + output,
        weights_by_type=by_type,
        k_cache_bytes=k_bytes,
        v_cache_bytes=v_bytes,
        n_ctx=n_ctx_pad,
        n_ctx_seq=n_ctx_seq,
        kv_cells=n_ctx_seq * n_stream,
        swa_cells=swa_seq * n_stream if any(shape.swa_layers) else 0,
        n_ubatch=ubatch,
        shape=shape,
        notes=_notes(shape, metadata, n_ctx_seq),
    )


def row_bytes(type_name: str, n_values: int) -> int:
    """Bytes of one row of ``n_values`` values stored as GGML type ``type_name`` (any case)."""
    block_values, block_bytes = _BLOCKS[type_name.upper()]
    return (n_values // block_values) * block_bytes


def weights_by_type(tensors: Sequence[TensorInfo]) -> dict[str, int]:
    """Bytes of tensor data per GGML type, largest first (exact: from the tensor table)."""
    totals: dict[str, int] = {}
    for t in tensors:
        totals[t.dtype] = totals.get(t.dtype, 0) + t.nbytes
    return dict(sorted(totals.items(), key=lambda kv: (-kv[1], kv[0])))


def compute_buffer_bytes(shape: GgufShape, *, n_kv: int, n_ubatch: int, flash_attn: bool) -> int:
    """Size of the graph allocator's buffer: the largest of three stages (see module doc)."""
    e, gqa_v, n_head = shape.n_embd, shape.head_dim_v * max(shape.n_head_kv), shape.n_head
    stages: tuple[int, ...]
    if flash_attn:
        mask = _pad(n_kv, 2) // 2  # f16 mask, in 4-byte units
        stages = (3 * shape.n_ff + mask + 2 * e + 7, shape.n_vocab + 2 * e + 1)
    else:
        stages = (
            (n_head + 1) * n_kv + 5 * e + 2 * gqa_v + 5,  # scores + f32 mask + activations
            3 * shape.n_ff + n_kv + 3 * e + 2 * gqa_v + 5,  # gate, up, product + mask
            shape.n_vocab + 2 * e + 2 * gqa_v + 1,  # logits
        )
    return n_ubatch * FLOAT_BYTES * max(stages)


def read_shape(metadata: Mapping[str, Any], tensors: Sequence[TensorInfo]) -> GgufShape:
    """The hyperparameters from GGUF metadata (``{arch}.*`` keys); InputError when missing."""
    arch = str(metadata.get("general.architecture") or "")
    if not arch:
        raise InputError(
            "the GGUF metadata has no general.architecture",
            hint="is this a model GGUF? run `bringup verify` on it",
        )
    n_layer = _int(metadata, f"{arch}.block_count")
    n_embd = _int(metadata, f"{arch}.embedding_length")
    n_head = _max_int(metadata, f"{arch}.attention.head_count", None)
    kv_raw = metadata.get(f"{arch}.attention.head_count_kv", n_head)
    n_head_kv = _per_layer(kv_raw, n_layer)
    head_k = _int(metadata, f"{arch}.attention.key_length", n_embd // max(n_head, 1))
    head_v = _int(metadata, f"{arch}.attention.value_length", head_k)
    n_swa = _int(metadata, f"{arch}.attention.sliding_window", 0)
    return GgufShape(
        arch=arch,
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim_k=head_k,
        head_dim_v=head_v,
        n_ff=_max_int(metadata, f"{arch}.feed_forward_length", 0),
        n_vocab=_vocab_size(metadata, arch, tensors),
        n_ctx_train=_int(metadata, f"{arch}.context_length", 0),
        n_swa=n_swa,
        swa_layers=_swa_layers(metadata, arch, n_layer, n_swa),
    )


def _check_settings(
    n_ctx: int, n_parallel: int, type_k: str, type_v: str, flash_attn: bool, shape: GgufShape
) -> None:
    if n_ctx < 0 or (n_ctx == 0 and shape.n_ctx_train <= 0):
        raise InputError(f"bad context size {n_ctx}", hint="give a positive number of tokens")
    if n_parallel < 1:
        raise InputError(f"bad number of parallel sequences {n_parallel}", hint="use 1 or more")
    for flag, name in (("--cache-type-k", type_k), ("--cache-type-v", type_v)):
        if name.lower() not in KV_CACHE_TYPES:
            raise InputError(
                f"unknown KV cache type {name!r} for {flag}",
                hint=f"use one of {', '.join(KV_CACHE_TYPES)}",
            )
    if _is_quantized(type_v) and not flash_attn:
        raise InputError(
            f"a quantized V cache ({type_v}) needs flash attention",
            hint="add --flash-attn on (llama-cpp-python: --flash_attn true) "
            "or keep --cache-type-v f16",
        )
    for name, dim in ((type_k, shape.head_dim_k), (type_v, shape.head_dim_v)):
        block = _BLOCKS[name.upper()][0]
        if flash_attn and dim % block:
            raise InputError(
                f"cache type {name} stores blocks of {block} values, which do not "
                f"divide the head size {dim}",
                hint="use f16 for this model",
            )


def _is_quantized(type_name: str) -> bool:
    return _BLOCKS[type_name.upper()][0] > 1


def _pad(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _context(n_ctx: int, n_parallel: int, kv_unified: bool) -> tuple[int, int, int]:
    """(padded n_ctx, cells per stream, streams), as llama_context's constructor does."""
    padded = _pad(n_ctx, CELL_PAD)
    if kv_unified:
        return padded, padded, 1
    per_seq = _pad(padded // n_parallel, CELL_PAD)
    return per_seq * n_parallel, per_seq, n_parallel


def _swa_cells(
    shape: GgufShape,
    n_ctx_seq: int,
    n_parallel: int,
    n_ubatch: int,
    kv_unified: bool,
    swa_full: bool,
) -> int:
    """Cells per stream of the sliding-window cache (llama_kv_cache_iswa)."""
    if not any(shape.swa_layers) or swa_full:
        return n_ctx_seq
    window = shape.n_swa * (n_parallel if kv_unified else 1) + n_ubatch
    return _pad(min(n_ctx_seq, window), CELL_PAD)


def _kv_bytes(
    shape: GgufShape, base_cells: int, swa_cells: int, n_stream: int, type_k: str, type_v: str
) -> tuple[int, int]:
    k_total = v_total = 0
    for layer in range(shape.n_layer):
        heads = shape.n_head_kv[layer]
        if heads == 0:
            continue
        cells = (swa_cells if shape.swa_layers[layer] else base_cells) * n_stream
        k_total += cells * row_bytes(type_k, shape.head_dim_k * heads)
        v_total += cells * row_bytes(type_v, shape.head_dim_v * heads)
    return k_total, v_total


def _int(metadata: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = metadata.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        if value is None:
            raise InputError(
                f"the GGUF metadata has no {key}",
                hint="the memory model needs it; is the file complete?",
            )
        raise InputError(f"the GGUF metadata key {key} is {value!r}, not a whole number")
    return value


def _max_int(metadata: Mapping[str, Any], key: str, default: int | None) -> int:
    value = metadata.get(key, default)
    if isinstance(value, list | tuple):
        return max((int(v) for v in value), default=0)
    return _int(metadata, key, default)


def _per_layer(value: Any, n_layer: int) -> tuple[int, ...]:
    if isinstance(value, list | tuple):
        if len(value) != n_layer:
            raise InputError(f"head_count_kv lists {len(value)} layers, block_count says {n_layer}")
        return tuple(int(v) for v in value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"the GGUF metadata has no usable attention.head_count_kv ({value!r})")
    return (value,) * n_layer


def _vocab_size(metadata: Mapping[str, Any], arch: str, tensors: Sequence[TensorInfo]) -> int:
    """``{arch}.vocab_size``, else the rows of the embedding (token arrays are often dropped)."""
    size = metadata.get(f"{arch}.vocab_size")
    if isinstance(size, int) and not isinstance(size, bool):
        return size
    tokens = metadata.get("tokenizer.ggml.tokens")
    if isinstance(tokens, list | tuple):
        return len(tokens)
    for t in tensors:
        if t.name in ("token_embd.weight", "output.weight") and len(t.shape) == 2:
            return max(t.shape)
    raise InputError("cannot tell the vocabulary size: no vocab_size key and no token_embd tensor")


def _swa_layers(
    metadata: Mapping[str, Any], arch: str, n_layer: int, n_swa: int
) -> tuple[bool, ...]:
    if n_swa <= 0:
        return (False,) * n_layer
    pattern = metadata.get(f"{arch}.attention.sliding_window_pattern")
    if isinstance(pattern, list | tuple) and len(pattern) == n_layer:
        return tuple(bool(p) for p in pattern)
    period = pattern if isinstance(pattern, int) and not isinstance(pattern, bool) else None
    period = period if period is not None else _SWA_PERIOD.get(arch, 0)
    if period <= 0:
        return (True,) * n_layer  # e.g. mistral-style: every layer uses the window
    return tuple(i % period < period - 1 for i in range(n_layer))


def _notes(shape: GgufShape, metadata: Mapping[str, Any], n_ctx_seq: int) -> tuple[str, ...]:
    notes: list[str] = []
    arch = shape.arch
    if n_ctx_seq > shape.n_ctx_train > 0:
        notes.append(
            f"the context per sequence ({n_ctx_seq}) is longer than the model was "
            f"trained for ({shape.n_ctx_train}); llama.cpp warns and answers get worse"
        )
    if metadata.get(f"{arch}.expert_count"):
        notes.append("mixture of experts: the compute buffer for expert routing is not modelled")
    if metadata.get(f"{arch}.attention.kv_lora_rank"):
        notes.append("MLA attention (compressed KV) is not modelled: the KV estimate is too high")
    if metadata.get(f"{arch}.ssm.state_size"):
        notes.append("recurrent (SSM) state is not modelled")
    return tuple(notes)
