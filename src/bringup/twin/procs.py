"""Child processes of the twin: how they are started, named, and talk to their parent.

A child is ``python -m bringup.twin.<module> <title> <fd>``: its command line names its
role (``VLLM::EngineCore``, ``VLLM::Worker_TP1``), and it sets its ``comm`` to the same title
as vLLM's setproctitle does (truncated to 15 characters by the kernel:
``VLLM::EngineCor``, ``VLLM::Worker_TP``). Parent and child exchange JSON lines over a
socketpair; the child asks the kernel for SIGTERM when its parent dies, so nothing is
orphaned even if the parent is SIGKILLed.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import socket
import subprocess
import sys
from typing import Any

_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15


class Terminated(Exception):
    """Raised in the main thread when SIGTERM (or SIGINT) arrives."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(signal.Signals(signum).name)


def install_termination() -> None:
    """SIGTERM and SIGINT raise ``Terminated`` in the main thread."""
    signal.signal(signal.SIGTERM, _raise_terminated)
    signal.signal(signal.SIGINT, _raise_terminated)


def ignore_termination() -> None:
    """From here on (cleanup), further SIGTERM/SIGINT are ignored: cleanup is bounded."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _prctl(option: int, arg: int | bytes) -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(option, arg, 0, 0, 0)


def become_child(title: str, parent_pid: int) -> None:
    """Name this process and tie its life to its parent's."""
    _prctl(_PR_SET_NAME, title.encode()[:15])
    _prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))
    if os.getppid() != parent_pid:  # the parent died before we asked
        raise SystemExit(0)


def comm_name(title: str) -> str:
    """What ``/proc/PID/comm`` shows for ``title``."""
    return title[:15]


class Channel:
    """JSON lines over one end of a socketpair."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = b""

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            self.sock.sendall(json.dumps(message).encode() + b"\n")

    def _pop(self) -> dict[str, Any] | None:
        if b"\n" not in self._buffer:
            return None
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def recv(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next message, None on timeout; raises EOFError when the other side is gone."""
        message = self._pop()
        if message is not None:
            return message
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            return None
        try:
            data = self.sock.recv(65536)
        except OSError as exc:
            raise EOFError(str(exc)) from exc
        if not data:
            raise EOFError("peer closed")
        self._buffer += data
        return self._pop() if b"\n" in self._buffer else self.recv(0)

    def close(self) -> None:
        self.sock.close()


def spawn(module: str, title: str) -> tuple[subprocess.Popen[bytes], Channel]:
    """Start ``python -m bringup.twin.<module> <title> <fd> <parent pid>``."""
    parent_end, child_end = socket.socketpair()
    fd = child_end.fileno()
    proc = subprocess.Popen(
        [sys.executable, "-m", f"bringup.twin.{module}", title, str(fd), str(os.getpid())],
        pass_fds=(fd,),
        stdin=subprocess.DEVNULL,
    )
    child_end.close()
    return proc, Channel(parent_end)


def child_channel(fd_text: str) -> Channel:
    return Channel(socket.socket(fileno=int(fd_text)))


def stop(procs: list[subprocess.Popen[bytes]], grace_seconds: float = 5.0) -> None:
    """SIGTERM each still-running child, wait, then SIGKILL the stragglers."""
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=grace_seconds)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
