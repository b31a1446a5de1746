"""`bringup run` end to end: real child processes, real sockets, the scripted fake server."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from run.helpers import cli, events, fake, free_port, processes_running


def test_ready_exit_when_ready_stops_the_server():
    """Ready after the smoke answer: exit 0, summary ready with a timeline, no process left."""
    port = free_port()
    code, out, _ = cli(["run", "--json", "--exit-when-ready", "--", *fake("ready", port)])
    evs = events(out)
    assert code == 0
    assert [e["event"] for e in evs if e["event"] == "ready"] == ["ready"]
    summary = evs[-1]
    assert summary["event"] == "summary"
    assert summary["outcome"] == "ready"
    assert summary["failure"] is None
    assert summary["time_to_ready_seconds"] > 0
    assert [t["phase"] for t in summary["timeline"]][-1] == "ready"
    assert "weights_loading" in [t["phase"] for t in summary["timeline"]]
    assert processes_running(port) == []


def test_root_cause_fails_while_the_process_lives():
    """The root-cause line ends the startup although the process is alive; it is then stopped."""
    port = free_port()
    code, out, err = cli(
        ["run", "--json", "--grace", "2s", "--", *fake("oom", port, "--linger", "60")]
    )
    summary = events(out)[-1]
    assert code == 1
    assert summary["outcome"] == "failed"
    assert summary["failure"]["class"] == "cuda_oom"
    assert "CUDA out of memory" in summary["failure"]["line"]
    assert summary["failure"]["remedy"]
    assert "SIGTERM" in err
    assert processes_running(port) == []


def test_exit_zero_after_engine_death_is_failure():
    """A server that exits 0 after its engine died is a failure (exit 1)."""
    port = free_port()
    code, out, _ = cli(["run", "--json", "--", *fake("exit0", port)])
    summary = events(out)[-1]
    assert code == 1
    assert summary["outcome"] == "failed"
    assert summary["failure"]["class"] == "engine_core_died"


def test_server_exit_status_is_its_own_apart_from_bringups_signal():
    """A failing server that exits by itself reports its own status; one bringup had to stop
    reports the signal, and what bringup sent is a field of its own."""
    port = free_port()
    _, out, err = cli(
        [
            "run",
            "--json",
            "--grace",
            "10s",
            "--",
            *fake("oom", port, "--linger", "1", "--exit-code", "3"),
        ]
    )
    summary = events(out)[-1]
    assert summary["outcome"] == "failed"
    assert (summary["server_exit_status"], summary["server_exit_signal"]) == (3, None)
    assert summary["stopped_by_bringup"] is None
    assert "server exit status 3" in err
    port = free_port()
    _, out, err = cli(
        ["run", "--json", "--grace", "1s", "--", *fake("oom", port, "--linger", "60")]
    )
    summary = events(out)[-1]
    assert (summary["server_exit_status"], summary["server_exit_signal"]) == (None, "SIGTERM")
    assert summary["stopped_by_bringup"] == {"signals": ["SIGTERM"], "grace_seconds": 1.0}
    assert "bringup stopped the server (SIGTERM); server ended by SIGTERM" in err
    assert processes_running(port) == []


def test_stall_is_timeouts_with_last_phase():
    """No progress for --stall: outcome stalled, class timeouts, the last phase, exit 4."""
    port = free_port()
    code, out, _ = cli(
        # 3 s: the fake engine's own start (Python's) must reach its last phase first, also
        # when the machine is loaded (at 1 s it sometimes stalled in phase start)
        ["run", "--json", "--stall", "3s", "--grace", "2s", "--", *fake("hang", port)]
    )
    summary = events(out)[-1]
    assert code == 4
    assert summary["outcome"] == "stalled"
    assert summary["failure"]["class"] == "timeouts"
    assert summary["phase"] == "distributed_init"
    assert processes_running(port) == []


def test_slow_load_with_progress_is_not_cut_off():
    """Shards keep coming slower than nothing-at-all would allow in total, yet within --stall each."""
    port = free_port()
    args = [
        "run",
        "--json",
        "--stall",
        "3s",  # each shard well within it, under load too; all five (5 s) beyond it
        "--exit-when-ready",
        "--",
        *fake("slow", port, "--shards", "5", "--step", "1.0"),
    ]
    code, out, _ = cli(args)
    evs = events(out)
    assert code == 0
    assert evs[-1]["outcome"] == "ready"
    assert len([e for e in evs if e["event"] == "progress"]) == 5


def test_deadline_bounds_the_startup():
    """--deadline ends a startup that has not reached ready: stalled, exit 4."""
    port = free_port()
    code, out, _ = cli(
        [
            "run",
            "--json",
            "--stall",
            "0",
            "--deadline",
            "1s",
            "--grace",
            "2s",
            "--",
            *fake("hang", port),
        ]
    )
    summary = events(out)[-1]
    assert code == 4
    assert summary["outcome"] == "stalled"
    assert "deadline" in " ".join(
        e.get("summary", "") for e in events(out) if e["event"] == "failure"
    )


def test_missing_command_is_usage_error_on_one_line():
    """A command that does not exist: exit 2 and one line naming it."""
    code, out, err = cli(["run", "--", "no-such-server-binary-xyz", "--port", "1"])
    assert code == 2
    assert out == ""
    assert err.strip().count("\n") == 0
    assert "no-such-server-binary-xyz" in err


def test_no_command_is_usage_error():
    """`bringup run` without a command after `--` is a usage error."""
    code, _, err = cli(["run", "--json"])
    assert code == 2
    assert "no server command" in err


def test_death_after_ready_is_reported_and_fails():
    """Supervising after ready: a later engine death is reported and exits non-zero."""
    port = free_port()
    code, out, _ = cli(["run", "--json", "--", *fake("die_after_ready", port, "--linger", "1")])
    evs = events(out)
    kinds = [e["event"] for e in evs]
    assert code == 1
    assert kinds.index("ready") < kinds.index("failure")
    assert evs[-1]["outcome"] == "failed"
    assert evs[-1]["time_to_ready_seconds"] is not None


def test_grandchildren_are_stopped_too(tmp_path: Path):
    """Processes the server started are stopped with it: nothing is left behind."""
    port = free_port()
    pidfile = tmp_path / "grandchild.pid"
    code, _, _ = cli(
        [
            "run",
            "--json",
            "--exit-when-ready",
            "--",
            *fake("spawn", port, "--pidfile", str(pidfile)),
        ]
    )
    assert code == 0
    grandchild = int(pidfile.read_text())
    assert (
        not psutil.pid_exists(grandchild)
        or psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE
    )


def test_keep_leaves_a_failed_server_running(tmp_path: Path):
    """--keep: on failure the server is left running, its output drained to a log file."""
    port = free_port()
    code, out, _ = cli(["run", "--keep", "--quiet", "--", *fake("oom", port, "--linger", "30")])
    try:
        assert code == 1
        assert "left running" in out
        log = Path(out.split("its output goes to ", 1)[1].split()[0])
        assert log.exists()
        assert len(processes_running(port)) == 1
    finally:
        for p in processes_running(port):
            p.kill()


def test_foreign_server_on_the_port_is_not_ours():
    """Another process already answering on the port never makes our server ready."""
    port = free_port()
    other = subprocess.Popen(
        fake("ready", port, "--shards", "0"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        _wait_listening(port)
        code, out, _ = cli(
            ["run", "--json", "--stall", "1.5s", "--grace", "2s", "--", *fake("hang", port)]
        )
        assert code == 4
        assert "ready" not in [e["event"] for e in events(out)]
    finally:
        other.kill()
        other.wait()


def test_sigterm_after_ready_stops_cleanly():
    """SIGTERM to bringup after ready stops the server cleanly and exits 0."""
    port = free_port()
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": "src"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "bringup", "run", "--quiet", "--", *fake("ready", port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "READY" in line:
                break
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert processes_running(port) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()


class NotifyListener:
    """A real AF_UNIX datagram socket read in a thread, as systemd reads NOTIFY_SOCKET."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.05)
        self.messages: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                self.messages.append(self.sock.recv(4096).decode())

    def close(self) -> list[str]:
        time.sleep(0.1)
        self._stop.set()
        self._thread.join()
        self.sock.close()
        return self.messages


