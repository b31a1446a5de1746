"""The follower's inbox, and the workers that do its blocking reads (HTTP probes, GPU memory).

Everything the follower learns arrives as an item in one ``Inbox``: the source's lines and
exit, probe observations, GPU samples, signals. The loop decides *when* to probe or sample
(from the clock it was given); a ``Lane`` only runs the read and puts its item in the inbox,
on a worker thread (``ThreadLane``) or at once on the caller's thread (``InlineLane``, for
deterministic in-process tests with a fake clock).
"""

from __future__ import annotations

import collections
import contextlib
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from bringup.adapters.clock import Clock
from bringup.adapters.gpus import GpuSource
from bringup.core.gpu import GpuReading, select_visible
from bringup.core.probes import ProbeKind, ProbeObservation
from bringup.errors import BringupError
from bringup.follow.types import Prober

BURST_ITEMS = 1000  # items the follower handles with one reading of the clock before it ticks
MAX_ITEMS = 10_000  # items waiting in the inbox before a producer is paced
MAX_CHARS = 32 * 1024 * 1024  # characters of waiting lines (a line is up to 1 MiB)
IDLE_SECONDS = 0.25  # a consumer that took nothing for this long is busy elsewhere


class Inbox:
    """One queue for everything the follower is told; ``get`` waits on the injected clock.

    Bounded, with backpressure and no loss: a producer thread (a log tail, a pipe reader)
    that finds :data:`MAX_ITEMS` items or :data:`MAX_CHARS` characters of lines waiting is
    paused until the follower has taken some, so a writer faster than the follower slows
    the reading, not memory. Nothing is ever dropped. Two cases are never paused, so the
    bound cannot deadlock: puts from the follower's own thread (``InlineLane``, signals), and
    puts while the follower is not taking anything (it is stopping servers, or done): after
    :data:`IDLE_SECONDS` without a take the item is let in over the bound.
    """

    def __init__(
        self, clock: Clock, *, max_items: int = MAX_ITEMS, max_chars: int = MAX_CHARS
    ) -> None:
        self._items: collections.deque[tuple[Any, int]] = collections.deque()
        self._signals: collections.deque[Any] = collections.deque()  # no lock: signal-safe
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._arrived = threading.Event()
        self._clock = clock
        self._max_items = max_items
        self._max_chars = max_chars
        self._chars = 0
        self._consumer = (
            threading.get_ident()
        )  # the follower's thread (made there; updated on take)
        self._taken = 0  # takes so far (a waiting producer sees whether the follower moves)
        self._idle = False
        self.paced = 0  # puts that waited for room
        self.over_bound = 0  # puts let in over the bound (the follower was not taking)
        self.peak_items = 0
        self.peak_chars = 0

    def put(self, item: Any) -> None:
        """Add an item (any thread); from a producer thread, waits while the inbox is full."""
        cost = _chars_of(item)
        with self._lock:
            if threading.get_ident() != self._consumer and self._full(cost):
                if not self._idle:
                    self.paced += 1
                while self._full(cost) and not self._idle:
                    seen = self._taken
                    self._room.wait(IDLE_SECONDS)
                    if self._taken == seen:
                        self._idle = True  # until the next take
                if self._full(cost):
                    self.over_bound += 1
            self._items.append((item, cost))
            self._chars += cost
            self.peak_items = max(self.peak_items, len(self._items))
            self.peak_chars = max(self.peak_chars, self._chars)
        self._arrived.set()

    def _full(self, cost: int) -> bool:
        return bool(self._items) and (
            len(self._items) >= self._max_items or self._chars + cost > self._max_chars
        )

    def put_from_signal(self, item: Any) -> None:
        """Add an item from a signal handler: no lock taken, seen at the next wake-up."""
        self._signals.append(item)

    def get_nowait(self) -> Any | None:
        """The next item, or None when there is none (signals first)."""
        if self._signals:
            return self._signals.popleft()
        with self._lock:
            self._consumer = threading.get_ident()
            self._taken += 1
            self._idle = False
            if not self._items:
                return None
            item, cost = self._items.popleft()
            self._chars -= cost
            self._room.notify()
        return item

    def get(self, timeout_seconds: float) -> Any | None:
        """The next item, waiting at most ``timeout_seconds`` on the clock; None when none came."""
        item = self.get_nowait()
        if item is not None:
            return item
        self._arrived.clear()
        item = self.get_nowait()  # put between the first look and the clear
        if item is not None:
            return item
        self._clock.wait(self._arrived, timeout_seconds)
        return self.get_nowait()

    def take_burst(self, timeout_seconds: float, handle: Callable[[Any, float], None]) -> float:
        """Wait for an item as :meth:`get` does, then hand it and what else is waiting to
        ``handle(item, now)``, all with the one ``now`` read when the wait ended (a burst is
        decided on once), at most :data:`BURST_ITEMS` + 1 of them; return that ``now``."""
        item = self.get(timeout_seconds)
        now = self._clock.monotonic()
        handled = 0
        while item is not None and handled < BURST_ITEMS:
            handle(item, now)
            handled += 1
            item = self.get_nowait()
        if item is not None:
            handle(item, now)
        return now


