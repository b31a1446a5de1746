"""`bringup run -- ollama serve` end to end, against a stand-in written from Ollama's formats
(tests/run/fake_ollama.py; real Ollama cannot be installed here).

Ollama's server starts without a model and loads one at the first request that names it, so
the smoke request must name the model (--model), it is what loads it, and ready means the
runner started and the model answered. The port comes from OLLAMA_HOST, as Ollama reads it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psutil
import pytest

from run.helpers import cli, events, free_port

FAKE = Path(__file__).with_name("fake_ollama.py")


@pytest.fixture
def ollama(tmp_path: Path) -> str:
    """An executable named `ollama` (the engine is recognised from the program's name)."""
    exe = tmp_path / "bin" / "ollama"
    exe.parent.mkdir()
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    exe.chmod(0o755)
    return str(exe)


def _left(port: int) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline", "environ"]):
        try:
            cmd = p.info["cmdline"] or []
            env = p.info["environ"] or {}
            if str(FAKE) in cmd and env.get("OLLAMA_HOST", "").endswith(f":{port}"):
                found.append(p)
        except psutil.Error:
            continue
    return found


def _run(ollama: str, port: int, *flags: str, **env: str) -> tuple[int, list[dict], str]:
    environ = {"OLLAMA_HOST": f"127.0.0.1:{port}", "FAKE_OLLAMA_LOAD_SECONDS": "0.4", **env}
    code, out, err = cli(["run", "--json", *flags, "--", ollama, "serve"], environ)
    return code, events(out), err


def test_the_smoke_request_loads_the_named_model_and_ready_is_its_answer(ollama: str) -> None:
    """`run --model tiny:1b -- ollama serve`: the server listens (no model yet), the smoke
    request names tiny:1b, the runner loads it, and ready comes with the model's answer; the
    timeline has the load after the listening, and nothing is left running."""
    port = free_port()
    code, evs, _ = _run(ollama, port, "--model", "tiny:1b", "--exit-when-ready")
    assert code == 0, evs[-1]
    ready = [e for e in evs if e["event"] == "ready"]
    assert len(ready) == 1
    assert ready[0]["model"] == "tiny:1b"
    summary = evs[-1]
    assert summary["outcome"] == "ready"
    phases = [t["phase"] for t in summary["timeline"]]
    assert phases.index("api_server_starting") < phases.index("weights_loading")
    assert phases.index("weights_loading") < phases.index("ready")
    assert "kv_cache_alloc" in phases
    smoke = [e for e in evs if e["event"] == "probe" and e.get("probe") == "smoke"]
    assert smoke
    assert smoke[-1]["ok"]
    assert not [e for e in evs if e["event"] == "probe" and e.get("probe") == "models"]
    assert _left(port) == []


def test_a_model_ollama_does_not_have_fails_at_once_with_the_pull(ollama: str) -> None:
    """A 404 to the smoke request (model not in the store) is a failure at once, not a stall:
    missing weights, and the remedy says `ollama pull NAME`."""
    port = free_port()
    code, evs, _ = _run(ollama, port, "--model", "absent:7b", "--stall", "60s")
    summary = evs[-1]
    assert code == 1
    assert summary["outcome"] == "failed"
    assert summary["failure"]["class"] == "missing_or_corrupt_weights"
    failure = next(e for e in evs if e["event"] == "failure")
    assert "absent:7b" in failure["summary"]
    assert any("ollama pull absent:7b" in r["text"] for r in summary["failure"]["remedy"])
    assert "not found, try pulling it first" in summary["failure"]["line"]
    assert _left(port) == []


def test_a_runner_that_cannot_load_is_a_failed_start_with_its_line(ollama: str) -> None:
    """The runner dies while the smoke request loads the model (CUDA0 buffer): failed, class
    cuda_oom from the runner's own line, in weights_loading, though the server lives on."""
    port = free_port()
    code, evs, _ = _run(ollama, port, "--model", "tiny:1b", "--grace", "2s", FAKE_OLLAMA_MODE="oom")
    summary = evs[-1]
    assert code == 1
    assert summary["outcome"] == "failed"
    assert summary["failure"]["class"] == "cuda_oom"
    assert (
        "CUDA0 buffer" in summary["failure"]["line"] or "cudaMalloc" in summary["failure"]["line"]
    )
    assert summary["failure"]["phase"] == "weights_loading"
    assert _left(port) == []


def test_no_model_named_is_one_usage_line_and_nothing_starts(ollama: str) -> None:
    """`run -- ollama serve` without --model: exit 2 with one line saying why and how, and no
    server is started."""
    port = free_port()
    code, _, err = cli(["run", "--", ollama, "serve"], {"OLLAMA_HOST": f"127.0.0.1:{port}"})
    assert code == 2
    assert "--model" in err
    assert "Traceback" not in err
    assert _left(port) == []


def test_ollama_host_gives_the_url(ollama: str) -> None:
    """The probes go where OLLAMA_HOST says, in any of its forms."""
    from bringup.core.endpoint import resolve_url, variable_value

    assert (
        resolve_url(None, ["ollama", "serve"], 11434, "0.0.0.0:11500") == "http://127.0.0.1:11500"
    )
    assert resolve_url(None, [], 11434, "http://10.0.0.2:9999/") == "http://10.0.0.2:9999"
    assert resolve_url(None, [], 11434, "example.org") == "http://example.org:11434"
    assert resolve_url(None, [], 11434, ":11600") == "http://127.0.0.1:11600"
    assert resolve_url(None, [], 11434, "[::1]:11700") == "http://[::1]:11700"
    assert resolve_url(None, [], 11434, None) == "http://127.0.0.1:11434"
    argv = ["env", "OLLAMA_HOST=127.0.0.1:1", "ollama", "serve"]
    assert variable_value("OLLAMA_HOST", argv, {"OLLAMA_HOST": "x:2"}) == "127.0.0.1:1"
    assert variable_value("OLLAMA_HOST", ["ollama", "serve"], {"OLLAMA_HOST": "x:2"}) == "x:2"
    assert os.path.basename(ollama) == "ollama"
