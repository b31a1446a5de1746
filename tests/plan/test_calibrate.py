"""Calibration: a successful startup's numbers correct the prediction for other settings."""

from __future__ import annotations

from bringup.core.plan.calibrate import calibrate
from plan.helpers import GiB, bundled_config, planner_for


def test_calibration_reproduces_the_measured_startup() -> None:
    """Calibrated on a log's facts, the plan for the same settings gives the logged KV pool and weights."""
    planner, s = planner_for(bundled_config("Llama-3.1-8B"), "H100", 1, engine_version="0.11")
    facts = {
        "weights_gib_per_gpu": 15.5,
        "available_kv_gib": 50.0,
        "kv_cache_tokens": 409_600,
        "gpu_memory_utilization": 0.9,
        "tensor_parallel_size": 1,
        "max_num_seqs": 1024,
        "max_num_batched_tokens": 8192,
    }
    planner.calibration = calibrate(planner, s, facts)
    rank = planner.evaluate(s).rank
    assert rank.weights / GiB == 15.5
    assert abs(rank.kv / GiB - 50.0) < 0.01
    assert abs(rank.spec.bytes_per_token - 50.0 * GiB / 409_600) < 2


def test_calibration_carries_over_to_other_settings() -> None:
    """A higher utilization after calibration adds exactly the extra budget to the KV pool."""
    planner, s = planner_for(bundled_config("Llama-3.1-8B"), "H100", 1, engine_version="0.11")
    facts = {"weights_gib_per_gpu": 15.5, "available_kv_gib": 50.0, "gpu_memory_utilization": 0.9}
    planner.calibration = calibrate(planner, s, facts)
    higher = planner.evaluate(s.with_(gpu_memory_utilization=0.95)).rank
    assert abs(higher.kv - (50.0 * GiB + 0.05 * higher.total)) < 2


def test_empty_facts_change_nothing() -> None:
    """A log with no numbers leaves the prediction as it was."""
    planner, s = planner_for(bundled_config("Llama-3.1-8B"), "H100", 1)
    before = planner.evaluate(s).rank
    planner.calibration = calibrate(planner, s, {})
    assert planner.evaluate(s).rank == before
