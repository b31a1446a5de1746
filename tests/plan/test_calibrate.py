"""Calibration: a successful startup's numbers correct the prediction for other settings."""

from __future__ import annotations

import io
import json
from pathlib import Path

from bringup.cli.main import Context, main
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


LOG = Path(__file__).resolve().parent / "fixtures" / "vllm_llama8b_h100_ready.log"


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["plan", *argv], Context(stdout=out, stderr=err, environ={"NO_COLOR": "1"}))
    return code, out.getvalue(), err.getvalue()


def test_a_log_of_another_model_is_refused() -> None:
    """Qwen3-8B calibrated with a Llama-3.1-8B log: exit 2 naming what differs."""
    code, out, err = _cli("Qwen3-8B", "--gpu", "H100", "--calibrate", str(LOG))
    assert code == 2
    assert out == ""
    assert "another model" in err
    assert "LlamaForCausalLM" in err
    assert "--force-calibrate" in err


def test_forced_calibration_says_what_it_overrode() -> None:
    """--force-calibrate uses the log anyway, and the JSON lists the mismatches."""
    code, out, _ = _cli(
        "Qwen3-8B", "--gpu", "H100", "--calibrate", str(LOG), "--force-calibrate", "--json"
    )
    data = json.loads(out)
    assert code in (0, 1)
    assert any("architecture" in m for m in data["calibration"]["mismatches"])


def test_calibration_uses_the_logs_version_and_says_what_changed() -> None:
    """The log's vLLM 0.11 rules apply; each change names from, to and its log line."""
    code, out, _ = _cli(
        "Llama-3.1-8B",
        "--gpu",
        "H100",
        "--max-model-len",
        "32768",
        "--calibrate",
        str(LOG),
        "--json",
    )
    data = json.loads(out)
    assert code == 0
    assert data["settings"]["engine_version"] == "0.11"
    c = data["calibration"]
    assert c["engine_version"] == "0.11"
    changes = {ch["what"]: ch for ch in c["changes"]}
    assert changes["vLLM version"]["before"] == "0.33"
    assert changes["vLLM version"]["after"] == "0.11"
    assert "Model loading took 14.9889 GiB" in changes["weights per GPU"]["line"]
    assert changes["KV cache per GPU"]["after"] == "55.04 GiB"
    assert data["kv_cache"]["tokens"] == 450_880  # the logged startup, reproduced
    code, text, _ = _cli(
        "Llama-3.1-8B", "--gpu", "H100", "--max-model-len", "32768", "--calibrate", str(LOG)
    )
    assert "calibrated from" in text
    assert "weights per GPU:" in text
    assert "from: " in text


def test_an_explicit_engine_version_wins_over_the_logs() -> None:
    """--engine-version given: the plan follows it, not the log's."""
    _, out, _ = _cli(
        "Llama-3.1-8B",
        "--gpu",
        "H100",
        "--max-model-len",
        "32768",
        "--calibrate",
        str(LOG),
        "--engine-version",
        "0.22",
        "--json",
    )
    assert json.loads(out)["settings"]["engine_version"] == "0.22"
