"""File-based commands with --host run bringup itself on the remote host (a real sshd here)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from bringup.cli.remote import split_remote_flags

from builders.safetensors import write_checkpoint
from builders.sshd import (
    REMOTE_BRINGUP,
    REPO,
    SshServer,
    cli,
    running_sshd,
    ssh_env,
    write_ssh_config,
)

FAKE_SERVER = str(REPO / "tests" / "run" / "fake_server.py")


@pytest.fixture(scope="module")
def config(sshd: SshServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ssh_config that reaches the module's sshd with its throwaway keys."""
    return write_ssh_config(sshd, tmp_path_factory.mktemp("ssh") / "config")


def remote(sshd: SshServer) -> list[str]:
    return ["--host", sshd.target_text, "--remote-bringup", REMOTE_BRINGUP]


def test_remote_flags_only_before_the_double_dash() -> None:
    """--host and friends are taken out before `--` only; after it they belong to the server."""
    call = split_remote_flags(
        [
            "--quiet",
            "--host=ops@gpu1:2222",
            "--sudo",
            "--",
            "vllm",
            "serve",
            "m",
            "--host",
            "0.0.0.0",
        ]
    )
    assert call is not None
    assert (call.host, call.sudo, call.accept_new_host_key, call.remote_bringup) == (
        "ops@gpu1:2222",
        True,
        False,
        "bringup",
    )
    assert call.args == ("--quiet", "--", "vllm", "serve", "m", "--host", "0.0.0.0")
    assert split_remote_flags(["--", "vllm", "--host", "x"]) is None


def test_verify_over_ssh(sshd: SshServer, config: Path, tmp_path: Path) -> None:
    """verify --host checks a checkpoint on the remote host and returns its verdict and JSON."""
    folder = tmp_path / "model"
    write_checkpoint(folder, n_shards=2)
    code, out, err = cli(["verify", str(folder), "--json", *remote(sshd)], ssh_env(config))
    assert (code, err) == (0, "")
    assert json.loads(out)["ok"] is True
    shard = sorted(folder.glob("*.safetensors"))[0]
    with shard.open("r+b") as f:
        f.truncate(shard.stat().st_size - 100)
    code, out, _ = cli(["verify", str(folder), "--json", *remote(sshd)], ssh_env(config))
    assert code != 0
    assert json.loads(out)["ok"] is False


def test_guard_over_ssh(sshd: SshServer, config: Path, tmp_path: Path) -> None:
    """guard --host reads the remote GPUs (a readings file there) and reports busy ones."""
    readings = tmp_path / "gpus.json"
    gpu = {
        "index": 0,
        "name": "H100",
        "memory_total_bytes": 80 << 30,
        "memory_used_bytes": 70 << 30,
        "processes": [{"pid": 4242, "name": "python3", "used_memory_bytes": 69 << 30}],
    }
    readings.write_text(json.dumps({"gpus": [gpu]}))
    code, out, _ = cli(
        ["guard", "--gpus-from", str(readings), "--timeout", "0s", "--json", *remote(sshd)],
        ssh_env(config),
    )
    assert code == 5
    assert json.loads(out)["gpus"][0]["used_bytes"] == 70 << 30
    gpu["memory_used_bytes"], gpu["processes"] = 4 << 20, []
    readings.write_text(json.dumps({"gpus": [gpu]}))
    code, out, _ = cli(
        ["guard", "--gpus-from", str(readings), "--json", *remote(sshd)], ssh_env(config)
    )
    assert code == 0
    assert json.loads(out)["ok"] is True


def test_remote_bringup_missing_is_one_line(sshd: SshServer, config: Path) -> None:
    """A remote host without bringup is one line that says how to fix it."""
    code, out, err = cli(
        ["verify", "/x", "--host", sshd.target_text, "--remote-bringup", "/no/bringup"],
        ssh_env(config),
    )
    assert code == 127
    assert out == ""
    assert err.count("\n") == 1
    assert sshd.target_text in err
    assert "--remote-bringup" in err


