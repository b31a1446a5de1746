"""Fakes for the follower's dependencies: a clock that runs a schedule, a scripted source,
a server that answers probes from a given time on, GPUs, sd_notify, and an observer that records.

``FakeClock.wait`` never blocks: it runs the scheduled callbacks up to the end of the wait
(or until one of them sets the event) and moves its time on, so a 300 s stall takes
milliseconds and every run is the same.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bringup.adapters.sources.items import Emit, ExitItem, LineItem
from bringup.core.gpu import GpuReading
from bringup.core.live import LiveEvent, StartupResult
from bringup.core.probes import ProbeKind, ProbeObservation
from bringup.core.startup import StartupSnapshot
from bringup.errors import AdapterError

GiB = 1024**3


class FakeClock:
    """Seconds that move only when waited on; callbacks run at their scheduled times."""

    def __init__(self, start: float = 1000.0) -> None:
        self.start = start
        self.now = start
        self._due: list[tuple[float, int, Callable[[], None]]] = []
        self._count = 0

    def at(self, seconds: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` when the clock reaches ``seconds`` after its start."""
        self._count += 1
        heapq.heappush(self._due, (self.start + seconds, self._count, fn))

    def elapsed(self) -> float:
        return self.now - self.start

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self._advance(self.now + max(0.0, seconds), None)

    def wait(self, event: threading.Event, seconds: float) -> bool:
        if event.is_set():
            return True
        return self._advance(self.now + max(0.0, seconds), event)

    def _advance(self, end: float, event: threading.Event | None) -> bool:
        while self._due and self._due[0][0] <= end:
            t, _, fn = heapq.heappop(self._due)
            self.now = max(self.now, t)
            fn()
            if event is not None and event.is_set():
                return True
        self.now = end
        return event is not None and event.is_set()


Script = Sequence[tuple[float, Any]]  # (seconds after the start, item or callable)


class ScriptedSource:
    """A watch-like source whose items arrive at scripted times on the fake clock."""

    starts_server = False

    def __init__(
        self, clock: FakeClock, script: Script, *, command: list[str] | None = None
    ) -> None:
        self.clock = clock
        self.script = script
        self._command = command
        self.description = "scripted"
        self.stopped: float | None = None

    def start(self, emit: Emit) -> None:
        for t, item in self.script:
            self.clock.at(t, item if callable(item) else (lambda item=item: emit(item)))

    def stop(self, grace_seconds: float) -> None:
        self.stopped = grace_seconds

    def command(self) -> list[str] | None:
        return self._command


def lines(*timed: tuple[float, str]) -> list[tuple[float, Any]]:
    """``(t, text)`` pairs as journal lines."""
    return [(t, LineItem("journal", text)) for t, text in timed]


def exit_at(t: float, code: int | None) -> tuple[float, Any]:
    return (t, ExitItem(code))


class FakeServer:
    """A server that listens from ``ready_at`` on (refused before) until ``down_at``."""

    def __init__(
        self,
        clock: FakeClock,
        *,
        ready_at: float | None = 0.0,
        down_at: float | None = None,
        model: str = "fake/model",
        fail_with: Exception | None = None,
    ) -> None:
        self.clock = clock
        self.ready_at = ready_at
        self.down_at = down_at
        self.model = model
        self.fail_with = fail_with
        self.probes: list[tuple[str, ProbeKind, float]] = []
        self.urls: list[str] = []
        self.closed = 0

    def prober(self, url: str) -> FakeProber:
        self.urls.append(url)
        return FakeProber(self, url)

    def listening(self) -> bool:
        t = self.clock.elapsed()
        up = self.ready_at is not None and t >= self.ready_at
        return up and (self.down_at is None or t < self.down_at)


@dataclass
class FakeProber:
    server: FakeServer
    base_url: str

    def probe(
        self, kind: ProbeKind, *, health_path: str = "/health", model: str | None = None
    ) -> ProbeObservation:
        s = self.server
        s.probes.append((self.base_url, kind, s.clock.elapsed()))
        if s.fail_with is not None:
            raise s.fail_with
        if not s.listening():
            return ProbeObservation(kind, self.base_url, ok=False, refused=True, error="refused")
        if kind is ProbeKind.MODELS:
            return ProbeObservation(kind, self.base_url, ok=True, status=200, model=s.model)
        if kind is ProbeKind.SMOKE:
            return ProbeObservation(
                kind, self.base_url, ok=True, status=200, model=model, text=" hi"
            )
        return ProbeObservation(kind, self.base_url, ok=True, status=200)

    def close(self) -> None:
        self.server.closed += 1


class FakeGpus:
    """GPU readings: a function of the fake time, or an error every time."""

    def __init__(
        self,
        clock: FakeClock,
        used_gib: Callable[[float], float] | None = None,
        *,
        error: str | None = None,
    ) -> None:
        self.clock = clock
        self.used_gib = used_gib or (lambda t: 1.0)
        self.error = error
        self.reads = 0

    def read(self) -> list[GpuReading]:
        self.reads += 1
        if self.error is not None:
            raise AdapterError(self.error)
        used = int(self.used_gib(self.clock.elapsed()) * GiB)
        return [GpuReading(0, "H100", "GPU-0", 80 * GiB, used)]


@dataclass
class FakeNotify:
    """Records every sd_notify message in order."""

    sent: list[tuple[str, Any]] = field(default_factory=list)
    interval: float | None = None

    def ready(self, status: str | None = None) -> bool:
        self.sent.append(("ready", status))
        return True

    def status(self, text: str) -> bool:
        self.sent.append(("status", text))
        return True

    def extend_timeout(self, seconds: float) -> bool:
        self.sent.append(("extend", seconds))
        return True

    def watchdog(self) -> bool:
        self.sent.append(("watchdog", None))
        return True

    def stopping(self) -> bool:
        self.sent.append(("stopping", None))
        return True

    def watchdog_interval_seconds(self) -> float | None:
        return self.interval

    def kinds(self) -> list[str]:
        return [k for k, _ in self.sent]


@dataclass
class RecordingObserver:
    """Keeps what the follower reported."""

    events: list[LiveEvent] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    closed: list[StartupResult] = field(default_factory=list)

    def event(self, event: LiveEvent) -> None:
        self.events.append(event)

    def line(self, stream: str, text: str) -> None:
        self.lines.append(text)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def refresh(self, snapshot: StartupSnapshot) -> None: ...

    def close(self, result: StartupResult, snapshot: StartupSnapshot) -> None:
        self.closed.append(result)

    def names(self) -> list[str]:
        return [e.event for e in self.events]
