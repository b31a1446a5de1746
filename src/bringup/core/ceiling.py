"""The predicted decode ceiling at batch 1: what the GPUs and their links allow one stream.

At batch 1 every generated token reads every active weight once. Each tensor-parallel rank
reads its share from its own memory, in parallel, so a token costs at least::

    weight_time    = active_weight_bytes_per_rank / memory_bandwidth
    allreduce_time = 2 * num_layers * (allreduce_latency
                                       + 2 (tp - 1) / tp * hidden_size * dtype_bytes / link_bandwidth)

(two allreduces per layer, after attention and after the MLP, each of one token's hidden
state; a ring allreduce moves 2(tp-1)/tp of the data through each link). With tp = 1 there
is no allreduce. The ceiling is ``1 / (weight_time + allreduce_time)`` tokens per second.
Real engines reach perhaps 60-85% of it; a measurement far below points at something else
(eager mode, a slow kernel, a link slower than assumed).

For mixture-of-experts models only the shared weights plus the top-k experts' share of the
routed weights are read per token.

>>> link = Link("PCIe", bandwidth_bytes_per_second=25e9, latency_seconds=25e-6)
>>> c = predict_decode_ceiling(DecodeInputs(
...     active_weight_bytes=16_000_000_000, num_layers=32, hidden_size=4096,
...     tensor_parallel=2, memory_bandwidth_bytes_per_second=1.0e12, link=link))
>>> round(c.decode_tokens_per_second, 1)
103.9
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bringup.core.checkpoint import TensorInfo
from bringup.units import format_bytes

ALLREDUCES_PER_LAYER = 2

# Fixed cost of one small (one token's hidden state) NCCL allreduce, by link kind. Typical
# nccl-tests all_reduce_perf latencies at a few KiB; approximate, and the basis says so.
ALLREDUCE_LATENCY_SECONDS: dict[str, float] = {"nvlink": 10e-6, "xgmi": 15e-6, "pcie": 50e-6}
LINK_NAMES = {"nvlink": "NVLink", "xgmi": "xGMI", "pcie": "PCIe"}

_ROUTED_EXPERT = re.compile(r"(\.experts\.|_exps\.)")
_SHARED_EXPERT = re.compile(r"shared|_shexp")
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model", "dim")
_EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
_TOPK_KEYS = ("num_experts_per_tok", "moe_topk", "num_selected_experts", "top_k")


@dataclass(frozen=True, slots=True)
class Link:
    """The interconnect between tensor-parallel GPUs, as the ceiling sees it."""

    name: str  # "NVLink", "PCIe", ...
    bandwidth_bytes_per_second: float  # per direction, per GPU
    latency_seconds: float  # fixed cost of one small allreduce over this link


@dataclass(frozen=True, slots=True)
class DecodeInputs:
    """Everything the batch-1 decode ceiling depends on."""

    active_weight_bytes: int  # all ranks together: what one token reads
    num_layers: int
    hidden_size: int
    tensor_parallel: int
    memory_bandwidth_bytes_per_second: float  # of one GPU
    link: Link | None = None  # required when tensor_parallel > 1
    activation_dtype_bytes: int = 2  # bf16/fp16 hidden states in the allreduce
    gpu_name: str | None = None  # for the basis sentence


@dataclass(frozen=True, slots=True)
class DecodeCeiling:
    """The prediction and how it was made."""

    decode_tokens_per_second: float
    basis: str  # one sentence: the numbers that went in
    weight_seconds: float  # per token
    allreduce_seconds: float  # per token (0 without tensor parallel)


@dataclass(frozen=True, slots=True)
class MoeShape:
    """How much of a model's weight is routed experts, and how many a token uses."""

    routed_expert_bytes: int  # all routed experts of all layers together
    num_experts: int
    experts_per_token: int


@dataclass(frozen=True, slots=True)
class ModelShape:
    """What the ceiling needs to know about a model."""

    weight_bytes: int  # all stored tensors
    num_layers: int
    hidden_size: int
    moe: MoeShape | None


def link_for(interconnect: str, bandwidth_bytes_per_second: float) -> Link:
    """A ``Link`` for a catalog interconnect kind ("nvlink", "pcie", "xgmi")."""
    kind = interconnect.lower()
    return Link(
        LINK_NAMES.get(kind, interconnect),
        bandwidth_bytes_per_second,
        ALLREDUCE_LATENCY_SECONDS.get(kind, ALLREDUCE_LATENCY_SECONDS["pcie"]),
    )


