"""Time as a dependency: the follower asks a ``Clock``, tests pass a fake one."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Monotonic seconds and a way to wait."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``."""
        ...

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Wait until ``event`` is set or ``seconds`` have passed; True when it is set."""
        ...


class SystemClock:
    """The real clock (``time.monotonic`` / ``time.sleep``)."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def wait(self, event: threading.Event, seconds: float) -> bool:
        return event.wait(max(0.0, seconds))
