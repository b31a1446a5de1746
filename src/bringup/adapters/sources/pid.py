"""``PidSource``: a running process bringup did not start, followed by its liveness only."""

from __future__ import annotations

import threading

import psutil

from bringup.adapters.sources.items import Emit, ExitItem, Stoppable
from bringup.errors import InputError


class PidSource(Stoppable):
    """A running process bringup did not start: only whether it is alive (never signalled)."""

    def __init__(self, pid: int, *, poll_seconds: float = 0.5) -> None:
        super().__init__()
        self.pid = pid
        self.poll_seconds = poll_seconds
        self.description = f"pid {pid}"
        self._process: psutil.Process | None = None

    def start(self, emit: Emit) -> None:
        try:
            self._process = psutil.Process(self.pid)
        except psutil.NoSuchProcess as exc:
            raise InputError(
                f"no process with pid {self.pid}", hint="check the pid with `ps -p PID`"
            ) from exc
        threading.Thread(target=self._watch, args=(emit,), daemon=True, name="watch-pid").start()

    def command(self) -> list[str] | None:
        try:
            return list(self._process.cmdline()) if self._process else None
        except psutil.Error:
            return None

    def _watch(self, emit: Emit) -> None:
        assert self._process is not None
        while not self._stopped.wait(self.poll_seconds):
            if not _running(self._process):
                emit(ExitItem(None, f"process {self.pid} is gone"))
                return


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
