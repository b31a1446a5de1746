"""`bringup run` against real vLLM 0.32 (CPU build) on the tiny model: ready, and the real failures.

Each test runs the real CLI on a real vLLM, then gives the recording of that same run to
`bringup diagnose`: the live and offline verdicts must agree.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.real_engine import free_port
from vllm_real.runner import (
    assert_live_and_offline_agree,
    bringup_run,
    diagnose_recording,
    record,
)

from builders.vllm_env import serve_argv

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(600)]


def test_ready_with_a_real_answer(
    vllm_models: dict[str, Path], vllm_env: dict[str, str], tmp_path: Path
) -> None:
    """Two shards load; ready only after a real 1-token completion; the timeline has vLLM's phases."""
    run = bringup_run(serve_argv(vllm_models["two"], free_port()), vllm_env)
    assert run.code == 0, run.tail()
    assert run.summary["outcome"] == "ready"
    smoke = run.probes("smoke")
    assert smoke
    assert smoke[-1]["ok"]
    assert smoke[-1]["status"] == 200
    assert smoke[-1]["model"] == str(vllm_models["two"])
    phases = [e["phase"] for e in run.summary["timeline"]]
    for phase in ("config", "weights_loading", "weights_loaded", "kv_cache_alloc", "ready"):
        assert phase in phases, phases
    progress = [e for e in run.events if e["event"] == "progress" and e["unit"] == "shards"]
    assert progress
    assert (progress[-1]["done"], progress[-1]["total"]) == (2, 2)
    code, verdict = diagnose_recording(run, tmp_path, "ready")
    assert code == 0, verdict
    assert_live_and_offline_agree(run, verdict)
    assert verdict["facts"]["kv_cache_tokens"] == 1024 * 1024  # VLLM_CPU_KVCACHE_SPACE=1
    record(
        "ready_two_shards", run, "vllm serve (2 shards) --enforce-eager, VLLM_CPU_KVCACHE_SPACE=1"
    )


def test_compile_path_shows_torch_compile_as_its_own_step(
    vllm_models: dict[str, Path], vllm_env: dict[str, str], tmp_path: Path
) -> None:
    """Without --enforce-eager vLLM compiles the model (torch.compile): the timeline shows it as
    its own step, before the KV cache is sized, instead of hiding it in weights_loaded."""
    run = bringup_run(serve_argv(vllm_models["one"], free_port(), eager=False), vllm_env)
    assert run.code == 0, run.tail()
    timeline = run.summary["timeline"]
    phases = [e["phase"] for e in timeline]
    assert "torch_compile" in phases, phases
    assert phases.index("weights_loaded") < phases.index("torch_compile")
    assert phases.index("torch_compile") < phases.index("kv_cache_alloc")
    code, verdict = diagnose_recording(run, tmp_path, "compiled")
    assert code == 0
    assert "torch_compile" in [e["phase"] for e in verdict["timeline"]]
