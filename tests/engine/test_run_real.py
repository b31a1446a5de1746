"""`bringup run` against the real llama.cpp server (llama-cpp-python) on CPU: ready and every failure."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from engine.real_engine import engine_processes, free_port, server_argv

pytestmark = pytest.mark.engine

RUN_TIMEOUT_SECONDS = 120


def bringup_run(
    *server: str, exit_when_ready: bool = True
) -> tuple[int, list[dict[str, Any]], str]:
    """Run the real CLI; return (exit code, JSON events, stderr)."""
    flags = ["--exit-when-ready"] if exit_when_ready else []
    argv = [
        sys.executable,
        "-m",
        "bringup",
        "run",
        "--engine",
        "llamacpp",
        "--json",
        "--quiet",
        "--grace",
        "5s",
        *flags,
        "--",
        *server,
    ]
    p = subprocess.run(
        argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, env=os.environ.copy()
    )
    return p.returncode, _events(p.stdout), p.stderr


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def _summary(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert events, "no JSON events on stdout"
    assert events[-1]["event"] == "summary", f"no summary line: {events[-3:]}"
    return events[-1]


def test_reaches_ready_with_a_real_smoke_answer(models: dict[str, Path], no_leftovers: str) -> None:
    """The real server on the tiny model reaches ready, and the 1-token smoke request succeeds."""
    code, events, err = bringup_run(*server_argv(models["tiny"], free_port(), "--n_ctx", "512"))
    summary = _summary(events)
    assert code == 0, err
    assert summary["outcome"] == "ready"
    assert summary["failure"] is None
    smoke = [e for e in events if e["event"] == "probe" and e.get("probe") == "smoke"]
    assert smoke
    assert smoke[-1]["ok"]
    assert smoke[-1]["status"] == 200
    assert smoke[-1]["model"] == str(models["tiny"])  # the id /v1/models gives: the --model path
    phases = [e["phase"] for e in summary["timeline"]]
    assert phases[-1] == "ready"
    assert "kv_cache_alloc" in phases


def _huge_context() -> int:
    """A context whose KV cache (256 bytes a cell for the tiny model) is 1.1 x this machine's RAM + swap.

    llama.cpp first fills its per-cell bookkeeping (about a fifth of that, for a few seconds),
    then asks for the KV buffer in one piece, which the kernel refuses at once. Bigger contexts
    are worse, not better: near the uint32 limit the bookkeeping itself churns for 30 s.
    """
    vm, swap = psutil.virtual_memory(), psutil.swap_memory()
    return min(4_000_000_000, int(1.1 * (vm.total + swap.total) / 256))


_OVERCOMMIT = Path("/proc/sys/vm/overcommit_memory")


FAILURES = {
    # case: (model key, extra server args, class, phase, a piece of the root-cause line)
    "model_missing": ("missing", (), "missing_or_corrupt_weights", "Model path does not exist: "),
    "gguf_truncated": (
        "truncated",
        (),
        "missing_or_corrupt_weights",
        "data is not within the file bounds",
    ),
    "gguf_truncated_header": (
        "truncated_header",
        (),
        "missing_or_corrupt_weights",
        "gguf_init_from_reader: failed to read key-value pairs",
    ),
    "gguf_corrupt_header": (
        "corrupt",
        (),
        "missing_or_corrupt_weights",
        "invalid magic characters: 'GGXF', expected 'GGUF'",
    ),
}


@pytest.mark.parametrize("case", sorted(FAILURES))
def test_broken_model_is_diagnosed_from_live_output(
    case: str, models: dict[str, Path], no_leftovers: str
) -> None:
    """A missing, truncated or corrupt GGUF fails with the right class and root-cause line, exit 1."""
    key, extra, failure_class, needle = FAILURES[case]
    model = models.get(key, models["tiny"].parent / "nonexistent.gguf")
    code, events, err = bringup_run(*server_argv(model, free_port(), *extra))
    summary = _summary(events)
    assert code == 1, err
    assert summary["outcome"] == "failed"
    assert summary["failure"]["class"] == failure_class
    assert needle in summary["failure"]["line"], summary["failure"]["line"]


@pytest.mark.skipif(
    _OVERCOMMIT.exists() and _OVERCOMMIT.read_text().strip() == "1",
    reason="vm.overcommit_memory=1 would grant the huge KV buffer and then touch it",
)
def test_context_too_large_for_memory(models: dict[str, Path], no_leftovers: str) -> None:
    """A context far too large for memory fails while allocating the cache: the context is the cause."""
    code, events, err = bringup_run(
        *server_argv(models["tiny"], free_port(), "--n_ctx", str(_huge_context()))
    )
    failure = _summary(events)["failure"]
    assert code == 1, err
    assert failure["class"] == "kv_cache_insufficient", failure
    assert failure["phase"] == "kv_cache_alloc"
    assert "insufficient memory" in failure["line"], failure["line"]


def test_port_in_use_by_a_real_second_server(
    models: dict[str, Path], start_server: Any, no_leftovers: str
) -> None:
    """With a real server on the port, a second one fails to bind: port_in_use, not ready."""
    port = free_port()
    first = start_server(server_argv(models["tiny"], port, "--n_ctx", "512"), "first")
    assert first.wait_for("Uvicorn running on"), first.text()[-2000:]
    code, events, err = bringup_run(*server_argv(models["tiny"], port, "--n_ctx", "512"))
    failure = _summary(events)["failure"]
    assert code == 1, err
    assert failure is not None
    assert failure["class"] == "port_in_use", failure
    assert "address already in use" in failure["line"]
    assert first.proc.poll() is None  # bringup never touches a server it did not start


def test_sigkill_after_ready_is_a_death_after_ready(
    models: dict[str, Path], no_leftovers: str
) -> None:
    """A server SIGKILLed after ready is reported as a failure after ready, and run exits 1."""
    argv = [
        sys.executable,
        "-m",
        "bringup",
        "run",
        "--engine",
        "llamacpp",
        "--json",
        "--quiet",
        "--",
        *server_argv(models["tiny"], free_port(), "--n_ctx", "512"),
    ]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as run:
        try:
            events = _read_until_ready(run)
            assert events[-1]["event"] == "ready"
            engines = [
                c
                for c in psutil.Process(run.pid).children(recursive=True)
                if "llama_cpp.server" in " ".join(c.cmdline())
            ]
            assert len(engines) == 1
            engines[0].send_signal(signal.SIGKILL)
            out, err = run.communicate(timeout=RUN_TIMEOUT_SECONDS)
        finally:
            if run.poll() is None:
                run.kill()
    summary = _summary(events + _events(out))
    assert run.returncode == 1, err
    assert summary["outcome"] == "failed"
    assert summary["failure"] is not None
    assert summary["time_to_ready_seconds"] is not None  # it was ready before it died
    assert not engine_processes(no_leftovers)


def _read_until_ready(run: subprocess.Popen[str]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    assert run.stdout is not None
    for line in run.stdout:
        if line.startswith("{"):
            events.append(json.loads(line))
            if events[-1]["event"] in ("ready", "summary"):
                break
    return events
