"""A long-lived reader command (``journalctl -f``, ``docker logs -f``, ``tail -F`` over ssh),
restarted with a backoff when it ends: the part the unit, container and remote-file sources share."""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Callable, Mapping

from bringup.adapters.sources.items import Stoppable
from bringup.errors import AdapterError

RECONNECT_ATTEMPTS = 6  # reader restarts in a row without a new line before giving up


def reconnect_delay_seconds(attempt: int) -> float:
    """Backoff before reconnect ``attempt`` (1, 2, ...): 0.5 s doubling, at most 10 s."""
    return float(min(0.5 * 2 ** max(attempt - 1, 0), 10.0))


class ReaderCommand(Stoppable):
    """Runs a long-lived reader command and restarts it.

    ``wrap`` turns the reader's argv into the one to run here (``ssh HOST -- ...`` for a
    remote host: a runner with ``streaming_argv``, such as ``SshRunner``, provides it).
    """

    def __init__(
        self, environ: Mapping[str, str], wrap: Callable[[list[str]], list[str]] | None = None
    ) -> None:
        super().__init__()
        self.environ = dict(environ)
        self.wrap = wrap
        self._popen: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def _spawn(self, argv: list[str]) -> subprocess.Popen[bytes]:
        argv = self.wrap(argv) if self.wrap is not None else argv
        try:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.environ,
            )
        except OSError as exc:
            raise AdapterError(
                f"cannot run `{argv[0]}`: {exc.strerror or exc}",
                hint=f"install {argv[0]} or put it on PATH",
            ) from exc
        with self._lock:
            self._popen = popen
        return popen

    def stop(self, grace_seconds: float) -> None:
        super().stop(grace_seconds)
        with self._lock:
            popen = self._popen
        if popen is not None and popen.poll() is None:
            popen.terminate()  # our own reader process, never the server
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(2.0)
