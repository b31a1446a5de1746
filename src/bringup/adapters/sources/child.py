"""``ChildSource``: a server started by bringup, in its own process group."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from bringup.adapters.process import ChildProcess
from bringup.adapters.sources.items import Emit, ExitItem, LinesItem


class ChildSource:
    """A server started by bringup, in its own process group."""

    starts_server = True

    def __init__(self, argv: Sequence[str], environ: Mapping[str, str]) -> None:
        self.argv = list(argv)
        self.environ = environ
        self.child: ChildProcess | None = None
        self.description = "server"

    def start(self, emit: Emit) -> None:
        self.child = ChildProcess.start(
            self.argv, environ=self.environ, on_lines=lambda s, ts: emit(LinesItem(s, ts))
        )
        self.description = f"pid {self.child.pid}"
        threading.Thread(
            target=self._wait, args=(self.child, emit), daemon=True, name="wait-child"
        ).start()

    @staticmethod
    def _wait(child: ChildProcess, emit: Emit) -> None:
        code = child.join()
        child.wait_output(2.0)  # deliver every line before the exit
        emit(ExitItem(code))

    def stop(self, grace_seconds: float) -> None:
        if self.child is not None:
            self.child.terminate(grace_seconds)

    def detach(self, log_path: str) -> None:
        """Leave the server running, its output going to ``log_path``."""
        if self.child is not None:
            self.child.detach(log_path)

    def command(self) -> list[str] | None:
        return self.argv
