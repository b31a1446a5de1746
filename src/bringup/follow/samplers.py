"""The follower's inbox, and the workers that do its blocking reads (HTTP probes, GPU memory).

Everything the follower learns arrives as an item in one ``Inbox``: the source's lines and
exit, probe observations, GPU samples, signals. The loop decides *when* to probe or sample
(from the clock it was given); a ``Lane`` only runs the read and puts its item in the inbox,
on a worker thread (``ThreadLane``) or at once on the caller's thread (``InlineLane``, for
deterministic in-process tests with a fake clock).
"""

from __future__ import annotations

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


class Inbox:
    """One queue for everything the follower is told; ``get`` waits on the injected clock."""

    def __init__(self, clock: Clock) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._arrived = threading.Event()
        self._clock = clock

    def put(self, item: Any) -> None:
        """Add an item (any thread)."""
        self._queue.put(item)
        self._arrived.set()

    def put_from_signal(self, item: Any) -> None:
        """Add an item from a signal handler: no lock taken, seen at the next wake-up."""
        self._queue.put(item)

    def get_nowait(self) -> Any | None:
        """The next item, or None when there is none."""
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            return None

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
