"""What a followed start tells systemd (sd_notify), the same for one server and for a cluster:
the phase as STATUS=, the start timeout pushed out at each sign of progress, the watchdog
once ready."""

from __future__ import annotations

from bringup.core.diagnosis import Failure
from bringup.follow.types import Notify

EXTEND_EVERY_SECONDS = 5.0  # EXTEND_TIMEOUT_USEC at most this often


class ServiceNotes:
    """The sd_notify messages of one followed start; every call is a no-op without a notifier."""

    def __init__(self, notifier: Notify | None) -> None:
        self.notifier = notifier
        self._last_status = ""
        self._last_extend = -1e9
        self._last_watchdog = -1e9

    def extend(self, seconds: float, now: float) -> None:
        """Push systemd's start timeout ``seconds`` out from now."""
        if self.notifier is not None:
            self._last_extend = now
            self.notifier.extend_timeout(seconds)

    def status(self, text: str) -> None:
        if self.notifier is not None:
            self.notifier.status(text)

    def starting(self, text: str, now: float, extend_seconds: float) -> None:
        """A sign of progress: STATUS= when the words changed, the timeout pushed out."""
        if self.notifier is None:
            return
        if text != self._last_status:
            self._last_status = text
            self.notifier.status(text)
        if now - self._last_extend >= EXTEND_EVERY_SECONDS:
            self.extend(extend_seconds, now)

    def failed(self, failure: Failure, *, stalled: bool, prefix: str = "") -> None:
        ended = "stalled" if stalled else "failed"
        self.status(f"{ended}: {prefix}{failure.failure_class.value} during {failure.phase.value}")

    def ready(self, text: str) -> None:
        if self.notifier is not None:
            self.notifier.ready(text)

    def watchdog_if_due(self, now: float) -> None:
        """WATCHDOG=1 when the unit asks for it (WatchdogSec=) and an interval has passed."""
        if self.notifier is None:
            return
        interval = self.notifier.watchdog_interval_seconds()
        if interval and now - self._last_watchdog >= interval:
            self._last_watchdog = now
            self.notifier.watchdog()

    def stopping(self) -> None:
        if self.notifier is not None:
            self.notifier.stopping()
