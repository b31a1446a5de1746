"""Which of a pack's patterns a line can match, from one automaton pass over it.

Nearly every pattern of a pack needs some literal text to match: ``Model loading took`` needs
that phrase, ``(?:CUDA|HIP) out of memory`` needs `` out of memory``. ``required`` reads a
compiled pattern's syntax tree and returns such a set of strings, one of which occurs in every
text the pattern matches (None when it cannot say: the pattern is then always tried). A
``RuleIndex`` puts the required strings of all of a pack's tables into one Aho-Corasick
automaton; for one line, ``scan`` gives the patterns whose strings occur, and ``pick`` keeps,
in table order, only those (and the always-tried ones). A pattern whose strings are absent
cannot match, so skipping it changes nothing; it is what lets a line that passed the screen
cost a few regex searches instead of a hundred.
"""

from __future__ import annotations

import re

# the regex parser's own modules (typeshed has stubs only for their old names, which warn)
import re._constants as sre_c  # type: ignore[import-not-found]
import re._parser as sre_parse  # type: ignore[import-not-found]
from collections.abc import Sequence
from functools import cache
from typing import Any

import ahocorasick_rs

from bringup.core.packs.types import Pack

_REPEATS = frozenset({sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, sre_c.POSSESSIVE_REPEAT})
_MAX_STRINGS = 64  # a branch of more alternatives than this is not worth indexing

# the tables the analyzer searches line by line, in the order they are laid out
TABLES = (
    "version",
    "restart",
    "exclusions",
    "progress",
    "phases",
    "hang_points",
    "heartbeats",
    "signatures",
    "facts",
    "echoes",
)


def required(pattern: re.Pattern[str], avoid: tuple[str, ...] = ()) -> frozenset[str] | None:
    """Strings one of which occurs in every text ``pattern`` matches; None: no such set is
    known (case-insensitive, or nothing literal that every match must contain).

    ``avoid``: lines the set should not be found in where the pattern offers another (a
    screen for what a healthy server prints all day); a class of a few characters is then an
    option too (``[█▀▄]``). Any set given is right: they differ in how many lines they let by.
    """
    return _required(pattern.pattern, pattern.flags, avoid)


@cache
def _required(source: str, flags: int, avoid: tuple[str, ...] = ()) -> frozenset[str] | None:
    """:func:`required` of one pattern text (the packs share many: read each once)."""
    if flags & re.IGNORECASE:
        return None
    try:
        tree = sre_parse.parse(source, flags)
    except (re.error, RecursionError, TypeError, ValueError):  # pragma: no cover - compiled already
        return None
    return _sequence(list(tree), avoid)


def _sequence(items: Sequence[tuple[Any, Any]], avoid: tuple[str, ...]) -> frozenset[str] | None:
    """Every item of a sequence must match: any one item's set will do; the best is the one
    whose shortest string is longest (it occurs in fewest lines), among those found in none of
    the ``avoid`` lines when there are such."""
    options: list[frozenset[str]] = []
    run: list[str] = []
    for op, av in items:
        if op is sre_c.LITERAL:
            run.append(chr(av))
            continue
        if run:
            options.append(frozenset({"".join(run)}))
            run = []
        found = _item(op, av, avoid)
        if found is not None:
            options.append(found)
    if run:
        options.append(frozenset({"".join(run)}))
    if avoid:
        clear = [o for o in options if not any(s in line for s in o for line in avoid)]
        options = clear or options
    if not options:
        return None
    return max(options, key=lambda s: (min(len(x) for x in s), -len(s)))


