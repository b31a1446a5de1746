"""`bringup diagnose` on the recordings of real vLLM 0.32 (CPU build) runs, without vLLM.

tests/fixtures/logs/vllm_cpu_real/ holds the output of real runs made by tests/vllm_real
(``BRINGUP_RECORD=1``) with, next to each log, the verdict `bringup run` gave live. Offline
reading must give that verdict: the outcome, class, phase and root-cause line, remedies for
the CPU build (its environment variables, never GPU advice).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bringup.core.analyzer import diagnose_bytes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "vllm_cpu_real"
_ALL = {p.stem: json.loads(p.read_text()) for p in sorted(FIXTURES.glob("*.json"))}
CASES: dict[str, dict[str, Any]] = {k: v for k, v in _ALL.items() if "log" in v}  # not http_*.json
GPU_WORDS = ("GPU", "nvidia-smi", "CUDA")


def test_every_recording_has_its_verdict() -> None:
    assert CASES, "no recordings"
    assert {p.stem for p in FIXTURES.glob("*.log")} == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_offline_verdict_is_the_live_one(name: str) -> None:
    want = CASES[name]
    got = diagnose_bytes((FIXTURES / want["log"]).read_bytes())
    assert got.engine == "vllm"
    failure = got.failure
    if want["phase"] == "ready":  # served, then died: offline a ready startup, then a failure
        assert got.outcome.value == "ready"
        failure = got.after_ready
    else:
        assert got.outcome.value == want["outcome"]
    if want["class"] is None:
        assert failure is None, failure
        return
    assert failure is not None
    assert (failure.failure_class.value, failure.phase.value) == (want["class"], want["phase"])
    assert failure.line == want["root_cause_line"]
    envs = {r.env.split("=")[0] for r in failure.remedy if r.env}
    flags = {r.flag for r in failure.remedy if r.flag}
    assert set(want["remedy_env"]) <= envs, failure.remedy
    assert set(want["remedy_flags"]) <= flags, failure.remedy
    for remedy in failure.remedy:
        assert not any(word in remedy.text for word in GPU_WORDS), remedy