def model_shape(
    tensors: Sequence[TensorInfo],
    config: Mapping[str, Any] | None,
    gguf_metadata: Mapping[str, Any] | None = None,
) -> ModelShape | str:
    """The model's shape from its tensors and config (or GGUF metadata); a reason if unknown."""
    if not tensors:
        return "no weight files found next to the config (give the checkpoint folder)"
    fields = _shape_fields(config, gguf_metadata)
    layers, hidden = fields.get("layers"), fields.get("hidden")
    if not layers or not hidden:
        return "the model config names no layer count or hidden size"
    routed = sum(
        t.nbytes
        for t in tensors
        if _ROUTED_EXPERT.search(t.name) and not _SHARED_EXPERT.search(t.name)
    )
    experts, topk = fields.get("experts") or 0, fields.get("topk") or 0
    moe = MoeShape(routed, experts, topk) if routed and experts and topk else None
    return ModelShape(sum(t.nbytes for t in tensors), layers, hidden, moe)


def _shape_fields(
    config: Mapping[str, Any] | None, gguf_metadata: Mapping[str, Any] | None
) -> dict[str, int]:
    if gguf_metadata:
        arch = str(gguf_metadata.get("general.architecture", ""))
        names = {
            "layers": "block_count",
            "hidden": "embedding_length",
            "experts": "expert_count",
            "topk": "expert_used_count",
        }
        return {
            k: int(v)
            for k, key in names.items()
            if isinstance(v := gguf_metadata.get(f"{arch}.{key}"), int)
        }
    if not config:
        return {}
    text = config.get("text_config")
    merged = {**config, **text} if isinstance(text, Mapping) else dict(config)
    keys = {
        "layers": _LAYER_KEYS,
        "hidden": _HIDDEN_KEYS,
        "experts": _EXPERT_KEYS,
        "topk": _TOPK_KEYS,
    }
    out: dict[str, int] = {}
    for field_name, candidates in keys.items():
        value = next((merged[k] for k in candidates if isinstance(merged.get(k), int)), None)
        if value is not None:
            out[field_name] = int(value)
    return out


def active_weight_bytes(total_weight_bytes: int, moe: MoeShape | None) -> int:
    """Weight bytes one token reads: everything for dense models; shared + top-k for MoE.

    >>> active_weight_bytes(100, MoeShape(routed_expert_bytes=80, num_experts=8, experts_per_token=2))
    40
    """
    if moe is None or moe.num_experts <= 0:
        return total_weight_bytes
    k = min(moe.experts_per_token, moe.num_experts)
    shared = total_weight_bytes - moe.routed_expert_bytes
    return shared + moe.routed_expert_bytes * k // moe.num_experts


def allreduce_seconds_per_token(inputs: DecodeInputs) -> float:
    """Time the allreduces of one decoded token take (0 without tensor parallel)."""
    tp = inputs.tensor_parallel
    if tp <= 1:
        return 0.0
    if inputs.link is None:
        raise ValueError("tensor_parallel > 1 needs a link to predict allreduce time")
    payload_bytes = inputs.hidden_size * inputs.activation_dtype_bytes
    moved_bytes = 2 * (tp - 1) / tp * payload_bytes
    one = inputs.link.latency_seconds + moved_bytes / inputs.link.bandwidth_bytes_per_second
    return ALLREDUCES_PER_LAYER * inputs.num_layers * one


def predict_decode_ceiling(inputs: DecodeInputs) -> DecodeCeiling:
    """The batch-1 decode ceiling in tokens/s, with the sentence that explains it."""
    if inputs.memory_bandwidth_bytes_per_second <= 0 or inputs.tensor_parallel < 1:
        raise ValueError("memory bandwidth and tensor_parallel must be positive")
    per_rank_bytes = inputs.active_weight_bytes / inputs.tensor_parallel
    weight_s = per_rank_bytes / inputs.memory_bandwidth_bytes_per_second
    allreduce_s = allreduce_seconds_per_token(inputs)
    return DecodeCeiling(
        decode_tokens_per_second=1.0 / (weight_s + allreduce_s),
        basis=_basis(inputs, per_rank_bytes, weight_s, allreduce_s),
        weight_seconds=weight_s,
        allreduce_seconds=allreduce_s,
    )


def _basis(inputs: DecodeInputs, per_rank_bytes: float, weight_s: float, allreduce_s: float) -> str:
    gpu = f" of {inputs.gpu_name}" if inputs.gpu_name else ""
    bandwidth = inputs.memory_bandwidth_bytes_per_second / 1e12
    text = (
        f"batch-1 decode reads {format_bytes(per_rank_bytes)} of active weights per GPU per token"
        f" at {bandwidth:.2f} TB/s{gpu} ({_ms(weight_s)})"
    )
    if inputs.tensor_parallel > 1 and inputs.link is not None:
        count = ALLREDUCES_PER_LAYER * inputs.num_layers
        link = inputs.link
        text += (
            f", plus {count} allreduces per token at tp={inputs.tensor_parallel} over {link.name}"
            f" ({link.latency_seconds * 1e6:.0f} us each + {link.bandwidth_bytes_per_second / 1e9:.0f} GB/s:"
            f" {_ms(allreduce_s)})"
        )
    return text


def _ms(seconds: float) -> str:
    """Milliseconds to three significant digits (``'19.6 ms'``, ``'0.000231 ms'``)."""
    return f"{seconds * 1e3:.3g} ms"
