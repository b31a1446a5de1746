"""The twin's memory model decides whether a scenario's failure happens, from the flags."""

from __future__ import annotations

import pytest

from bringup.twin.memory import GPU_TOTAL_BYTES, MemoryPlan


def plan(seqs: int = 1024, util: float = 0.92, max_len: int = 196608, tp: int = 4) -> MemoryPlan:
    return MemoryPlan(GPU_TOTAL_BYTES, tp, util, seqs, 8192, max_len)


@pytest.mark.parametrize(
    ("seqs", "util", "fits"),
    [
        (1024, 0.92, True),
        (1024, 0.95, True),
        (1024, 0.97, False),
        (768, 0.97, True),
        (256, 0.97, True),
        (1024, 0.90, True),
        (768, 0.98, False),
    ],
)
def test_sampler_warmup_rule(seqs: int, util: float, fits: bool) -> None:
    """The warmup's extra min(seqs, batched) x 200064 x 12 must fit in total - util x total - context."""
    p = plan(seqs, util)
    assert p.sampler_bytes == min(seqs, 8192) * 200064 * 12
    assert p.sampler_headroom_bytes == GPU_TOTAL_BYTES - p.requested_bytes - p.context_bytes
    assert p.sampler_fits is fits


def test_kv_estimate_follows_utilization_and_length() -> None:
    """The estimated maximum model length grows with utilization, and a length at the estimate fits."""
    low, high = plan(util=0.70), plan(util=0.72)
    assert not high.kv_fits
    assert 0 < low.estimated_max_model_len < high.estimated_max_model_len < 196608
    assert plan(util=0.72, max_len=high.estimated_max_model_len).kv_fits
    assert not plan(util=0.72, max_len=high.estimated_max_model_len + 16).kv_fits


def test_weights_per_rank_and_serving_footprint() -> None:
    """TP4 holds 57.5 GB of weights per GPU and serves below the GPU's total."""
    p = plan()
    assert p.weights_bytes == 57_500_000_000
    assert p.weights_bytes + p.context_bytes < p.serving_bytes() < GPU_TOTAL_BYTES
    assert plan(tp=1).weights_bytes > GPU_TOTAL_BYTES
