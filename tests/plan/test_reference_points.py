"""The planner against numbers from public vLLM logs (table in reference_points.py)."""

from __future__ import annotations

import pytest

from plan.reference_points import POINTS, accuracy, evaluate

# rows whose weights the model covers (BF16 dense/MoE): within the 2 % goal
WEIGHTS_WITHIN_2_PERCENT = ("llama8b-h100", "qwen3-30b-a3b-tp4")


@pytest.mark.parametrize("name", WEIGHTS_WITHIN_2_PERCENT)
def test_weights_within_two_percent(name: str) -> None:
    """Predicted weights per GPU are within 2 % of "Model loading took"."""
    row = evaluate(next(p for p in POINTS if p.name == name))
    assert abs(row["weights_error"]) < 0.02


def test_kv_bytes_per_token_reproduce_logged_tokens() -> None:
    """Given the logged KV pool, the predicted bytes per token give the logged token count within 2 %."""
    row = evaluate(next(p for p in POINTS if p.name == "qwen3-235b-fp8-tp4-h100"))
    assert abs(row["kv_tokens_from_measured_pool_error"]) < 0.02


def test_gpt_oss_mxfp4_weights_on_hopper_before_0_12_follow_marlin_padding() -> None:
    """0.10 on Hopper without triton_kernels loads MXFP4 through Marlin, padded (quant.py)."""
    row = evaluate(next(p for p in POINTS if p.name == "gpt-oss-120b-h100-0.10"))
    assert abs(row["weights_error"]) < 0.01


def test_gpt_oss_mxfp4_weights_of_the_triton_backend_are_underestimated() -> None:
    """Known gap, kept visible: 0.14's Triton backend on Hopper loads ~6 % more than stored."""
    row = evaluate(next(p for p in POINTS if p.name == "gpt-oss-120b-h100-0.14"))
    assert -0.08 < row["weights_error"] < -0.04


def test_accuracy_summary_is_computed_over_every_row() -> None:
    """The medians cover every row that has a measurement."""
    a = accuracy()
    assert len(a["rows"]) == len(POINTS)
    assert 0 <= a["median_weights_error"] < 0.05