def _chars_of(item: Any) -> int:
    """What an item holds in lines: its text (one line) or texts (several); 0 otherwise."""
    text = getattr(item, "text", None)
    if isinstance(text, str):
        return len(text)
    texts = getattr(item, "texts", None)
    if isinstance(texts, list):
        return sum(len(t) for t in texts if isinstance(t, str))
    return 0


@dataclass(frozen=True, slots=True)
class ProbeItem:
    """What one probe saw."""

    obs: ProbeObservation


@dataclass(frozen=True, slots=True)
class GpuItem:
    """One sample of the visible GPUs."""

    readings: list[GpuReading]


@dataclass(frozen=True, slots=True)
class GpuUnavailable:
    """The GPUs could not be read this time (``error`` says why)."""

    error: str


Job = Callable[[], Any]  # a blocking read; returns the item for the inbox


class Lane(Protocol):
    """Runs jobs one after another; each job's item goes to the inbox."""

    def submit(self, job: Job) -> None: ...
    def close(self) -> None: ...


class ThreadLane:
    """One worker thread; ``close`` lets it finish the job at hand, then runs ``on_close`` there."""

    def __init__(
        self, name: str, put: Callable[[Any], None], on_close: Callable[[], None] | None = None
    ) -> None:
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._put = put
        self._on_close = on_close
        threading.Thread(target=self._work, daemon=True, name=name).start()

    def submit(self, job: Job) -> None:
        self._jobs.put(job)

    def close(self) -> None:
        self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            with contextlib.suppress(Exception):  # a read must never kill the follower
                self._put(job())
        if self._on_close is not None:
            self._on_close()


class InlineLane:
    """Runs each job at once on the caller's thread (deterministic tests)."""

    def __init__(self, put: Callable[[Any], None], on_close: Callable[[], None] | None = None):
        self._put = put
        self._on_close = on_close

    def submit(self, job: Job) -> None:
        with contextlib.suppress(Exception):
            self._put(job())

    def close(self) -> None:
        if self._on_close is not None:
            self._on_close()


def probe_once(prober: Prober, kind: ProbeKind, health_path: str, model: str | None) -> ProbeItem:
    """One probe; an exception is an observation too (a probe must never kill the follower)."""
    try:
        obs = prober.probe(kind, health_path=health_path, model=model)
    except Exception as exc:
        obs = ProbeObservation(
            kind, prober.base_url, ok=False, error=f"{type(exc).__name__}: {exc}"
        )
    return ProbeItem(obs)


def read_gpus(gpus: GpuSource, visible: str | None) -> GpuItem | GpuUnavailable:
    """One sample of the GPUs ``CUDA_VISIBLE_DEVICES`` shows."""
    try:
        return GpuItem(select_visible(gpus.read(), visible))
    except BringupError as exc:
        return GpuUnavailable(str(exc))