def test_notify_sends_ready_only_after_smoke(tmp_path: Path):
    """--notify: STATUS with phase and progress, EXTEND_TIMEOUT_USEC while loading, READY=1 at ready."""
    path = str(tmp_path / "notify.sock")
    listener = NotifyListener(path)
    try:
        port = free_port()
        code, _, _ = cli(
            [
                "run",
                "--json",
                "--notify",
                "--exit-when-ready",
                "--",
                *fake("ready", port, "--step", "0.2"),
            ],
            {"NOTIFY_SOCKET": path},
        )
    finally:
        messages = listener.close()
    assert code == 0
    statuses = [m for m in messages if m.startswith("STATUS=")]
    assert any("loading weights" in m for m in statuses)
    assert any(m.startswith("EXTEND_TIMEOUT_USEC=") for m in messages)
    ready = [m for m in messages if "READY=1" in m]
    assert len(ready) == 1
    assert messages.index(ready[0]) > max(
        i for i, m in enumerate(messages) if "loading weights" in m
    )


def test_notify_never_ready_on_failure(tmp_path: Path):
    """--notify on a failing start: no READY=1, a failed STATUS, exit 1."""
    path = str(tmp_path / "notify.sock")
    listener = NotifyListener(path)
    try:
        code, _, _ = cli(
            ["run", "--notify", "--quiet", "--grace", "2s", "--", *fake("oom", free_port())],
            {"NOTIFY_SOCKET": path},
        )
    finally:
        messages = listener.close()
    assert code == 1
    assert not any("READY=1" in m for m in messages)
    assert any(m.startswith("STATUS=failed: cuda_oom") for m in messages)


