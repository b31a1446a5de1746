"""Value objects produced by reading a startup log: events as they happen, and the verdict.

The streaming reader (``bringup.core.analyzer.LogAnalyzer``) turns each line into zero or
more events; ``Diagnosis`` is the verdict at any moment. ``bringup diagnose`` prints the
final ``Diagnosis``; ``bringup run``/``watch`` act on events as they arrive.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from bringup.core.vocab import FailureClass, Outcome, Phase


@dataclass(frozen=True, slots=True)
class Remedy:
    """One concrete thing to do. ``flag``/``value`` are set when it is a server flag to append."""

    text: str  # a full sentence: what to do and why
    flag: str | None = None  # e.g. "--max-num-seqs"
    value: str | None = None  # e.g. "256"; None for boolean flags such as --enforce-eager
    env: str | None = None  # an environment variable to set instead of a flag, "NAME=value"


class Confidence(StrEnum):
    """How sure a verdict is: ``certain`` when a line the engine prints for exactly this cause
    states it (a signature, or a reported figure no healthy start has); ``likely`` when a
    general rule read it from an error's type, message, frames or signal; ``guess`` when
    nothing states a cause (a summary alone, a death without a line)."""

    CERTAIN = "certain"
    LIKELY = "likely"
    GUESS = "guess"

    @property
    def rank(self) -> int:
        """0 for certain, 1 likely, 2 guess (lower ranks first)."""
        return _CONFIDENCE_RANK[self]


_CONFIDENCE_RANK = {Confidence.CERTAIN: 0, Confidence.LIKELY: 1, Confidence.GUESS: 2}


@dataclass(frozen=True, slots=True)
class Candidate:
    """One cause the log supports, with the line that states it and why it was read so."""

    failure_class: FailureClass = field(metadata={"json": "class"})
    line_number: int
    line: str
    why: str
    confidence: Confidence = Confidence.LIKELY


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a startup failed, pinned to the line that states the cause."""

    failure_class: FailureClass = field(metadata={"json": "class"})
    phase: Phase  # the phase the failure happened in
    line: str  # the root-cause line verbatim, prefixes included
    line_number: int  # 1-based line number in the input
    summary: str  # one sentence in plain words
    remedy: tuple[Remedy, ...] = ()
    is_final: bool = True  # False for wrapper-only evidence that a more specific line may replace
    confidence: Confidence = Confidence.CERTAIN
    why: str = ""  # how the class was read: the signature, or the general rule that decided
    # the causes the log supports, best first (the verdict's own first): at most three
    candidates: tuple[Candidate, ...] = ()


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """The first line at which a phase was reached."""

    phase: Phase
    line_number: int
    timestamp: str | None  # as printed by the engine (vLLM prints no year); None if absent


@dataclass(frozen=True, slots=True)
class PhaseEvent:
    """A new (further) phase was reached."""

    entry: TimelineEntry


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    """Progress inside a phase: shards a/b, graphs n/m."""

    phase: Phase
    done: int
    total: int
    unit: str  # "shards", "graphs", "layers", ...
    line_number: int


@dataclass(frozen=True, slots=True)
class FactEvent:
    """A number the engine reported (weights GiB per GPU, KV tokens, ...)."""

    name: str
    value: float | int | str
    line_number: int


@dataclass(frozen=True, slots=True)
class FailureEvent:
    """A root cause (or, with ``is_final`` False, a wrapper pointing at one) was found.

    ``tentative``: the cause may still be replaced by a line close after it (a wrapper, or an
    unknown exception a known signature may explain), so a live follower waits a moment
    before it settles on it, and gives the verdict the whole log gives.
    """

    failure: Failure
    tentative: bool = False


@dataclass(frozen=True, slots=True)
class EngineEvent:
    """The engine (and version, when known) was recognised from the log."""

    engine: str
    version: str | None


Event = PhaseEvent | ProgressEvent | FactEvent | FailureEvent | EngineEvent


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """The verdict on a log so far. ``phase`` is the furthest phase reached."""

    engine: str | None
    engine_version: str | None
    outcome: Outcome
    phase: Phase
    failure: Failure | None
    timeline: tuple[TimelineEntry, ...] = ()
    facts: dict[str, float | int | str] = field(default_factory=dict)
    after_ready: Failure | None = None  # a failure after ready: the server's, not the startup's
