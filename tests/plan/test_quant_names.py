"""Every `--quantization` name vLLM accepts that a checkpoint can carry, and MXFP4's GPU layout."""

from __future__ import annotations

import io

import pytest

from bringup.cli.main import Context, main
from bringup.core.plan.quant import format_from_config, mxfp4_moe_padding
from bringup.errors import UsageError
from plan.helpers import plan


@pytest.mark.parametrize(
    ("name", "method"),
    [
        ("fp8", "fp8-channel"),
        ("fbgemm_fp8", "fp8-channel"),
        ("modelopt_fp4", "nvfp4"),
        ("mxfp4", "mxfp4"),
        ("awq", "awq"),
        ("awq_marlin", "awq"),
        ("gptq", "gptq"),
        ("gptq_marlin", "gptq"),
        ("bitsandbytes", "nf4"),
        ("experts_int8", "int8"),
        ("w8a8", "int8"),
        ("w4a16", "int4"),
        ("mxfp8", "mxfp8"),
        ("moe_wna16", "int4"),
    ],
)
def test_vllm_quantization_names_are_accepted(name: str, method: str) -> None:
    """Each name maps to the weight format a checkpoint of it stores."""
    assert format_from_config(None, name).method == method


@pytest.mark.parametrize(
    ("config", "method"),
    [
        ({"quant_method": "fbgemm_fp8"}, "fp8-channel"),
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4"),
        ({"quant_method": "modelopt", "quant_algo": "FP8"}, "fp8-channel"),
        ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "int8"),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int"}}},
            },
            "int4",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 8, "type": "int"}}},
            },
            "int8",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float"}}},
            },
            "fp8-channel",
        ),
    ],
)
def test_quantization_config_is_read_when_not_given(config: dict, method: str) -> None:
    """Without --quantization, the checkpoint's quantization_config decides."""
    assert format_from_config(config, None).method == method


def test_an_unknown_name_is_a_usage_error_naming_vllms() -> None:
    """`--quantization int3` exits 2 and lists vLLM's names."""
    with pytest.raises(UsageError) as err:
        format_from_config(None, "int3")
    assert "fbgemm_fp8" in (err.value.hint or "")
    out, errs = io.StringIO(), io.StringIO()
    code = main(
        ["plan", "Llama-3.1-8B", "--gpu", "H100", "--quantization", "int3"],
        Context(stdout=out, stderr=errs, environ={}),
    )
    assert code == 2
    assert "int3" in errs.getvalue()


def test_fbgemm_fp8_plans_like_405b_fp8() -> None:
    """Llama-3.1-70B with --quantization fbgemm_fp8 plans (8-bit linears), not refused."""
    p = plan("Llama-3.1-70B", "H100", 4, tensor_parallel_size=4, quantization="fbgemm_fp8")
    bf16 = plan("Llama-3.1-70B", "H100", 4, tensor_parallel_size=4)
    assert p.per_gpu.weights_bytes < 0.6 * bf16.per_gpu.weights_bytes


def test_mxfp4_layout_depends_on_the_gpu() -> None:
    """gpt-oss-120b TP4: per-rank intermediate 720 -> 768 on both (Marlin 128, Triton 64), and
    hidden 2880 -> 3072 on A100 only (Marlin's 256): experts 6.7 % larger there."""
    assert mxfp4_moe_padding((8, 0)) == (128, 256)
    assert mxfp4_moe_padding((9, 0)) == (64, 1)
    assert mxfp4_moe_padding((9, 0), version=(0, 11)) == (128, 256)  # no triton_kernels: Marlin
    assert mxfp4_moe_padding((10, 0)) == (256, 256)
    a100 = plan("gpt-oss-120b", "A100 80GB", 4, tensor_parallel_size=4, max_model_len=16384)
    h100 = plan("gpt-oss-120b", "H100", 4, tensor_parallel_size=4, max_model_len=16384)
    ratio = a100.per_gpu.weights_bytes / h100.per_gpu.weights_bytes
    assert 1.05 < ratio < 3072 / 2880
