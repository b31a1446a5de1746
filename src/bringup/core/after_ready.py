"""What a line must hold to matter once a start is ready (``AfterReady``)."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate

import ahocorasick_rs

from bringup.core import logline
from bringup.core.analyzer_state import _CHAINED, _EXCEPTION, _FRAME, _TRACEBACK
from bringup.core.packs import common
from bringup.core.packs import index as pack_index
from bringup.core.packs.types import Pack

# Once a start is ready, a phase line, a heartbeat or a hang point can no longer change the
# verdict (a phase never goes back within an attempt; a hang is judged only before ready), so
# the tables a line must match to matter then are these, with ``version`` while none is known,
# and the analyzer's own traceback checks (the exception line, a frame, the traceback's head, a
# chained traceback's separator).
_AFTER_READY_TABLES = ("restart", "exclusions", "progress", "signatures", "facts")
_OWN_CHECKS = (_EXCEPTION, _FRAME, re.compile(re.escape(_TRACEBACK)), *map(re.compile, _CHAINED))


class AfterReady:
    """What a line must hold to matter once the start is ready: one of the strings every
    match of those tables' patterns needs (``packs.index.required``), read off the pack, and
    one of the pack's screen tokens (a line the screen skips stays skipped). A serving
    journal's stats, access and request lines hold none, so after ready they cost one
    automaton pass and are never parsed. Worked out when a start first is ready (a start that
    fails never pays for it); None when a pattern that can still matter has no such strings
    (every line is then read as before)."""

    def __init__(self, pack: Pack) -> None:
        self._pack = pack
        self._built = False
        self._tokens: dict[bool, tuple[str, ...]] | None = None
        self._finders: dict[bool, ahocorasick_rs.AhoCorasick] = {}

    def tokens(self, need_version: bool) -> tuple[str, ...] | None:
        """The tokens, with the version patterns' while the version is not known."""
        if not self._built:
            self._build()
        return self._tokens[need_version] if self._tokens is not None else None

    def may_matter(self, line: str, need_version: bool) -> bool:
        """Whether ``line`` holds a token (a JSON record may hide its text: it always may)."""
        if self.tokens(need_version) is None:
            return True
        return bool(self._finders[need_version].find_matches_as_indexes(line)) or (
            line.startswith("{")
        )

    def _build(self) -> None:
        self._built = True
        index = pack_index.of(self._pack)
        own: set[str] = set()
        for pattern in _OWN_CHECKS:
            strings = pack_index.required(pattern)
            if strings is None:  # pragma: no cover - the analyzer's own patterns all have some
                return
            own |= strings
        base = index.required_of(_AFTER_READY_TABLES, avoid=common.ROUTINE_LINES)
        version = index.required_of(("version",), avoid=common.ROUTINE_LINES)
        if base is None or version is None:
            return
        self._tokens = {True: _fewest(own | base | version), False: _fewest(own | base)}
        self._finders = {k: logline.line_finder(v) for k, v in self._tokens.items()}


_AFTER_READY: dict[int, tuple[Pack, AfterReady]] = {}


def _after_ready_of(pack: Pack | None) -> AfterReady | None:
    """The pack's :class:`AfterReady`, one per pack; None for no pack."""
    if pack is None:
        return None
    found = _AFTER_READY.get(id(pack))
    if found is None or found[0] is not pack:
        found = (pack, AfterReady(pack))
        _AFTER_READY[id(pack)] = found
    return found[1]


def _fewest(strings: set[str] | frozenset[str]) -> tuple[str, ...]:
    """The strings that hold no other of them: a line holds one of ``strings`` exactly when it
    holds one of these (fewer tokens make a faster automaton). One automaton pass over each
    string finds the others it holds."""
    ordered = sorted(strings)
    finder = ahocorasick_rs.AhoCorasick(ordered)
    return tuple(
        s
        for i, s in enumerate(ordered)
        if all(j == i for j, _, _ in finder.find_matches_as_indexes(s, overlapping=True))
    )


def may_matter_in(lines: Sequence[str], start: int, tokens: tuple[str, ...]) -> list[int]:
    """The indexes, from ``start`` on, of the lines that :meth:`AfterReady.may_matter` lets
    through with ``tokens``, and of those the analyzer must see whatever they hold (a NUL hole
    ends the log at its line), from one automaton pass over the lines joined. A token holds no
    newline, so each match lies in one line, and every line holding a token holds a match."""
    texts = lines[start:] if start else lines
    joined = "\n".join(texts)
    if joined.isascii():  # bytes: the automaton of the whole-log reader, offsets the same
        data = joined.encode("ascii")
        found = [
            s for _, s, _ in logline.finder_for(tokens, len(data)).find_matches_as_indexes(data)
        ]
    else:
        found = [s for _, s, _ in logline.line_finder(tokens).find_matches_as_indexes(joined)]
    for mark in ("\n{", "\x00"):  # a JSON record may hide its text; a NUL hole ends the log
        pos = joined.find(mark)
        while pos != -1:
            found.append(pos + 1 if mark[0] == "\n" else pos)
            pos = joined.find(mark, pos + 1)
    if joined.startswith("{"):
        found.append(0)
    if not found:
        return []
    ends = list(accumulate(len(t) + 1 for t in texts))  # past each line's newline
    hits = sorted({bisect_right(ends, pos) for pos in found})
    return [start + k for k in hits]
