"""What a followed startup showed, kept for its report, timeline and metrics: the server's
lines (the last few hundred, numbered as the analyzer numbers them), and its events with
their times. One ``Lane`` per node (``run --nodes``: one per rank; otherwise one). Pure: the
events come in through ``event`` and ``line``."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from bringup.core.diagnosis import Failure, TimelineEntry
from bringup.core.live import (
    ClusterEvent,
    Exited,
    FailureFound,
    GpuSample,
    NodeEvent,
    PhaseReached,
    Progress,
    Ready,
)

HEAD_LINES = 200  # the first lines: where engines print their version
KEEP_LINES = 2000  # enough for the cause's context when it is near the end, as it nearly always is
CONTEXT = 3  # lines before and after the root-cause line


@dataclass
class Lane:
    """One node's (or the only server's) startup as it was seen."""

    name: str
    phases: list[tuple[float, str, int]] = field(default_factory=list)  # (t, phase, line)
    progress: list[tuple[float, str, int, int, str]] = field(default_factory=list)
    gpus: list[tuple[float, int, int, int]] = field(default_factory=list)  # (t, index, used, total)
    failure: tuple[float, Failure] | None = None
    ready_t: float | None = None
    exit_t: float | None = None
    end_t: float = 0.0

    def see(self, t: float) -> None:
        self.end_t = max(self.end_t, t)


class Recording:
    """Lines and events of one followed startup."""

    def __init__(self, keep: int = KEEP_LINES) -> None:
        self.lines: deque[tuple[int, str]] = deque(maxlen=keep)
        self.head: list[str] = []
        self.count = 0
        self.lanes: dict[str, Lane] = {}

    def lane(self, name: str = "") -> Lane:
        if name not in self.lanes:
            self.lanes[name] = Lane(name)
        return self.lanes[name]

    def line(self, text: str) -> None:
        self.count += 1
        self.lines.append((self.count, text))
        if len(self.head) < HEAD_LINES:
            self.head.append(text)

    def event(self, event: ClusterEvent) -> None:
        name = ""
        if isinstance(event, NodeEvent):
            name = f"rank {event.rank} ({event.node})"
            event = event.inner
        lane = self.lane(name)
        lane.see(event.t)
        if isinstance(event, PhaseReached):
            if not lane.phases and event.phase.value != "start":
                lane.phases.append((0.0, "start", 1))  # a startup is in start until it says more
            lane.phases.append((event.t, event.phase.value, event.line_number))
        elif isinstance(event, Progress):
            lane.progress.append((event.t, event.phase.value, event.done, event.total, event.unit))
        elif isinstance(event, GpuSample):
            lane.gpus += [(event.t, g.index, g.used_bytes, g.total_bytes) for g in event.gpus]
        elif isinstance(event, FailureFound) and lane.failure is None:
            lane.failure = (event.t, event.failure)
        elif isinstance(event, Ready):
            lane.ready_t = event.t
        elif isinstance(event, Exited):
            lane.exit_t = event.t

    def tail(self, n: int) -> tuple[str, ...]:
        """The last ``n`` lines."""
        start = max(0, len(self.lines) - n)
        return tuple(text for i, (_, text) in enumerate(self.lines) if i >= start)

    def context(self, line_number: int, around: int = CONTEXT) -> tuple[tuple[int, str], ...]:
        """The kept lines within ``around`` of ``line_number``."""
        return tuple(
            (n, text) for n, text in self.lines if line_number - around <= n <= line_number + around
        )


def context_of(
    lines: list[tuple[int, str]], line_number: int, around: int = CONTEXT
) -> tuple[tuple[int, str], ...]:
    """The lines of ``lines`` within ``around`` of ``line_number`` (for a log read whole)."""
    return tuple((n, t) for n, t in lines if line_number - around <= n <= line_number + around)


_CLOCK = re.compile(r"(?<!\d)([01]\d|2[0-3]):([0-5]\d):([0-5]\d)(?:[.,](\d{1,6}))?(?!\d)")
DAY = 86400.0


def clock_seconds(text: str) -> float | None:
    """The first time of day in ``text`` (``12-02 00:41:09``, ``2026-12-02T00:41:09.5Z``)
    as seconds since midnight; None when it holds none."""
    m = _CLOCK.search(text)
    if m is None:
        return None
    fraction = float("0." + m.group(4)) if m.group(4) else 0.0
    return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3)) + fraction


def lane_from_log(
    timeline: Sequence[TimelineEntry],
    failure: Failure | None,
    lines: Sequence[tuple[int, str]],
    name: str = "",
) -> tuple[Lane, str]:
    """A lane drawn from a log read afterwards, and its axis unit: seconds when its lines
    carry times of day (the engine's timestamps), else log lines."""
    text = dict(lines)
    stamps: list[tuple[int, float]] = []
    for entry in timeline:
        found = clock_seconds(entry.timestamp or text.get(entry.line_number, ""))
        if found is not None:
            stamps.append((entry.line_number, found))
    for n, line in lines:
        found = clock_seconds(line)
        if found is not None:
            stamps.append((n, found))
    stamps.sort()
    if len(stamps) >= 2:
        return _timed_lane(timeline, failure, stamps, name), "s"
    lane = Lane(name)
    lane.phases = [(float(e.line_number), e.phase.value, e.line_number) for e in timeline]
    lane.end_t = float(max([n for n, _ in lines] + [e.line_number for e in timeline] + [1]))
    if failure is not None:
        lane.failure = (float(failure.line_number or lane.end_t), failure)
    return lane, "line"


def _timed_lane(
    timeline: Sequence[TimelineEntry],
    failure: Failure | None,
    stamps: list[tuple[int, float]],
    name: str,
) -> Lane:
    # seconds from the first stamp, a day added each time the clock goes back past midnight
    unwrapped: list[tuple[int, float]] = []
    days = 0.0
    previous: float | None = None
    for n, s in stamps:
        if previous is not None and s + days < previous - DAY / 2:
            days += DAY
        previous = s + days
        unwrapped.append((n, previous))
    base = unwrapped[0][1]

    def at(line: int) -> float:
        before = [s for n, s in unwrapped if n <= line]
        return (before[-1] if before else base) - base

    lane = Lane(name)
    lane.phases = [(at(e.line_number), e.phase.value, e.line_number) for e in timeline]
    lane.end_t = max(unwrapped[-1][1] - base, 0.0)
    if failure is not None:
        lane.failure = (at(failure.line_number) if failure.line_number else lane.end_t, failure)
    return lane
