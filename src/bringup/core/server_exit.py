"""How the server process ended, kept apart from what bringup did to it.

A child's return code mixes two things: the status the server chose (vLLM exits 1 on a
failed startup, 2 on a bad flag, 0 after its engine died) and the signal that ended it, which
may be bringup's own SIGTERM or SIGKILL. ``ServerExit`` keeps them apart: ``status`` is the
server's own exit status (None when a signal ended it or it was left running), ``signal`` the
signal that ended it, and ``stopped_by`` the signals bringup sent (empty when the server
exited by itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_SIGNAL_NAMES = {
    1: "SIGHUP",
    2: "SIGINT",
    3: "SIGQUIT",
    6: "SIGABRT",
    9: "SIGKILL",
    11: "SIGSEGV",
    13: "SIGPIPE",
    15: "SIGTERM",
}


def signal_name(number: int) -> str:
    return _SIGNAL_NAMES.get(number, f"signal {number}")


@dataclass(frozen=True)
class ServerExit:
    """The end of the server process: its own status, the signal that ended it, bringup's part."""

    status: int | None = None  # the server's own exit status (0, 1, 2, ...)
    signal: str | None = None  # the signal that ended it ("SIGTERM"), None if it exited itself
    stopped_by: tuple[str, ...] = ()  # signals bringup sent it, in order ("SIGTERM", "SIGKILL")
    grace_seconds: float | None = None  # bringup's SIGTERM → SIGKILL grace, when it stopped it
    running: bool = False  # still running (left running with --keep, or never seen to exit)

    @classmethod
    def from_code(
        cls,
        code: int | None,
        stopped_by: tuple[str, ...] = (),
        grace_seconds: float | None = None,
    ) -> ServerExit:
        """From a ``subprocess`` return code (negative: killed by that signal; None: running)."""
        if code is None:
            return cls(None, None, stopped_by, grace_seconds, running=True)
        if code < 0:
            return cls(None, signal_name(-code), stopped_by, grace_seconds)
        return cls(code, None, stopped_by, grace_seconds)

    def json_fields(self) -> dict[str, Any]:
        """The summary's fields: ``server_exit_status``, ``server_exit_signal``, ``stopped_by_bringup``."""
        return {
            "server_exit_status": self.status,
            "server_exit_signal": self.signal,
            "stopped_by_bringup": (
                {"signals": list(self.stopped_by), "grace_seconds": self.grace_seconds}
                if self.stopped_by
                else None
            ),
        }

    def phrase(self) -> str:
        """For the closing line: "server exit status 1", "bringup stopped it: SIGTERM; exit status 0"."""
        if self.running:
            own = "still running"
        elif self.signal is not None:
            own = f"ended by {self.signal}"
        elif self.status is not None:
            own = f"exit status {self.status}"
        else:
            own = "exit status unknown"
        if not self.stopped_by:
            return f"server {own}" if not self.running else "server still running"
        sent = ", then ".join(self.stopped_by)
        if len(self.stopped_by) > 1 and self.grace_seconds is not None:
            sent += f" after {self.grace_seconds:g}s"
        return f"bringup stopped the server ({sent}); server {own}"
