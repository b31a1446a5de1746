"""`bringup status` without systemd, `status --url URL` and `status --pid PID` for a server
no unit runs: a real `bringup run` of the engine twin, its output in a file (as in tmux with
`> run.log 2>&1`)."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bringup.adapters.commands import CommandResult, RecordedRunner
from bringup.cli.commands import status as status_cmd
from bringup.cli.main import Context, command_parser, main

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def status(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    environ = {"NO_COLOR": "1", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    code = main(["status", *args], Context(stdout=out, stderr=err, environ=environ))
    return code, out.getvalue(), err.getvalue()


class Started:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.proc, self.port, self.log = proc, port, log

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def run_in_background(tmp_path: Path) -> Iterator[Started]:
    """`bringup run -- bringup twin vllm ...` with its output in run.log; ended afterwards."""
    port = free_port()
    log = tmp_path / "run.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "NO_COLOR": "1"}
    twin = [sys.executable, "-m", "bringup", "twin", "vllm", "--host", "127.0.0.1", "--port",
            str(port), "--gpus-file", str(tmp_path / "gpus.json"), "--time-scale", "0.01"]  # fmt: skip
    argv = [sys.executable, "-m", "bringup", "run", "--gpus-from", str(tmp_path / "gpus.json"),
            "--", *twin]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # fmt: skip
    try:
        yield Started(proc, port, log)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _until_ready(*args: str, phase: str | None = None) -> tuple[int, dict[str, object]]:
    """Poll until ready (and, with ``phase``, until the log shows it: the API may answer
    before bringup run has written the engine's ready line to the file)."""
    deadline = time.monotonic() + 90
    while True:
        code, out, _ = status(*args, "--json")
        report = json.loads(out)
        done = code == 0 and (phase is None or report.get("phase") == phase)
        if done or time.monotonic() > deadline:
            return code, report
        time.sleep(0.3)


def test_status_url_looks_at_any_server(run_in_background: Started) -> None:
    """Health, the model list, one smoke request and /metrics, for a server no unit runs."""
    code, report = _until_ready("--url", run_in_background.url)
    assert code == 0, report
    assert report["verdict"] == "ready"
    assert report["models"]
    assert report["probe"]["probe"] == "smoke"  # type: ignore[index]
    metrics = report["metrics"]
    assert isinstance(metrics, dict)
    assert metrics["num_requests_running"] is not None
    code, out, _ = status("--url", run_in_background.url)
    assert code == 0
    assert out.startswith(f"{run_in_background.url}: READY: ")
    assert "  metrics: " in out


def test_status_pid_reads_the_process_and_its_log(run_in_background: Started) -> None:
    """--pid of bringup run (or of the server it started): alive, started by bringup, the
    phase from the log file its output goes to, and the API its command line names."""
    code, report = _until_ready("--pid", str(run_in_background.proc.pid), phase="ready")
    assert code == 0, report
    process = report["process"]
    assert isinstance(process, dict)
    assert process["started_by_bringup"] == run_in_background.proc.pid
    assert process["log"] == str(run_in_background.log)
    assert report["phase"] == "ready"
    assert report["engine"] == "vllm"
    assert report["url"] == run_in_background.url
    import psutil

    server = psutil.Process(run_in_background.proc.pid).children()[0].pid
    code, out, _ = status("--pid", str(server))
    assert code == 0
    assert f"started by bringup run (pid {run_in_background.proc.pid})" in out
    assert f"  log:     {run_in_background.log}" in out


def test_status_pid_of_no_process_and_nothing_listening() -> None:
    """A PID no process has: unknown (3); a URL nothing listens at: unknown (3); one line why."""
    code, out, _ = status("--pid", str(2**22 + 12345), "--json")
    assert (code, json.loads(out)["why"]) == (3, f"no process {2**22 + 12345} is running")
    url = f"http://127.0.0.1:{free_port()}"
    code, out, _ = status("--url", url)
    assert code == 3
    assert out.splitlines()[0] == f"{url}: UNKNOWN: nothing is listening at {url}"


def test_status_without_systemd_is_one_line() -> None:
    """systemctl saying PID 1 is not systemd: one line saying so, not the raw command and
    "Failed to connect to bus"; and a pointer to --url/--pid."""
    stderr = (
        "System has not been booted with systemd as init system (PID 1). Can't operate.\n"
        "Failed to connect to bus: Host is down\n"
    )
    runner = RecordedRunner(fallback=CommandResult((), 1, "", stderr))
    args = command_parser("status").parse_args(["vllm-x"])
    args.passthrough = []
    err = io.StringIO()
    with pytest.raises(Exception) as caught:
        status_cmd.run(args, Context(stdout=io.StringIO(), stderr=err, environ={}), runner=runner)
    message = str(caught.value)
    assert message.startswith(
        "no systemd to ask here: System has not been booted with systemd as init system (PID 1)."
    )
    assert "systemctl show" not in message
    assert "Failed to connect to bus" not in message
    assert "--url URL" in message


@pytest.mark.skipif(
    os.path.isdir("/run/systemd/system") or shutil.which("systemctl") is None,
    reason="needs a systemctl on a machine whose PID 1 is not systemd",
)
def test_status_without_systemd_here_is_one_line() -> None:
    """The same on this machine, where PID 1 is not systemd (a real systemctl)."""
    code, out, err = status("vllm-x")
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1
    assert err.startswith("bringup: error: no systemd to ask here: ")
