"""Weight formats: how one linear layer is stored, with its scales, per quantization method.

Used to synthesise the tensor list of a model from its config.json alone (answering "will
it fit?" before a download). With a checkpoint on disk the planner uses the real tensors.

Stored bytes per weight, scales included (for a 4096 x 4096 layer):

==================  =====================================================  ============
format              tensors                                                bits/weight
==================  =====================================================  ============
bf16 / fp16         weight                                                 16
fp8 block [128,128] weight F8_E4M3 + weight_scale_inv F32 [out/128,in/128]  8.002
fp8 per channel     weight F8_E4M3 + weight_scale F32 [out, 1]              8.008
awq / gptq int4     qweight I32 (8 per int) + qzeros + scales F16 per 128   ~4.15
nvfp4               weight U8 (2 per byte) + weight_scale F8 per 16         4.5
mxfp4               blocks U8 (2 per byte) + scales U8 (e8m0) per 32        4.25
==================  =====================================================  ============

Embeddings, the LM head, norms and MoE routers stay in the model dtype.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bringup.core.checkpoint import TensorInfo
from bringup.errors import UsageError

METHODS = ("none", "fp8", "fp8-channel", "awq", "gptq", "int4", "nvfp4", "mxfp4", "int8")


@dataclass(frozen=True, slots=True)
class WeightFormat:
    """How linear layers are stored."""

    method: str  # one of METHODS
    block: tuple[int, int] = (128, 128)  # fp8 block size
    group_size: int = 128  # int4 group size
    experts_only: bool = False  # mxfp4 in gpt-oss quantizes only the experts


def format_from_config(quant: Mapping[str, Any] | None, override: str | None) -> WeightFormat:
    """The weight format from ``quantization_config`` and/or ``--quantization``."""
    if override:
        return _from_name(override, quant)
    if not quant:
        return WeightFormat("none")
    method = str(quant.get("quant_method") or quant.get("quant_algo") or "").lower()
    if method == "compressed-tensors":
        return _compressed_tensors(quant)
    if method == "modelopt":
        algo = str(
            quant.get("quant_algo") or quant.get("quantization", {}).get("quant_algo", "")
        ).lower()
        return WeightFormat("nvfp4" if "fp4" in algo else "fp8-channel")
    return _from_name(method, quant)


def _from_name(name: str, quant: Mapping[str, Any] | None) -> WeightFormat:
    n = name.lower().replace("_", "-")
    q = quant or {}
    if n in ("none", "bf16", "fp16", "auto", ""):
        return WeightFormat("none")
    if n == "fp8":
        block = q.get("weight_block_size")
        if block:
            return WeightFormat("fp8", block=(int(block[0]), int(block[1])))
        return WeightFormat("fp8-channel")
    if n in ("awq", "awq-marlin", "gptq", "gptq-marlin"):
        return WeightFormat(n.split("-")[0], group_size=int(q.get("group_size") or 128))
    if n in ("nvfp4", "modelopt-fp4", "fp4"):
        return WeightFormat("nvfp4")
    if n == "mxfp4":
        return WeightFormat("mxfp4", experts_only=True)
    if n in ("int8", "w8a8", "bitsandbytes-8bit"):
        return WeightFormat("int8")
    if n in ("int4", "w4a16", "bitsandbytes"):
        return WeightFormat("int4")
    if n == "compressed-tensors":
        return _compressed_tensors(q)
    raise UsageError(
        f"unknown quantization {name!r}",
        hint="use one of fp8, awq, gptq, nvfp4, mxfp4, int8, int4, none",
    )


def _compressed_tensors(quant: Mapping[str, Any]) -> WeightFormat:
    groups = quant.get("config_groups") or {}
    for group in groups.values() if isinstance(groups, Mapping) else []:
        weights = group.get("weights") or {}
        bits = int(weights.get("num_bits") or 8)
        kind = str(weights.get("type") or "int")
        if bits == 4 and kind == "float":
            return WeightFormat("nvfp4")
        if bits == 4:
            return WeightFormat("int4", group_size=int(weights.get("group_size") or 128))
        if kind == "float":
            block = weights.get("block_structure")
            return (
                WeightFormat("fp8", block=(int(block[0]), int(block[1])))
                if block
                else WeightFormat("fp8-channel")
            )
        return WeightFormat("int8")
    return WeightFormat("fp8-channel")


def linear_tensors(
    prefix: str,
    out_features: int,
    in_features: int,
    fmt: WeightFormat,
    dtype_bytes: int,
    *,
    quantized: bool = True,
) -> list[TensorInfo]:
    """The stored tensors of one ``[out, in]`` linear layer named ``prefix`` (no ``.weight``)."""
    method = fmt.method if quantized else "none"
    if method == "none":
        return [
            _t(
                f"{prefix}.weight",
                "BF16" if dtype_bytes == 2 else "F32",
                (out_features, in_features),
                dtype_bytes,
            )
        ]
    if method == "fp8":
        bo, bi = fmt.block
        return [
            _t(f"{prefix}.weight", "F8_E4M3", (out_features, in_features), 1),
            _t(
                f"{prefix}.weight_scale_inv",
                "F32",
                (_cdiv(out_features, bo), _cdiv(in_features, bi)),
                4,
            ),
        ]
    if method in ("fp8-channel", "int8"):
        return [
            _t(
                f"{prefix}.weight",
                "F8_E4M3" if method != "int8" else "I8",
                (out_features, in_features),
                1,
            ),
            _t(f"{prefix}.weight_scale", "F32", (out_features, 1), 4),
        ]
    if method in ("awq", "gptq", "int4"):
        groups = _cdiv(in_features, fmt.group_size)
        return [
            _t(f"{prefix}.qweight", "I32", (in_features, out_features // 8), 4),
            _t(f"{prefix}.qzeros", "I32", (groups, out_features // 8), 4),
            _t(f"{prefix}.scales", "F16", (groups, out_features), 2),
        ]
    if method == "nvfp4":
        return [
            _t(f"{prefix}.weight", "U8", (out_features, in_features // 2), 1),
            _t(f"{prefix}.weight_scale", "F8_E4M3", (out_features, _cdiv(in_features, 16)), 1),
            _t(f"{prefix}.weight_scale_2", "F32", (), 4),
        ]
    # mxfp4: 32-element blocks of 16 bytes plus one e8m0 scale byte each
    blocks = _cdiv(in_features, 32)
    return [
        _t(f"{prefix}_blocks", "U8", (out_features, blocks, 16), 1),
        _t(f"{prefix}_scales", "U8", (out_features, blocks), 1),
    ]


def _t(name: str, dtype: str, shape: tuple[int, ...], item_bytes: int) -> TensorInfo:
    count = 1
    for dim in shape:
        count *= dim
    return TensorInfo(
        name=name, dtype=dtype, shape=shape, nbytes=count * item_bytes, file="(config)"
    )


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def plain(name: str, shape: tuple[int, ...], dtype_bytes: int) -> TensorInfo:
    """An unquantized tensor (embedding, norm, router)."""
    return _t(name, "BF16" if dtype_bytes == 2 else "F32", shape, dtype_bytes)
