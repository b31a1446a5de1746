"""Where the newest attempt of a log file begins: a log a service appends to holds every
restart (the failed attempt, then the one still loading), and only the newest is news.

An attempt begins at an engine's start marker (its pack's ``restart`` patterns: vLLM's
version banner and ``non-default args``, SGLang's ``server_args=``, TGI's ``Args {``,
llama.cpp's ``build:``) once the attempt before it got somewhere: past its config phase, or
to an error. Pure: lines in, an index out.

A marker is a start exactly when it is the first marker after a line of progress (a marker
line is never progress itself), so after any marker the reading no longer depends on what
came before it. A file's last lines therefore settle where its newest attempt begins as soon
as an attempt begins within them: ``newest_in_tail`` says when (a reader can read a large log
backwards, a chunk at a time, and stop).
"""

from __future__ import annotations

from collections.abc import Sequence

from bringup.core.packs import all_packs
from bringup.core.vocab import Phase

_TROUBLE = ("Traceback (most recent call last)", " ERROR ", "Error:", "error:")


def newest_attempt_start(lines: Sequence[str]) -> tuple[int, int]:
    """(index of the first line of the newest attempt, how many attempts the lines hold).

    >>> newest_attempt_start(["INFO vLLM API server version 0.32.0", "Starting to load model m",
    ...     "ERROR boom", "INFO vLLM API server version 0.32.0", "Starting to load model m"])
    (3, 2)
    """
    restarts = [p for pack in all_packs() for p in pack.restart]
    later = [
        m.pattern for pack in all_packs() for m in pack.phases if m.phase.order > Phase.CONFIG.order
    ]
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


def newest_in_tail(lines: Sequence[str], *, whole: bool) -> tuple[int, int] | None:
    """``newest_attempt_start`` of the last ``lines`` of a file, when they settle it: an
    attempt begins within them (the answer for the whole file is then the same), or they are
    the whole file (``whole``). None: read further back. The count is then the attempts
    within these lines (the file may hold more before them).

    >>> newest_in_tail(["INFO vLLM API server version 0.32.0", "Starting to load model m"], whole=False)
    >>> newest_in_tail(["Starting to load model m", "INFO vLLM API server version 0.32.0"], whole=False)
    (1, 2)
    """
    first, attempts = newest_attempt_start(lines)
    if attempts > 1 or whole:
        return first, attempts
    return None
