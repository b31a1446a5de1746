"""Errors bringup raises, and the exit code each one maps to.

::

    BringupError                 any error bringup reports as one line (exit 2 unless stated)
     ├── UsageError              bad flags or arguments
     ├── InputError              a file or stream that cannot be read or makes no sense
     ├── AdapterError            an outside tool or service failed (systemctl, ssh, docker, NVML)
     │    └── RemoteError        a command on a remote host failed
     └── Interrupted             the user pressed Ctrl-C (exit 130)

Core code never raises these for *findings* (a corrupt shard, a failed startup): findings
are data, returned in results. These are for the cases where bringup cannot do its job.
"""

from __future__ import annotations

from bringup import exit_codes


class BringupError(Exception):
    """Raised when bringup cannot do what was asked; printed as one line, never a traceback."""

    exit_code: int = exit_codes.EXIT_USAGE

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message if self.hint is None else f"{self.message} ({self.hint})"


class UsageError(BringupError):
    """Raised for bad flags, values or argument combinations."""


class InputError(BringupError):
    """Raised when an input file or stream cannot be read at all."""


class AdapterError(BringupError):
    """Raised when an outside tool or service (systemctl, docker, NVML, ssh) fails."""


class RemoteError(AdapterError):
    """Raised when a command on a remote host fails; the message names host and command."""


class Interrupted(BringupError):
    """Raised when the user interrupts a long operation."""

    exit_code = exit_codes.SIGNAL_BASE + exit_codes.SIGINT  # 130, as a shell reports Ctrl-C
