"""A real systemd 252 (PID 1 of its own namespaces) per test module, and units around the twin.

bringup reaches it only through its command runner: ``BRINGUP_COMMAND_PREFIX`` in the
environment the CLI is given (``SystemdNamespace.env``). Where systemd cannot boot here the
tests skip with one line; with ``BRINGUP_REQUIRE_REAL=1`` (CI) they fail instead.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import shutil
import socket
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bringup.cli.main import Context, main

from builders.sshd import SshServer, running_sshd, write_ssh_config
from builders.systemd_ns import BootError, SystemdNamespace, why_not

BRINGUP = str(Path(sys.executable).with_name("bringup"))
NS_EXEC = Path(__file__).resolve().parents[1] / "builders" / "ns_exec.py"


def _unavailable(reason: str) -> None:
    if os.environ.get("BRINGUP_REQUIRE_REAL") == "1":
        pytest.fail(f"real systemd is required (BRINGUP_REQUIRE_REAL=1) but cannot boot: {reason}")
    pytest.skip(f"real systemd cannot boot here: {reason}")


@pytest.fixture(scope="module")
def systemd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SystemdNamespace]:
    """One booted systemd for the module, stopped (and its cgroup removed) afterwards."""
    reason = why_not()
    if reason is not None:
        _unavailable(reason)
    base = tmp_path_factory.mktemp("systemd")
    try:
        sd = SystemdNamespace.start(base, name=f"bringup-test-{uuid.uuid4().hex[:6]}")
    except BootError as exc:
        _unavailable(str(exc))
    try:
        yield sd
    finally:
        sd.close()


@pytest.fixture(scope="module")
def host(
    systemd: SystemdNamespace, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[SshServer, Path]]:
    """A "remote host": an sshd whose ForceCommand runs every command of a session inside the
    systemd's namespaces (the ns_exec.py prefix the local tests give bringup), so bringup,
    run without BRINGUP_COMMAND_PREFIX, reaches that systemd (and its dockerd) through ssh
    only. Yields the server and its ssh_config; one per module."""
    base = tmp_path_factory.mktemp("remote")
    inner = shlex.join([sys.executable, str(NS_EXEC), str(systemd.pid), "/bin/sh", "-c"])
    force = f'ForceCommand exec {inner} "$SSH_ORIGINAL_COMMAND"\n'
    with running_sshd(base / "sshd", extra_config=force) as server:
        yield server, write_ssh_config(server, base / "config")


@dataclass
class Cli:
    """What one in-process ``bringup`` call left."""

    code: int
    out: str
    err: str

    def json(self) -> object:
        return json.loads(self.out)


def bringup(sd: SystemdNamespace, *args: str, environ: dict[str, str] | None = None) -> Cli:
    """``bringup ARGS`` in this process, its runner pointed at ``sd``."""
    out, err = io.StringIO(), io.StringIO()
    env = sd.env({"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "NO_COLOR": "1"})
    env.update(environ or {})
    code = main(list(args), Context(stdout=out, stderr=err, environ=env))
    return Cli(code, out.getvalue(), err.getvalue())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unique(stem: str) -> str:
    """A unit name no other test (or helper running tests at the same time) uses."""
    return f"{stem}-{uuid.uuid4().hex[:6]}"


def readings(folder: Path) -> Path:
    """Four idle 96 GB GPUs in a readings file (the twin writes its memory into it)."""
    from bringup.demo import write_readings

    path = folder / "gpus.json"
    write_readings(path)
    return path


def twin_command(port: int, gpus: Path, scenario: str = "ready", *extra: str) -> list[str]:
    """The engine twin as the server command of a unit (absolute paths: systemd needs them)."""
    return [
        BRINGUP,
        "twin",
        "vllm",
        "--scenario",
        scenario,
        "--port",
        str(port),
        "--host",
        "127.0.0.1",
        "--gpus-file",
        str(gpus),
        *extra,
    ]


def install_twin(
    sd: SystemdNamespace,
    name: str,
    command: list[str],
    gpus: Path,
    *unit_flags: str,
) -> Cli:
    """``bringup unit NAME --install`` around ``command``, into the namespaced systemd."""
    result = bringup(
        sd,
        "unit",
        name,
        "--install",
        "--json",
        "--gpus-from",
        str(gpus),
        "--bringup",
        BRINGUP,
        "--restart-sec",
        "1s",
        *unit_flags,
        "--",
        *command,
    )
    assert result.code == 0, result.err
    return result


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A folder the units may read (the namespaces share this file system)."""
    return tmp_path


def has_twin() -> bool:
    return shutil.which(BRINGUP) is not None or Path(BRINGUP).exists()
