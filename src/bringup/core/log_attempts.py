"""Where the newest attempt of a log file begins: a log a service appends to holds every
restart (the failed attempt, then the one still loading), and only the newest is news.

An attempt begins at an engine's start marker (its pack's ``restart`` patterns: vLLM's
version banner and ``non-default args``, SGLang's ``server_args=``, TGI's ``Args {``,
llama.cpp's ``build:``) once the attempt before it got somewhere: past its config phase, or
to an error. Pure: lines in, an index out.

A marker is a start exactly when it is the first marker after a line of progress (a marker
line is never progress itself). So the newest attempt begins at the first marker after the
last progress line that a marker follows, which a reader finds from the file's end backwards
(``BackwardScan``), a line at a time, and stops there: a short newest attempt at the end of
gigabytes of older ones costs its own lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bringup.core.packs import declared
from bringup.core.vocab import Phase

_TROUBLE = ("Traceback (most recent call last)", " ERROR ", "Error:", "error:")


def _patterns() -> tuple[list[re.Pattern[str]], list[re.Pattern[str]]]:
    """The start markers, and the phases past config (progress)."""
    restarts = [p for pack in declared() for p in pack.restart]
    later = [
        m.pattern for pack in declared() for m in pack.phases if m.phase.order > Phase.CONFIG.order
    ]
    return restarts, later


def newest_attempt_start(lines: Sequence[str]) -> tuple[int, int]:
    """(index of the first line of the newest attempt, how many attempts the lines hold).

    >>> newest_attempt_start(["INFO vLLM API server version 0.32.0", "Starting to load model m",
    ...     "ERROR boom", "INFO vLLM API server version 0.32.0", "Starting to load model m"])
    (3, 2)
    """
    restarts, later = _patterns()
    start, count, progressed = 0, 1, False
    for i, line in enumerate(lines):
        if any(p.search(line) for p in restarts):  # a start marker is never progress itself
            if progressed:
                start, count, progressed = i, count + 1, False
        elif not progressed and (
            any(t in line for t in _TROUBLE) or any(p.search(line) for p in later)
        ):
            progressed = True
    return start, count


class BackwardScan:
    """``newest_attempt_start`` read from the end: feed the lines last first (``feed``);
    ``start`` is then the newest attempt's first line, counted from the end (0: the last line
    fed first), as soon as it is settled, and None until then. Keep feeding (``counting``) to
    the file's first line to have ``attempts``, the count the whole file gives.

    >>> scan = BackwardScan()
    >>> [scan.feed(line) for line in reversed(["INFO vLLM API server version 0.32.0",
    ...     "Starting to load model m", "ERROR boom", "INFO vLLM API server version 0.32.0",
    ...     "Starting to load model m"])]
    [False, False, False, True, True]
    >>> scan.start, scan.attempts
    (1, 2)
    """

    def __init__(self) -> None:
        self._restarts, self._later = _patterns()
        self.fed = 0
        self.start: int | None = None  # from the end: the newest attempt's first line
        self._marker: int | None = None  # from the end: the nearest marker after this line
        self._starts: set[int] = set()

    @property
    def attempts(self) -> int:
        """Attempts among the lines fed so far (the whole file's count once its first line
        was fed)."""
        return len(self._starts) + 1

    def feed(self, line: str) -> bool:
        """The line before every line fed so far; True once ``start`` is settled."""
        at = self.fed
        self.fed += 1
        if any(p.search(line) for p in self._restarts):
            self._marker = at
        elif (
            self._marker is not None
            and self._marker not in self._starts
            and (any(t in line for t in _TROUBLE) or any(p.search(line) for p in self._later))
        ):
            self._starts.add(self._marker)  # a start: the first marker after this progress
            if self.start is None:
                self.start = self._marker
        return self.start is not None
