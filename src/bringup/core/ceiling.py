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

from dataclasses import dataclass

from bringup.units import format_bytes

ALLREDUCES_PER_LAYER = 2


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
        f" at {bandwidth:.2f} TB/s{gpu} ({weight_s * 1e3:.2f} ms)"
    )
    if inputs.tensor_parallel > 1 and inputs.link is not None:
        count = ALLREDUCES_PER_LAYER * inputs.num_layers
        link = inputs.link
        text += (
            f", plus {count} allreduces per token at tp={inputs.tensor_parallel} over {link.name}"
            f" ({link.latency_seconds * 1e6:.0f} us each + {link.bandwidth_bytes_per_second / 1e9:.0f} GB/s:"
            f" {allreduce_s * 1e3:.2f} ms)"
        )
    return text
