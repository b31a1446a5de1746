"""The state a :class:`~bringup.core.analyzer.LogAnalyzer` keeps while it reads, and the patterns
its own rules use (a traceback's head, frames and last line, a panic, a C++ ``what():``).

The analyzer is split by concern: this module (its state and constants), ``analyzer_offers``
(which cause wins), ``analyzer_verdict`` (the verdict at a moment or at the end), ``analyzer``
(reading lines). Each class adds to the one before it; ``LogAnalyzer`` is the last.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import ahocorasick_rs

from bringup.core import packs
from bringup.core.diagnosis import Event, FactEvent, Failure, TimelineEntry
from bringup.core.logline import LogLine
from bringup.core.packs import index as pack_index
from bringup.core.packs.types import Pack, Signature
from bringup.core.vocab import Engine, FailureClass, Phase

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line \d+, in (?P<func>[\w<>.]+)')
_TRACEBACK = "Traceback (most recent call last)"
_REFINE_WINDOW_LINES = 200  # a specific line this close after a generic one refines it
_MAX_PENDING = 5_000  # lines kept before the engine is recognised, replayed once it is
_MAX_FRAMES = 400
_NUL_RUN = "\x00" * 64  # a hole in a truncated file: what follows is an older process's
# the last line of a Python traceback: "ValueError: ...", "torch.OutOfMemoryError: ..."
_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*(?P<type>[A-Z]\w*(?:Error|Exception|Failure))(?::\s+(?P<text>\S.*))?$"
)
# a Rust panic with its message (TGI's router and launcher): a cause, read like an exception
_PANIC = re.compile(
    r"panicked at '(?P<text>.+)'(?:, \S+:\d+:\d+)?$|panicked at \S+:\d+:\d+:\s*(?P<text2>.+)?$"
)
# a C++ exception's message (libstdc++'s terminate handler)
_WHAT = re.compile(r"^\s*what\(\):\s+(?P<text>\S.*)$")
# a shell prompt with the user's command, pasted with the log: input, not output
_PROMPT = re.compile(r"^(?:\(\S+\) )?[\w.-]+@[\w.-]+:\S*[#$] |^\$ \S")
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
# classes that are consequences of an error, never the explanation of one
_CONSEQUENCES = frozenset({FailureClass.TIMEOUTS, FailureClass.ENGINE_CORE_DIED})
_QUIET_LEVELS = frozenset({"DEBUG", "INFO", "WARNING", "WARN", "I", "W", "D"})
_ERROR_LEVELS = frozenset({"ERROR", "CRITICAL", "FATAL", "E", "F"})
_MAX_ERRORS = 16  # error lines kept for a summary to point back at
_MAX_OFFERS = 32  # causes kept per attempt for the ranked candidates
_MAX_CANDIDATES = 3


class _Rules:
    """The rules of a pack one line can match (``packs.index``), table by table."""

    __slots__ = ("index", "mask")

    def __init__(self, index: pack_index.RuleIndex, text: str) -> None:
        self.index = index
        self.mask = index.scan(text)

    def __call__(self, table: str) -> Sequence[Any]:
        return self.index.pick(table, self.mask)


class _SafeGroups(dict[str, str]):
    """A line's named groups; a name the line lacks comes from the facts, else "?"."""

    def __init__(self, groups: dict[str, str], facts: dict[str, float | int | str]) -> None:
        super().__init__(groups)
        self.facts = facts

    def __missing__(self, key: str) -> str:
        return str(self.facts[key]) if key in self.facts else "?"


class AnalyzerState:
    """What the analyzer knows so far: of the log (the pack, the version, the attempt) and of
    the attempt being read (its phase, facts, failure and the evidence behind them)."""

    _pack: Pack | None
    _use_screen: bool
    _screen: ahocorasick_rs.AhoCorasick | None
    _use_after_ready: bool
    _number: int
    _version: str | None
    _pending: list[tuple[int, str]]
    _last: tuple[int, str] | None
    _stale: bool
    _owner: Engine | None
    _shape_owner: Engine | None
    _attempt: int
    _lines_read: int
    _searches: int

    def _reset_attempt(self) -> None:
        self._phase = Phase.START
        self._timeline: list[TimelineEntry] = []
        self._facts: dict[str, float | int | str] = {}
        self._failure: Failure | None = None
        self._priority = 0
        self._sig: Signature | None = None  # the failure's signature (None: not a signature's)
        self._weak = False  # the failure is an unknown exception line, not a signature
        self._runtime: Failure | None = None  # the first failure after ready
        self._runtime_weak = False  # it is an unknown exception, not a signature
        self._hang_at: LogLine | None = None  # the last step, when it is one known to hang
        self._quiet_tb: set[str] = set()  # processes inside a traceback logged as a warning
        self._in_source: set[str] = set()  # processes whose next indented line is source code
        self._chained = False  # a chained traceback began, in the failing process, after it
        self._failure_key = ""  # the process the failure came from
        self._frames: dict[str, list[tuple[str, str]]] = {}  # (file, function), innermost last
        self._errors: list[LogLine] = []  # error lines no signature explained, newest last
        self._offers: list[Failure] = []  # every cause offered in this attempt (candidates)
        self._heartbeats = 0
        self._progress_line: LogLine | None = None
        self._progress: dict[str, tuple[int, int]] = {}

    @property
    def engine(self) -> Engine | None:
        """The engine, given or recognised from the lines; None until known."""
        return self._pack.engine if self._pack is not None else None

    def _current_phase(self) -> Phase:
        return self._current_phase_in(self._pack or packs.generic())

    def _current_phase_in(self, pack: Pack) -> Phase:
        return pack.phase_after.get(self._phase, self._phase)

    @staticmethod
    def _facts_of(rules: _Rules, msg: str) -> dict[str, float | int | str]:
        """The facts one line carries, in the pack's rule order (a later rule wins)."""
        found: dict[str, float | int | str] = {}
        for rule in rules("facts"):
            m = rule.pattern.search(msg)
            if not m:
                continue
            for group, raw in m.groupdict().items():
                if raw is None:
                    continue
                name = group.split("__")[0]
                convert = rule.convert.get(name)
                try:
                    found[name] = convert(raw) if convert is not None else raw
                except ValueError:
                    continue
        return found

    def _set_fact(
        self, name: str, value: float | int | str, number: int, events: list[Event]
    ) -> bool:
        """Record a fact; True when it is new or changed."""
        if self._facts.get(name) != value:
            self._facts[name] = value
            events.append(FactEvent(name, value, number))
            return True
        return False
