"""What a source emits, and the ``Source`` protocol every source meets."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class LineItem:
    """One log line (``stream``: stdout, stderr, journal, log, docker)."""

    stream: str
    text: str


@dataclass(frozen=True, slots=True)
class LinesItem:
    """Several lines of one stream that arrived together, in order."""

    stream: str
    texts: list[str]


@dataclass(frozen=True, slots=True)
class ExitItem:
    """The server ended; ``code`` is its exit status when known (negative: killed by signal)."""

    code: int | None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class NoteItem:
    """Something the user should know about the source itself (a reconnect, say)."""

    text: str


Item = LineItem | LinesItem | ExitItem | NoteItem
Emit = Callable[[Any], None]


class Source(Protocol):
    """Lines and the end of one server."""

    description: str  # "pid 4242", "unit vllm.service", ...
    starts_server: bool  # True only for the server bringup itself starts (ChildSource)

    def start(self, emit: Emit) -> None:
        """Begin delivering items; raise BringupError when the source cannot be followed."""
        ...

    def stop(self, grace_seconds: float) -> None:
        """Stop following (and, for a server bringup started, stop the server)."""
        ...

    def command(self) -> list[str] | None:
        """The server's command line, when it can be known (for engine, host and port)."""
        ...


class Stoppable:
    """Base of the watch sources: ``stop`` sets an event their reader threads wait on."""

    starts_server = False

    def __init__(self) -> None:
        self._stopped = threading.Event()

    def stop(self, grace_seconds: float) -> None:
        self._stopped.set()