def test_remote_command_failure_is_the_remote_error(sshd: SshServer, config: Path) -> None:
    """A remote bringup that fails returns its own one-line error and exit code."""
    code, _, err = cli(["diagnose", "/definitely/not/here.log", *remote(sshd)], ssh_env(config))
    assert code == 2
    assert err.startswith("bringup: error:")
    assert "/definitely/not/here.log" in err
    assert err.count("\n") == 1


@pytest.fixture
def lone_sshd(tmp_path: Path) -> Iterator[SshServer]:
    """A fresh sshd (own port, so no shared ControlMaster connection)."""
    with running_sshd(tmp_path / "lone") as server:
        yield server


def test_unknown_host_key_is_refused(lone_sshd: SshServer, tmp_path: Path) -> None:
    """An unknown host key: one line, exit 2, naming --accept-new-host-key; with it, trusted."""
    unknown = write_ssh_config(lone_sshd, tmp_path / "config", known=False)
    code, out, err = cli(["verify", "/x", *remote(lone_sshd)], ssh_env(unknown))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert "host key is not known" in err
    assert "--accept-new-host-key" in err
    code, _, err = cli(
        ["diagnose", "/no.log", "--accept-new-host-key", *remote(lone_sshd)], ssh_env(unknown)
    )
    assert code == 2
    assert "/no.log" in err  # the remote bringup answered: the key was accepted
    assert lone_sshd.empty_known_hosts.read_text().strip()


def _start_remote_run(sshd: SshServer, config: Path, port: int) -> subprocess.Popen[str]:
    argv = [
        sys.executable,
        "-m",
        "bringup",
        "run",
        "--quiet",
        *remote(sshd),
        "--",
        sys.executable,
        FAKE_SERVER,
        "--mode",
        "ready",
        "--port",
        str(port),
    ]
    env = {**ssh_env(config), "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if "READY" in line:
            return proc
    proc.kill()
    raise AssertionError(f"no READY from the remote run (exit {proc.wait()})")


def _servers(port: int) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if FAKE_SERVER in cmd and str(port) in cmd and "bringup" not in " ".join(cmd):
            found.append(p)
    return found


def _gone(port: int) -> bool:
    for _ in range(100):
        if not _servers(port):
            return True
        time.sleep(0.1)
    return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("how", ["sigterm", "hangup"])
def test_stopping_local_run_stops_remote_server(sshd: SshServer, config: Path, how: str) -> None:
    """SIGTERM to the local bringup, or a dropped connection, stops the server on the remote host."""
    port = _free_port()
    proc = _start_remote_run(sshd, config, port)
    try:
        assert len(_servers(port)) == 1
        if how == "sigterm":
            proc.terminate()
            assert proc.wait(timeout=60) == 0  # ready, then stopped cleanly
        else:
            for child in psutil.Process(proc.pid).children():
                child.kill()  # our ssh client: the remote terminal hangs up
            proc.wait(timeout=60)
        assert _gone(port)
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in _servers(port):
            p.kill()


def test_sighup_stops_a_local_run_like_sigterm() -> None:
    """A hangup (what a closed ssh terminal sends) stops bringup run's server; exit 0 after ready."""
    port = _free_port()
    argv = [
        sys.executable,
        "-m",
        "bringup",
        "run",
        "--quiet",
        "--",
        sys.executable,
        FAKE_SERVER,
        "--mode",
        "ready",
        "--port",
        str(port),
    ]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "PYTHONPATH": str(REPO / "src")},
    )
    try:
        assert proc.stdout is not None
        assert any("READY" in line for line in proc.stdout if "READY" in line or "FAILED" in line)
        proc.send_signal(signal.SIGHUP)
        assert proc.wait(timeout=60) == 0
        assert _gone(port)
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in _servers(port):
            p.kill()
