"""One look at a server process by PID, for ``bringup status --pid``: what it runs, whether
``bringup run`` started it, and the file its output goes to (its log), if any.

A server started by ``bringup run`` is its child; ``bringup run`` writes the server's lines
to its own stdout. When that (or the server's own stdout/stderr) is a regular file
(``bringup run ... > run.log 2>&1``), that file is the log; a terminal or a pipe is not a
file anyone can read back, and is named as such.

Command line equivalent: ``ps -o pid,ppid,args -p PID`` and ``ls -l /proc/PID/fd/1``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TypeVar

import psutil

T = TypeVar("T")
MAX_LOG_BYTES = 4 * 1024 * 1024  # the tail of the log read for the phase and the failure


@dataclass(frozen=True, slots=True)
class ProcessLook:
    """What /proc says of the process and of the ``bringup run`` around it."""

    pid: int
    alive: bool
    status: str  # psutil's: running, sleeping, zombie...
    server_argv: tuple[str, ...]  # the server's command line ("" when not known)
    bringup_pid: int | None  # the `bringup run` that started it (or PID itself is that)
    log_path: str | None  # a regular file its output goes to
    output_to: str | None  # where the output goes when it is no file (a terminal, a pipe)


def is_bringup_run(argv: Sequence[str]) -> bool:
    """``bringup run ...`` or ``python -m bringup run ...``."""
    words = [PurePosixPath(w).name for w in argv[:4]]
    if words[:1] == ["bringup"]:
        return words[1:2] == ["run"]
    return len(words) >= 4 and words[1:3] == ["-m", "bringup"] and words[3] == "run"


def look(pid: int) -> ProcessLook | None:
    """The look; None when there is no such process."""
    try:
        proc = psutil.Process(pid)
        argv = proc.cmdline()
        status = proc.status()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except psutil.AccessDenied:
        return ProcessLook(pid, True, "unknown", (), None, None, "not readable by this user")
    runner, server = _pair(proc, argv)
    log_path, output_to = _output(server, runner)
    server_argv = _argv(server) if server is not None else ()
    if runner is not None:
        server_argv = server_argv or _after_dashes(_argv(runner))
    alive = status != psutil.STATUS_ZOMBIE
    return ProcessLook(
        pid, alive, status, server_argv, runner.pid if runner else None, log_path, output_to
    )


def _pair(
    proc: psutil.Process, argv: list[str]
) -> tuple[psutil.Process | None, psutil.Process | None]:
    """(the `bringup run` process, the server process)."""
    if is_bringup_run(argv):
        children = _safe(proc.children) or []
        return proc, children[0] if children else None
    for parent in _safe(proc.parents) or []:
        if is_bringup_run(_argv(parent)):
            return parent, proc
    return None, proc


def _output(
    server: psutil.Process | None, runner: psutil.Process | None
) -> tuple[str | None, str | None]:
    """A regular file the output goes to (the runner's stdout first), else where it goes."""
    where = None
    for proc in (runner, server):
        if proc is None:
            continue
        for fd in (1, 2):
            try:
                target = os.readlink(f"/proc/{proc.pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("/") and os.path.isfile(target):
                return target, None
            where = where or target
    return None, where


def read_tail(path: str) -> str:
    """The last MAX_LOG_BYTES of ``path``, decoded (from a line start)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        f.seek(max(0, size - MAX_LOG_BYTES))
        data = f.read(MAX_LOG_BYTES)
    if size > MAX_LOG_BYTES and b"\n" in data:
        data = data.split(b"\n", 1)[1]
    return data.decode("utf-8", errors="replace")


def _argv(proc: psutil.Process) -> tuple[str, ...]:
    return tuple(_safe(proc.cmdline) or ())


def _after_dashes(argv: tuple[str, ...]) -> tuple[str, ...]:
    return argv[argv.index("--") + 1 :] if "--" in argv else ()


def _safe(call: Callable[[], T]) -> T | None:
    try:
        return call()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
