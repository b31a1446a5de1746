"""Hostile files for tests: FIFOs, sockets, loops, unreadable paths, and a way to run
bringup without root's power to read them.

Tests run as root here, and root reads a ``chmod 000`` file. :func:`run_unprivileged`
runs ``bringup ARGS`` in a child without the capabilities that let root ignore file
permissions (``setpriv`` drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH), so mode bits
apply to it as to any user; as a normal user it just runs the command.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

_DROP = "-dac_override,-dac_read_search"


@dataclass
class Run:
    """Exit code and output of one bringup child process."""

    code: int
    out: str
    err: str


def run_unprivileged(*args: object, timeout: float = 60) -> Run:
    """``bringup ARGS`` in a child that cannot bypass file permissions (skips if it cannot be had)."""
    cmd = [sys.executable, "-m", "bringup", *map(str, args)]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("setpriv (util-linux) is needed to drop root's file capabilities")
        cmd = [setpriv, f"--inh-caps={_DROP}", f"--bounding-set={_DROP}", "--", *cmd]
    env = {k: v for k, v in os.environ.items() if k != "BRINGUP_DEBUG"} | {"NO_COLOR": "1"}
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


@contextlib.contextmanager
def unreadable(path: Path) -> Iterator[Path]:
    """``path`` with mode 000 for the test's duration; its mode is restored after."""
    mode = path.stat().st_mode & 0o7777
    path.chmod(0)
    try:
        yield path
    finally:
        path.chmod(mode)


def fifo(path: Path) -> Path:
    """A named pipe at ``path`` (nobody writes to it: opening it for reading would wait)."""
    os.mkfifo(path)
    return path


@contextlib.contextmanager
def unix_socket(path: Path) -> Iterator[Path]:
    """A listening Unix socket at ``path``; closed and removed after."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        yield path
    finally:
        sock.close()
        path.unlink(missing_ok=True)


def symlink_loop(path: Path) -> Path:
    """``path`` -> ``path.loop`` -> ``path``."""
    other = path.with_name(path.name + ".loop")
    path.symlink_to(other.name)
    other.symlink_to(path.name)
    return path


def dangling(path: Path) -> Path:
    """A symlink at ``path`` to a file that is not there."""
    path.symlink_to(path.with_name(path.name + ".gone"))
    return path
