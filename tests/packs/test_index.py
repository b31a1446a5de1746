"""packs.index: the strings a pattern needs, and the per-line choice of patterns to try.

Skipping a pattern is only right when it cannot match: every real line (the fixtures, and the
real-log corpus read in place when it is there) that a pack pattern matches contains one of
the strings ``required`` gives for it. The work a line costs is bounded by the strings it
holds, not by the number of rules: checked by counting, never by timing.
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path

import pytest

from bringup.core import logline, packs
from bringup.core.analyzer import LogAnalyzer
from bringup.core.packs import index
from bringup.core.packs.index import required

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
CORPUS = Path(os.environ.get("BRINGUP_CORPUS", "/work/shared/corpus/logs"))


@pytest.mark.parametrize(
    ("pattern", "strings"),
    [
        (r"Model loading took (?P<gib>[\d.]+) GiB", {"Model loading took "}),
        (r"(?:CUDA|HIP) out of memory", {" out of memory"}),
        (r"^(?:Error|Exception)\b", {"rror", "xception"}),  # the parser factors out the "E"
        (
            r"(?:Worker|Engine core) proc \S+ died|exit code: -9|^Killed\s*$",
            {" proc ", "exit code: -9", "Killed"},
        ),
        (r"(?:Worker|Engine) proc|exit code: -9", {"Worker", "Engine", "exit code: -9"}),
        (r"Killed|\d+", None),  # one alternative needs no string: nothing is needed
        (r"a(?:bc)?d", {"a"}),  # an optional group needs nothing; "a" and "d" both must occur
        (r"(?:ab)+cd", {"ab"}),  # "ab" and "cd" are both needed: either will do
        (r"x{2,}yz", {"yz"}),
        (r"(?i)out of memory", None),
        (r"foo(?i:bar)", {"foo"}),
        (r"[Aa]ddress already in use", {"ddress already in use"}),
        (r"\d+ tokens", {" tokens"}),
        (r"(?=abc)\w+", None),
        (r"", None),
    ],
)
def test_required_strings(pattern: str, strings: set[str] | None) -> None:
    got = required(re.compile(pattern))
    assert got == (None if strings is None else frozenset(strings))


def _lines() -> list[str]:
    paths = sorted(LOGS.rglob("*.log"))
    if CORPUS.is_dir():
        paths += sorted(CORPUS.rglob("*.log"))
    out = []
    for path in paths:
        for number, raw in enumerate(logline.iter_lines(path.read_bytes()), start=1):
            out.append(logline.parse(raw, number).message)
    return out


def test_every_pattern_that_matches_a_real_line_is_picked_for_it() -> None:
    """Each distinct pattern of every pack, over every line of the fixtures and the corpus:
    every match holds one of the pattern's required strings (so a line without them is
    rightly skipped). All lines are searched at once, ``^`` and ``$`` at each line."""
    patterns: dict[str, tuple[re.Pattern[str], frozenset[str] | None]] = {}
    for pack in [*packs.all_packs(), packs.generic()]:
        for table in index.of(pack).tables.values():
            for rule in table:
                if getattr(rule, "required", None) is not None:
                    # a message table's: its strings are its own literal text, and each row's
                    # line is classified through the index (tests/packs/test_engine_messages.py)
                    continue
                p = rule if isinstance(rule, re.Pattern) else rule.pattern
                patterns.setdefault(p.pattern, (p, required(p)))
    assert len(patterns) > 200
    lines = _lines()
    assert len(lines) > 4000
    text = "\n".join(sorted(set(lines)))  # a repeated line is checked once
    matched = 0
    for p, strings in patterns.values():
        for m in re.compile(p.pattern, p.flags | re.MULTILINE).finditer(text):
            matched += 1
            assert strings is None or any(s in m.group(0) for s in strings), (p.pattern, m)
    assert matched > 1000


def test_the_index_picks_in_table_order_and_only_what_can_match() -> None:
    pack = packs.get(packs.all_packs()[0].engine)  # vLLM
    ix = index.of(pack)
    msg = "Model loading took 1.5 GiB and 3.2 seconds"
    mask = ix.scan(msg)
    phases = ix.pick("phases", mask)
    facts = ix.pick("facts", mask)
    assert [m.pattern.pattern for m in phases] == [
        m.pattern.pattern for m in pack.phases if m.pattern.search(msg)
    ]
    picked = [pack.facts.index(f) for f in facts]
    assert picked == sorted(picked)
    assert any(f.pattern.search(msg) for f in facts)
    assert ix.pick("signatures", mask) == ()
    assert len(facts) < len(pack.facts) // 4


def test_short_lines_that_pass_the_screen_cost_a_bounded_number_of_searches() -> None:
    """64 KiB of 5-byte lines, each passing the screen with no engine known (the input that
    took 16 s per MiB when every such line was searched with every pack's tables): the
    searches a line can cost are those of the few strings that fit in it."""
    generic = packs.generic()
    # 5-byte lines made of the screen's tokens that fit in 5 bytes (a longer token cut to 5
    # would not pass the screen)
    words = sorted({t.ljust(5, ".") for t in generic.screen or () if len(t) <= 5})
    words += [s.ljust(5, ".") for s in index.of(generic).strings() if len(s) <= 5]
    rng = random.Random(4)
    lines = [rng.choice(words) for _ in range((64 << 10) // 6)]
    analyzer = LogAnalyzer()
    for line in lines:
        analyzer.feed(line)
    assert analyzer.engine is None
    read, searches = analyzer.work
    assert read > len(lines) // 2  # they do pass the screen and are read
    total_rules = sum(len(t) for t in index.of(generic).tables.values())
    assert total_rules > 200
    assert searches <= 2 * read  # not ~200 per line
