"""Weights per GPU rank: which tensors are sharded, replicated or split among experts.

The rules are vLLM's (``VocabParallelEmbedding``, ``ColumnParallelLinear``,
``RowParallelLinear``, ``QKVParallelLinear``, ``ReplicatedLinear``, ``FusedMoE``):

- vocabulary tensors (embedding, LM head): rows padded to a multiple of 64, then split by TP;
  tied embeddings are stored once;
- column/row-parallel linears (q/gate/up, o/down) and their scales: split by TP;
- K/V projections: each rank keeps ``max(1, kv_heads // tp)`` heads, so they are replicated
  when TP exceeds the KV heads;
- routed experts: split 1/TP each (TP-MoE), or whole experts spread over EP = TP ranks
  (``--enable-expert-parallel``; the busiest rank holds ``ceil(E / EP)`` experts);
- everything else (norms, routers, MLA's ``q_a_proj``/``kv_a_proj_with_mqa``, 1-D tensors):
  replicated on every rank;
- pipeline parallel: layers are split into contiguous stages, the embedding goes to the
  first stage and the LM head to the last;
- MXFP4 experts are padded at load to what the GPU's MoE kernel needs
  (``quant.mxfp4_moe_padding``).

Layers beyond ``num_hidden_layers`` (multi-token-prediction heads that vLLM only loads for
speculative decoding) are not counted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from bringup.core.checkpoint import TensorInfo
from bringup.core.plan.arch import Architecture

VOCAB_PADDING = 64

_LAYER = re.compile(r"(?:^|\.)(?:layers|h|blocks|block)\.(\d+)\.")
_EXPERT = re.compile(r"\.experts\.")
_VOCAB = re.compile(
    r"(embed_tokens|lm_head|wte|tok_embeddings|word_embeddings|embedding\.weight|^output\.weight)"
)
_KV = re.compile(r"\.(k_proj|v_proj|wk|wv)\b")
_REPLICATED = re.compile(
    r"(norm|\.gate\.|\.router|e_score_correction_bias|q_a_proj|kv_a_proj_with_mqa|rotary|\.sinks|expert_bias)"
)
_SCALARISH = 1


@dataclass(frozen=True, slots=True)
class Parallel:
    """How the model is split over GPUs."""

    tp: int = 1
    pp: int = 1
    expert_parallel: bool = False
    expert_pad: tuple[int, int] = (1, 1)  # MXFP4 load-time padding (intermediate, hidden)
    dp: int = 1  # data-parallel ranks: the MoE layers are split over tp x dp ranks

    @property
    def moe_ranks(self) -> int:
        """The ranks a MoE layer's experts are split over: vLLM flattens TP across DP for
        the fused MoE (``fused_moe/config.py::FusedMoEParallelConfig.make``:
        ``flatten_tp_across_dp_and_pcp``), whole experts under EP, each sliced without."""
        return self.tp * self.dp


@dataclass(frozen=True, slots=True)
class StageWeights:
    """Bytes one rank of one pipeline stage holds, by kind."""

    stage: int
    layers: tuple[int, int]  # [first, last) layer indices
    vocab_bytes: int
    sharded_bytes: int
    replicated_bytes: int
    expert_bytes: int

    @property
    def total_bytes(self) -> int:
        """All weight bytes on one GPU of this stage."""
        return self.vocab_bytes + self.sharded_bytes + self.replicated_bytes + self.expert_bytes


def stage_layers(num_layers: int, pp: int) -> list[tuple[int, int]]:
    """Contiguous layer ranges per pipeline stage (vLLM gives the remainder to later stages)."""
    base, extra = divmod(num_layers, pp)
    sizes = [base + (1 if i >= pp - extra else 0) for i in range(pp)]
    out, start = [], 0
    for size in sizes:
        out.append((start, start + size))
        start += size
    return out


def layer_of(name: str) -> int | None:
    """The decoder layer a tensor belongs to, if any."""
    m = _LAYER.search(name)
    return int(m.group(1)) if m else None


def weights_per_stage(
    tensors: Iterable[TensorInfo], arch: Architecture, par: Parallel
) -> list[StageWeights]:
    """Bytes per GPU rank for each pipeline stage."""
    ranges = stage_layers(arch.num_layers, par.pp)
    acc = [[0, 0, 0, 0] for _ in ranges]
    for t in tensors:
        layer = layer_of(t.name)
        if layer is not None and layer >= arch.num_layers:
            continue  # MTP / draft layers
        kind, nbytes = _place(t, arch, par)
        for s in _stages_for(t.name, layer, ranges, arch):
            acc[s][kind] += nbytes
    return [StageWeights(s, ranges[s], *acc[s]) for s in range(len(ranges))]


_VOCAB_I, _SHARDED_I, _REPLICATED_I, _EXPERT_I = range(4)


def _stages_for(
    name: str, layer: int | None, ranges: list[tuple[int, int]], arch: Architecture
) -> list[int]:
    if layer is not None:
        return [next(s for s, (a, b) in enumerate(ranges) if a <= layer < b)]
    if _VOCAB.search(name):
        first, last = 0, len(ranges) - 1
        if "lm_head" in name or name.startswith("output."):
            return [last]
        return [first, last] if arch.tie_word_embeddings and first != last else [first]
    return [len(ranges) - 1] if "norm" in name else [0]


def _place(t: TensorInfo, arch: Architecture, par: Parallel) -> tuple[int, int]:
    """(kind index, bytes on one rank) for one tensor."""
    tp = par.tp
    if _EXPERT.search(t.name) and "shared_expert" not in t.name:
        nbytes = round(t.nbytes * _expert_padding(arch, par))
        ranks = par.moe_ranks
        if par.expert_parallel and ranks > 1:
            # whole experts spread over EP = TP x DP ranks; the busiest holds ceil(E / EP)
            experts = arch.moe.num_experts if arch.moe else ranks
            return _EXPERT_I, nbytes * -(-experts // ranks) // experts
        return _EXPERT_I, nbytes // ranks
    if _VOCAB.search(t.name) and len(t.shape) == 2:
        rows = t.shape[0]
        padded = -(-arch.vocab_size // VOCAB_PADDING) * VOCAB_PADDING
        per_rank_rows = -(-padded // tp)
        return _VOCAB_I, t.nbytes * per_rank_rows // max(rows, 1)
    if len(t.shape) <= _SCALARISH or _REPLICATED.search(t.name):
        return _REPLICATED_I, t.nbytes
    if _KV.search(t.name) and arch.mla is None:
        kv = arch.num_kv_heads
        return _SHARDED_I, t.nbytes * max(1, kv // tp) // kv
    return _SHARDED_I, t.nbytes // tp


def _expert_padding(arch: Architecture, par: Parallel) -> float:
    """How much larger an expert tensor is once vLLM pads it (MXFP4 backends, see
    ``quant.mxfp4_moe_padding``)."""
    mi, mh = par.expert_pad
    if (mi, mh) == (1, 1) or arch.moe is None:
        return 1.0
    shards = 1 if par.expert_parallel else par.moe_ranks
    inter = arch.moe.intermediate_size // shards
    padded_inter = -(-inter // mi) * mi
    padded_hidden = -(-arch.hidden_size // mh) * mh
    return (padded_inter / inter) * (padded_hidden / arch.hidden_size)


def parameter_count(tensors: Iterable[TensorInfo], arch: Architecture) -> int:
    """Logical parameters: packed int4/fp4 elements unpacked, scales and zeros not counted."""
    total = 0
    for t in tensors:
        layer = layer_of(t.name)
        if layer is not None and layer >= arch.num_layers:
            continue
        name = t.name
        if re.search(r"(scale|zeros|zero_point|g_idx|weight_shape|input_scale|_scales$)", name):
            continue
        count = t.n_elements
        if name.endswith(("qweight", "weight_packed")) and t.dtype in ("I32", "U32"):
            count *= 8
        elif t.dtype in ("U8", "I8") and (name.endswith("_blocks") or _fp4_packed(t)):
            count *= 2
        total += count
    return total


def _fp4_packed(t: TensorInfo) -> bool:
    return t.dtype == "U8" and t.name.endswith((".weight", "weight_packed"))