def _item(op: Any, av: Any, avoid: tuple[str, ...]) -> frozenset[str] | None:
    if op is sre_c.SUBPATTERN:
        _group, add_flags, _del_flags, sub = av
        if add_flags & re.IGNORECASE:
            return None
        return _sequence(list(sub), avoid)
    if op is sre_c.ATOMIC_GROUP:
        return _sequence(list(av), avoid)
    if op is sre_c.BRANCH:
        strings: set[str] = set()
        for alternative in av[1]:
            found = _sequence(list(alternative), avoid)
            if found is None:
                return None
            strings |= found
        return frozenset(strings) if len(strings) <= _MAX_STRINGS else None
    if op in _REPEATS:
        low, _high, sub = av
        return _sequence(list(sub), avoid) if low >= 1 else None
    if avoid and op is sre_c.IN and len(av) <= _MAX_STRINGS:  # [█▀▄]: one of these characters
        chars = {chr(v) for o, v in av if o is sre_c.LITERAL}
        return frozenset(chars) if len(chars) == len(av) else None
    return None  # a class, an anchor, a look-around, a back reference: no string known


class RuleIndex:
    """A pack's tables behind one automaton of their required strings (see the module)."""

    def __init__(self, pack: Pack) -> None:
        self.tables: dict[str, tuple[Any, ...]] = {}
        self._layout: dict[str, tuple[int, int, tuple[Any, ...]]] = {}
        always = 0
        by_string: dict[str, int] = {}
        bit = 0
        for name in TABLES:
            table = tuple(getattr(pack, name))
            self.tables[name] = table
            self._layout[name] = (bit, (1 << len(table)) - 1, table)
            for rule in table:
                strings = _rule_required(rule)
                if strings is None or not all(strings):
                    always |= 1 << bit
                else:
                    for s in strings:
                        by_string[s] = by_string.get(s, 0) | (1 << bit)
                bit += 1
        self.always = always
        self._strings = tuple(by_string)
        self._masks = tuple(by_string.values())
        self._finder = ahocorasick_rs.AhoCorasick(list(self._strings)) if self._strings else None

    def scan(self, text: str) -> int:
        """The rules ``text`` may match, as a bit mask over the tables laid end to end."""
        mask = self.always
        if self._finder is not None:
            masks = self._masks
            for i in {m[0] for m in self._finder.find_matches_as_indexes(text, overlapping=True)}:
                mask |= masks[i]
        return mask

    def pick(self, name: str, mask: int) -> Sequence[Any]:
        """The rules of table ``name`` in ``mask``, in the table's order."""
        start, full, table = self._layout[name]
        bits = (mask >> start) & full
        if not bits:
            return ()
        found = []
        while bits:
            low = bits & -bits
            found.append(table[low.bit_length() - 1])
            bits ^= low
        return found

    def strings(self) -> tuple[str, ...]:
        """Every required string in the automaton (for tests and benchmarks)."""
        return self._strings

    def required_of(
        self, names: Sequence[str], avoid: tuple[str, ...] = ()
    ) -> frozenset[str] | None:
        """The strings one of which every text a rule of tables ``names`` matches contains;
        None when some rule of them has no such strings (it can match anything). ``avoid``:
        lines the strings should not be in, where a rule's pattern offers others (see
        :func:`required`)."""
        found: set[str] = set()
        for name in names:
            for rule in self.tables[name]:
                strings = _rule_required(rule, avoid)
                if strings is None or not all(strings):
                    return None
                found |= strings
        return frozenset(found)


def _rule_required(rule: Any, avoid: tuple[str, ...] = ()) -> frozenset[str] | None:
    """A rule's required strings: its own (a message-table rule knows them), else its pattern's;
    with ``avoid``, its pattern's when its own are in one of those lines."""
    own = getattr(rule, "required", None)
    if own and not (avoid and any(s in line for s in own for line in avoid)):
        return frozenset(own)
    pattern = rule if isinstance(rule, re.Pattern) else rule.pattern
    found = _required(pattern.pattern, pattern.flags, avoid)
    return found if found is not None or not own else frozenset(own)


_INDEXES: dict[int, tuple[Pack, RuleIndex]] = {}


def of(pack: Pack) -> RuleIndex:
    """The index of ``pack``, built once (the pack is kept, so its id stays its own)."""
    found = _INDEXES.get(id(pack))
    if found is None or found[0] is not pack:
        found = (pack, RuleIndex(pack))
        _INDEXES[id(pack)] = found
    return found[1]