def _wait_listening(port: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", port), timeout=0.5),
        ):
            return
        time.sleep(0.05)
    pytest.fail("the foreign server never listened")


def test_a_closed_output_pipe_does_not_leave_the_server_unsupervised():
    """`bringup run | head -1`: output stops, supervision does not: the failure still stops the server."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "bringup",
        "run",
        "--grace",
        "2s",
        "--",
        *fake("oom", port, "--linger", "60"),
    ]
    reader = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert reader.stdout is not None
    reader.stdout.readline()
    reader.stdout.close()  # like `head -1` exiting
    assert reader.wait(timeout=90) == 1
    assert processes_running(port) == []


def test_a_stopped_server_stalls_and_the_stall_names_the_stopped_process():
    """A server frozen with SIGSTOP makes no progress: stalled, and the message names it."""
    port = free_port()
    argv = [sys.executable, "-m", "bringup", "run", "--json", "--stall", "2s", "--grace", "2s"]
    with subprocess.Popen(
        [*argv, "--", *fake("hang", port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as run:
        server = None
        deadline = time.monotonic() + 30
        while server is None and time.monotonic() < deadline:
            kids = psutil.Process(run.pid).children()
            server = kids[0] if kids else None
            time.sleep(0.05)
        assert server is not None
        time.sleep(0.5)
        server.send_signal(signal.SIGSTOP)
        out, _ = run.communicate(timeout=60)
    summary = events(out)[-1]
    assert run.returncode == 4
    assert summary["outcome"] == "stalled"
    assert summary["failure"]["class"] == "timeouts"
    stall = [e for e in events(out) if e["event"] == "failure"][-1]
    assert f"process {server.pid} (" in stall["summary"]
    assert "is stopped" in stall["summary"]
    assert f"kill -CONT {server.pid}" in stall["remedy"][0]["text"]
    assert processes_running(port) == []
