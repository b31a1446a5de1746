"""A real OpenSSH server on 127.0.0.1 for tests, with throwaway host and client keys."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from bringup.adapters.ssh import SshTarget
from bringup.cli.main import Context, main

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if Path("/usr/sbin/sshd").exists() else None)


@dataclass
class SshServer:
    """A running sshd and what a client needs to reach it."""

    port: int
    process: subprocess.Popen[bytes]
    client_key: Path
    known_hosts: Path  # contains this server's key
    empty_known_hosts: Path  # knows nothing: for refused-host-key tests
    user: str

    @property
    def target_text(self) -> str:
        return f"{self.user}@127.0.0.1:{self.port}"

    def session_pids(self) -> list[int]:
        """PIDs of the per-connection sshd children (kill one to drop a connection)."""
        out = subprocess.run(["pgrep", "-P", str(self.process.pid)], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def require_sshd() -> str:
    """sshd's path; without sshd the test skips with one line (fails under BRINGUP_REQUIRE_REAL=1)."""
    if SSHD is not None:
        return SSHD
    message = "sshd is not installed (Debian: apt-get install openssh-server)"
    if os.environ.get("BRINGUP_REQUIRE_REAL") == "1":
        pytest.fail(f"BRINGUP_REQUIRE_REAL=1 but {message}", pytrace=False)
    pytest.skip(message)


@contextmanager
def running_sshd(
    workdir: Path, *, extra_path: Path | None = None, extra_config: str = ""
) -> Iterator[SshServer]:
    """Start sshd in the foreground (-D) on a free port; stop it afterwards.

    ``extra_path``: a folder put first on the sessions' PATH (fake ``journalctl``, say).
    ``extra_config``: more sshd_config lines (a ``ForceCommand``, say).
    """
    sshd = require_sshd()
    workdir.mkdir(parents=True, exist_ok=True)
    os.chmod(workdir, 0o700)
    host_key = workdir / "host_ed25519"
    client_key = workdir / "client_ed25519"
    for key in (host_key, client_key):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    authorized = workdir / "authorized_keys"
    authorized.write_text(client_key.with_suffix(".pub").read_text())
    os.chmod(authorized, 0o600)
    port = _free_port()
    config = workdir / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\n"
        f"AuthorizedKeysFile {authorized}\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nStrictModes no\n"
        f"PidFile {workdir / 'sshd.pid'}\nPermitRootLogin yes\nUsePAM no\n"
        "MaxSessions 50\nMaxStartups 50\nLogLevel ERROR\n"
        f"SetEnv PATH={_session_path(extra_path)}\n{extra_config}"
    )
    Path("/run/sshd").mkdir(exist_ok=True)
    proc = subprocess.Popen([sshd, "-D", "-e", "-f", str(config)], stderr=subprocess.DEVNULL)
    known = workdir / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {host_key.with_suffix('.pub').read_text()}")
    empty = workdir / "known_hosts_empty"
    empty.write_text("")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.05)
    user = (
        os.environ.get("USER")
        or subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
    )
    try:
        yield SshServer(port, proc, client_key, known, empty, user)
    finally:
        sessions = SshServer(port, proc, client_key, known, empty, user).session_pids()
        proc.terminate()
        for pid in sessions:  # the per-connection children (ControlPersist masters talk to them)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()


def target_for(server: SshServer, *, known: bool = True) -> SshTarget:
    """An SshTarget that reaches the test server with its throwaway keys."""
    return SshTarget(
        host="127.0.0.1",
        port=server.port,
        user=server.user,
        identity_file=str(server.client_key),
        known_hosts_file=str(server.known_hosts if known else server.empty_known_hosts),
        config_file="/dev/null",
    )


def _session_path(extra_path: Path | None) -> str:
    path = os.environ.get("PATH", "/usr/bin:/bin")
    return f"{extra_path}:{path}" if extra_path else path


def write_ssh_config(server: SshServer, path: Path, *, known: bool = True) -> Path:
    """An ssh_config (for ``BRINGUP_SSH_CONFIG``) that reaches ``server`` with its throwaway keys."""
    known_hosts = server.known_hosts if known else server.empty_known_hosts
    path.write_text(
        "Host *\n"
        f"  IdentityFile {server.client_key}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {known_hosts}\n  GlobalKnownHostsFile /dev/null\n"
    )
    return path


# -- bringup's CLI against the test server ---------------------------------------------------

REPO = Path(__file__).resolve().parents[2]
REMOTE_BRINGUP = str(REPO / ".venv" / "bin" / "bringup")  # the "remote" bringup: this repo's


def ssh_env(config: Path, **extra: str) -> dict[str, str]:
    """An environment whose bringup reaches the test sshd (BRINGUP_SSH_CONFIG)."""
    return {
        "PATH": os.environ.get("PATH", ""),
        "NO_COLOR": "1",
        "BRINGUP_SSH_CONFIG": str(config),
        **extra,
    }


def cli(args: list[str], environ: dict[str, str]) -> tuple[int, str, str]:
    """Run ``bringup ARGS`` in this process; return (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = main(args, Context(stdout=out, stderr=err, stdin=io.StringIO(), environ=environ))
    return code, out.getvalue(), err.getvalue()
