"""`bringup run --retry` end to end: the engine twin's sampler warmup OOM is remedied and ends ready."""

from __future__ import annotations

import io
import json
import os
import socket
import sys

from bringup.cli.main import Context, main


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "NO_COLOR": "1",
        "HOME": os.environ.get("HOME", "/tmp"),
    }
    code = main(args, Context(stdout=out, stderr=err, stdin=io.StringIO(), environ=env))
    return code, out.getvalue(), err.getvalue()


def test_oom_warmup_is_remedied_and_ends_ready(tmp_path):
    """The first attempt dies in the sampler warmup; --max-num-seqs is lowered; the second is ready (exit 0)."""
    port = free_port()
    twin = [
        sys.executable,
        "-m",
        "bringup",
        "twin",
        "vllm",
        "--scenario",
        "oom_warmup",
        "--port",
        str(port),
        "--time-scale",
        "0.02",
    ]
    code, out, err = cli(
        [
            "run",
            "--retry",
            "2",
            "--json",
            "--exit-when-ready",
            "--quiet",
            "--gpus-from",
            str(tmp_path / "none.json"),
            "--",
            *twin,
        ]
    )
    lines = [json.loads(line) for line in out.splitlines()]
    assert all(e.pop("schema_version") == 1 for e in lines)  # every JSON line carries it
    retries = [e for e in lines if e["event"] == "retry"]
    assert code == 0, err[-2000:]
    assert retries == [
        {
            "event": "retry",
            "attempt": 2,
            "change": {
                "flag": "--max-num-seqs",
                "value": "256",
                "reason": retries[0]["change"]["reason"],
            },
        }
    ]
    assert "sampler warmup" in retries[0]["change"]["reason"]
    summary = lines[-1]
    assert summary["event"] == "summary"
    assert summary["outcome"] == "ready"
    assert [s["event"] for s in lines].count("summary") == 1
    first, second = summary["attempts"]
    assert (first["outcome"], first["class"], first["phase"]) == ("failed", "cuda_oom", "warmup")
    assert first["change"]["flag"] == "--max-num-seqs"
    assert second["change"] is None
    assert second["argv"][-2:] == ["--max-num-seqs", "256"]
    assert second["outcome"] == "ready"
    assert "retry 1/2: attempt 2 with --max-num-seqs 256" in err


def test_config_error_is_never_retried():
    """A config_error ends the run at once: one attempt, exit 1, and the reason it was not retried."""
    script = "import sys; print('vllm serve: error: unrecognized arguments: --bogus', flush=True); sys.exit(2)"
    code, out, err = cli(
        ["run", "--retry", "3", "--json", "--engine", "vllm", "--", sys.executable, "-c", script]
    )
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 1
    assert not [e for e in lines if e["event"] == "retry"]
    (only,) = lines[-1]["attempts"]
    assert (
        only["class"] == "config_error" and "not retried" in only["not_retried"]
    ) or "config_error is not retried" in only["not_retried"]
    assert "not retried: config_error is not retried" in err
