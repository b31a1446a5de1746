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

METHODS = (
    "none",
    "fp8",
    "fp8-channel",
    "mxfp8",
    "awq",
    "gptq",
    "int4",
    "nf4",
    "nvfp4",
    "mxfp4",
    "int8",
)


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


# ``--quantization`` names vLLM accepts (``vllm/model_executor/layers/quantization/__init__.py``
# ``QuantizationMethods``, 0.33, plus bitsandbytes and gguf of earlier releases) that a
# checkpoint can carry, and the weight format each stores
_NAMES: dict[str, str] = {
    "fp8": "fp8",
    "fbgemm-fp8": "fp8-channel",
    "fp8-per-tensor": "fp8-channel",
    "fp8-per-channel": "fp8-channel",
    "fp8-per-block": "fp8",
    "deepseek-v4-fp8": "fp8",
    "online": "fp8-channel",
    "ptpc-fp8": "fp8-channel",
    "modelopt": "modelopt",
    "modelopt-fp4": "nvfp4",
    "modelopt-mxfp8": "mxfp8",
    "mxfp8": "mxfp8",
    "nvfp4": "nvfp4",
    "nvfp4-per-token": "nvfp4",
    "fp4": "nvfp4",
    "mxfp4": "mxfp4",
    "gpt-oss-mxfp4": "mxfp4",
    "awq": "awq",
    "auto-awq": "awq",
    "awq-marlin": "awq",
    "gptq": "gptq",
    "auto-gptq": "gptq",
    "gptq-marlin": "gptq",
    "moe-wna16": "int4",
    "compressed-tensors": "compressed-tensors",
    "w8a8": "int8",
    "int8": "int8",
    "int8-per-channel-weight-only": "int8",
    "experts-int8": "experts-int8",
    "w4a16": "int4",
    "int4": "int4",
    "bitsandbytes": "bitsandbytes",
    "bitsandbytes-8bit": "int8",
    "gguf": "gguf",
}
KNOWN_QUANTIZATIONS = tuple(sorted(n.replace("-", "_") for n in _NAMES))


def _from_name(name: str, quant: Mapping[str, Any] | None) -> WeightFormat:
    n = name.lower().replace("_", "-")
    q = quant or {}
    if n in ("none", "bf16", "fp16", "auto", ""):
        return WeightFormat("none")
    kind = _NAMES.get(n)
    if kind is None:
        raise UsageError(
            f"unknown quantization {name!r}",
            hint=f"use one of vLLM's: {', '.join(KNOWN_QUANTIZATIONS)}",
        )
    if kind == "fp8":
        block = q.get("weight_block_size")
        if block:
            return WeightFormat("fp8", block=(int(block[0]), int(block[1])))
        return (
            WeightFormat("fp8", block=(128, 128))
            if n == "fp8-per-block"
            else (WeightFormat("fp8-channel"))
        )
    if kind == "modelopt":
        algo = str(q.get("quant_algo") or (q.get("quantization") or {}).get("quant_algo", ""))
        return WeightFormat("nvfp4" if "fp4" in algo.lower() else "fp8-channel")
    if kind in ("awq", "gptq"):
        return WeightFormat(kind, group_size=int(q.get("group_size") or 128))
    if kind == "mxfp4":
        return WeightFormat("mxfp4", experts_only=True)
    if kind == "mxfp8":
        return WeightFormat("mxfp8")
    if kind == "experts-int8":
        return WeightFormat("int8", experts_only=True)  # vLLM quantizes the experts at load
    if kind == "bitsandbytes":
        return WeightFormat("int8" if q.get("load_in_8bit") else "nf4")
    if kind == "gguf":
        raise UsageError(
            "--quantization gguf: plan the .gguf file itself (bringup plan MODEL.gguf)",
            hint="the GGUF planner reads the file's own tensor types",
        )
    if kind == "compressed-tensors":
        return _compressed_tensors(q)
    return WeightFormat(kind)


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
    if method == "mxfp8":  # fp8 values with one e8m0 scale byte per 32
        return [
            _t(f"{prefix}.weight", "F8_E4M3", (out_features, in_features), 1),
            _t(f"{prefix}.weight_scale", "U8", (out_features, _cdiv(in_features, 32)), 1),
        ]
    if method == "nf4":  # bitsandbytes 4-bit: two per byte, an fp32 absmax per 64
        count = out_features * in_features
        return [
            _t(f"{prefix}.weight", "U8", (count // 2, 1), 1),
            _t(f"{prefix}.weight.absmax", "F32", (_cdiv(count, 64),), 4),
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


def mxfp4_moe_padding(
    compute_capability: tuple[int, int] | None,
    interconnect: str | None = None,
    version: tuple[int, int] = (0, 33),
) -> tuple[int, int]:
    """(multiple of the per-rank expert intermediate size, multiple of the hidden size) vLLM
    pads MXFP4 MoE weights to at load, by the backend it picks for the GPU
    (``vllm/model_executor/layers/quantization/mxfp4.py``: ``get_mxfp4_backend`` and
    ``create_weights``, 0.10-0.13):

    - Blackwell datacenter (SM10x, FlashInfer BF16/TRTLLM): 256 and 256;
    - Hopper (SM90, Triton kernels): 64, hidden unpadded. The Triton backend needs the
      ``triton_kernels`` package (``has_triton_kernels()``; without it ``get_mxfp4_backend``
      picks Marlin), which vLLM's wheel depends on only from vllm-project/vllm#27370 (merged
      2025-10-22, after 0.11.0: "users have to install triton_kernels manually"); before 0.12
      a pip-installed vLLM on Hopper takes the Marlin padding below;
    - Ampere/Ada and SM12x (RTX PRO 6000, GB10: the Marlin kernel, which needs n % 256 and
      k % 128): 128 and 256;
    - ROCm (Triton): 256 and 256.
    """
    if compute_capability is None:
        return 1, 1
    if interconnect == "xgmi":
        return 256, 256
    major, _minor = compute_capability
    if major == 10:
        return 256, 256
    if major == 9 and version >= (0, 12):
        return 64, 1
    return 128, 256
