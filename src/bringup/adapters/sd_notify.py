"""Tell systemd how a ``Type=notify`` service is doing (the ``sd_notify(3)`` protocol).

Each message is one datagram of ``NAME=value`` lines sent to the AF_UNIX socket named by
``$NOTIFY_SOCKET`` (a path, or ``@name`` for an abstract socket)::

    notifier = Notifier(ctx.environ)
    notifier.status("weights_loading 45/125")
    notifier.extend_timeout(120)      # EXTEND_TIMEOUT_USEC: push TimeoutStartSec= out
    notifier.ready("ready: smoke request answered")

Without ``NOTIFY_SOCKET`` every call does nothing and returns False, so the same code runs
under systemd and in a terminal. A failed send never raises (it returns False) unless
``debug`` is set, as the reference ``sdnotify`` library does.

Command line equivalent: ``systemd-notify --ready --status="..."``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

READY_WAIT_SECONDS = 0.5  # READY=1 and STOPPING=1 may wait this long for room in a full queue


class Notifier:
    """Sends sd_notify messages when systemd asked for them, and is silent otherwise."""

    def __init__(self, environ: Mapping[str, str], *, debug: bool = False) -> None:
        self._address = _socket_address(environ.get("NOTIFY_SOCKET", ""))
        self._watchdog_usec = environ.get("WATCHDOG_USEC")
        self._watchdog_pid = environ.get("WATCHDOG_PID")
        self._debug = debug

    @property
    def enabled(self) -> bool:
        """Whether a notify socket was given (we run under systemd ``Type=notify``)."""
        return self._address is not None

    def send(self, *, wait_seconds: float = 0.0, **fields: str | int) -> bool:
        """Send one message; ``send(READY=1, STATUS="ready")`` → ``b"READY=1\\nSTATUS=ready"``.

        systemd reads at once; should the queue still be full, the message is dropped (False)
        rather than freezing the supervisor, after at most ``wait_seconds``.
        """
        if self._address is None or not fields:
            return False
        payload = encode(fields)
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.settimeout(wait_seconds if wait_seconds > 0 else 0.0)
                sock.sendto(payload, self._address)
        except OSError:
            if self._debug:
                raise
            return False
        return True

    def ready(self, status: str | None = None) -> bool:
        """Say the service is ready (``READY=1``), with a status line when given."""
        if status is None:
            return self.send(READY=1, wait_seconds=READY_WAIT_SECONDS)
        return self.send(READY=1, STATUS=status, wait_seconds=READY_WAIT_SECONDS)

    def status(self, text: str) -> bool:
        """Set the free-text status ``systemctl status`` shows."""
        return self.send(STATUS=text)

    def extend_timeout(self, seconds: float) -> bool:
        """Ask for ``seconds`` more before the start (or stop) timeout fires."""
        return self.send(EXTEND_TIMEOUT_USEC=max(1, int(seconds * 1_000_000)))

    def watchdog(self) -> bool:
        """Keep the watchdog fed (``WATCHDOG=1``); needed when ``WatchdogSec=`` is set."""
        return self.send(WATCHDOG=1)

    def stopping(self) -> bool:
        """Say the service is shutting down (``STOPPING=1``)."""
        return self.send(STOPPING=1, wait_seconds=READY_WAIT_SECONDS)

    def watchdog_interval_seconds(self) -> float | None:
        """How often to send ``WATCHDOG=1``: half of ``WATCHDOG_USEC``, as systemd advises.

        None when no watchdog was asked for, or when ``WATCHDOG_PID`` names another process.
        """
        if not self._watchdog_usec:
            return None
        if self._watchdog_pid and self._watchdog_pid.strip() != str(os.getpid()):
            return None
        try:
            usec = int(self._watchdog_usec)
        except ValueError:
            return None
        return usec / 2_000_000 if usec > 0 else None


def encode(fields: Mapping[str, str | int]) -> bytes:
    """The datagram for ``fields``: ``NAME=value`` lines joined by newlines, UTF-8.

    A newline inside a value would start a new field, so it is replaced by a space.
    """
    lines = (f"{name}={_one_line(value)}" for name, value in fields.items())
    return "\n".join(lines).encode("utf-8")


def parse(payload: bytes) -> dict[str, str]:
    """The fields of one datagram (the inverse of ``encode``), as a receiver reads them."""
    fields: dict[str, str] = {}
    for line in payload.decode("utf-8", "replace").split("\n"):
        name, sep, value = line.partition("=")
        if sep:
            fields[name] = value
    return fields


def _one_line(value: str | int) -> str:
    return str(value).replace("\r", " ").replace("\n", " ")


def _socket_address(value: str) -> str | bytes | None:
    """``NOTIFY_SOCKET`` as a ``sendto`` address: ``@x`` is the abstract name ``\\0x``."""
    if not value:
        return None
    if value.startswith("@"):
        return b"\0" + value[1:].encode()
    if value.startswith("/"):
        return value
    return None  # systemd also allows vsock: addresses; we do not speak them
