"""Once a start is ready, only lines that can still change the verdict are read (AfterReady).

The rule is read off each pack's tables (the strings every match of the after-ready tables'
patterns needs), so these tests check what it promises: the verdict is the one every line gives
(on serving journals of each wrapping and version, and on every corpus log), a restart or a
runtime failure after ready is still seen, and the serving lines really are skipped.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bringup.core import logline, packs
from bringup.core.analyzer import LogAnalyzer, diagnose_bytes
from bringup.core.diagnosis import Diagnosis
from bringup.core.logfeed import diagnose_chunks
from bringup.core.vocab import Engine, Outcome

from builders import serving_journal

ROOT = Path(__file__).parents[2]
# the shared corpus, read in place: $BRINGUP_CORPUS, else beside the checkout or its worktree folder
_PLACES = [os.environ.get("BRINGUP_CORPUS", ""), ROOT.parent / "shared" / "corpus"]
SHARED = next(
    (
        Path(p) / "logs"
        for p in [*_PLACES, ROOT.parent.parent / "shared" / "corpus"]
        if p and (Path(p) / "logs").is_dir()
    ),
    ROOT / "no-corpus",
)


def _every_line(data: bytes, *, after_ready: bool) -> tuple[Diagnosis, int]:
    """The verdict with every line fed, and how many lines were read with a pack's tables."""
    analyzer = LogAnalyzer(after_ready=after_ready)
    for number, line in enumerate(logline.iter_lines(data), start=1):
        analyzer.feed_numbered(number, line)
    return analyzer.finish(whole_log=True), analyzer.work[0]


def _journal(version: str, wrap: str, failure: bool, lines: int = 6000) -> bytes:
    text = "\n".join(
        serving_journal.journal(version, wrap, lines, failure=failure, startup_lines=300)
    )
    return (text + "\n").encode()


@pytest.mark.parametrize("version", serving_journal.VERSIONS)
@pytest.mark.parametrize("wrap", serving_journal.WRAPS)
@pytest.mark.parametrize("failure", [False, True])
def test_serving_journal_verdict_is_every_lines_verdict(
    version: str, wrap: str, failure: bool
) -> None:
    """Whole buffer, streamed blocks and line by line: the verdict of reading every line."""
    data = _journal(version, wrap, failure)
    reference, read_all = _every_line(data, after_ready=False)
    fast, read_fast = _every_line(data, after_ready=True)
    chunks = [data[i : i + 4096] for i in range(0, len(data), 4096)]
    assert fast == reference
    assert diagnose_bytes(data) == reference
    assert diagnose_chunks(chunks) == reference
    assert reference.outcome is (Outcome.FAILED if failure else Outcome.READY)
    # the serving lines (thousands of stats, request and warning lines) are not read once ready
    assert read_fast < read_all / 4, (read_fast, read_all)


def test_a_restart_after_ready_is_read_and_the_screen_comes_back() -> None:
    """The second start's banner is read after ready; its phase lines are read again after it."""
    data = _journal("v1", "journald", failure=True)
    d = diagnose_bytes(data)
    assert d.outcome is Outcome.FAILED
    assert d.failure is not None
    assert "CUDA out of memory" in d.failure.line
    # the failed attempt reached memory profiling: its phase lines were read, not skipped
    assert d.phase.value == "memory_profiling"


def test_a_runtime_failure_after_ready_is_still_seen() -> None:
    """A traceback in a ready server's journal is its runtime failure, read as before."""
    lines = [*serving_journal.journal("v1", "raw", 2000, failure=False, startup_lines=300)]
    lines += [
        "(EngineCore_DP0 pid=1301) ERROR 12-01 11:00:00 [core.py:720] EngineCore encountered a fatal error.",
        "(EngineCore_DP0 pid=1301) Traceback (most recent call last):",
        '(EngineCore_DP0 pid=1301)   File "/opt/vllm/v1/engine/core.py", line 711, in run_engine_core',
        "(EngineCore_DP0 pid=1301)     engine_core.run_busy_loop()",
        "(EngineCore_DP0 pid=1301) RuntimeError: CUDA error: an illegal memory access was encountered",
    ]
    data = ("\n".join(lines) + "\n").encode()
    reference, _ = _every_line(data, after_ready=False)
    assert reference.after_ready is not None
    assert diagnose_bytes(data) == reference == _every_line(data, after_ready=True)[0]


def test_every_pack_has_an_after_ready_screen_that_holds_its_own_checks() -> None:
    """Each pack's after-ready tokens exist and include the traceback checks' strings."""
    from bringup.core.analyzer import _after_ready_of

    for engine in Engine:
        after = _after_ready_of(packs.get(engine))
        assert after is not None, engine
        tokens = after.tokens(False)
        for line in (
            "Traceback (most recent call last):",
            "KeyError: 'x'",
            '  File "a.py", line 1, in f',
        ):
            assert any(t in line for t in tokens), (engine, line)
        with_version = after.tokens(True)
        assert with_version is not None
        # a line that matters without the version patterns matters with them too
        assert all(any(v in t for v in with_version) for t in tokens), engine


def _corpus_logs() -> list[Path]:
    return sorted(SHARED.glob("*/*.log")) if SHARED.is_dir() else []


@pytest.mark.skipif(not _corpus_logs(), reason="../shared/corpus/logs is not here")
def test_corpus_verdicts_do_not_change() -> None:
    """On every real log of the shared corpus: the same verdict with and without the rule."""
    differ = []
    for path in _corpus_logs():
        data = path.read_bytes()
        reference, _ = _every_line(data, after_ready=False)
        if _every_line(data, after_ready=True)[0] != reference:
            differ.append(path.name)
    assert not differ


def _by_line(lines: list[str]) -> tuple[LogAnalyzer, list[tuple[int, list[object]]]]:
    analyzer = LogAnalyzer()
    events: list[tuple[int, list[object]]] = []
    for k, line in enumerate(lines):
        got = analyzer.feed(line)
        if got:
            events.append((k, list(got)))
    return analyzer, events


def _in_batches(lines: list[str], size: int) -> tuple[LogAnalyzer, list[tuple[int, list[object]]]]:
    analyzer = LogAnalyzer()
    events: list[tuple[int, list[object]]] = []
    for start in range(0, len(lines), size):
        for k, got in analyzer.feed_lines(lines[start : start + size]):
            events.append((start + k, list(got)))
    return analyzer, events


_AFTER = [
    "(EngineCore_DP0 pid=1301) ERROR 12-01 11:00:00 [core.py:720] EngineCore encountered a fatal error.",
    "(EngineCore_DP0 pid=1301) Traceback (most recent call last):",
    '(EngineCore_DP0 pid=1301)   File "/opt/vllm/v1/engine/core.py", line 711, in run_engine_core',
    "(EngineCore_DP0 pid=1301)     engine_core.run_busy_loop()",
    "(EngineCore_DP0 pid=1301) RuntimeError: CUDA error: an illegal memory access was encountered",
    '{"MESSAGE": "INFO 12-01 11:00:01 [loggers.py:1] Engine 000: Avg prompt throughput: 1.0 tokens/s"}',
    "   ",
    'INFO:     10.0.0.5:53124 - "GET /v1/models HTTP/1.1" 200 OK \u2588',
    "after a hole" + "\x00" * 80 + "old process",
    "(APIServer pid=6) ERROR 12-01 11:00:02 [core.py:1] an old process's error",
]


@pytest.mark.parametrize("size", [1, 7, 500, 100_000])
@pytest.mark.parametrize("failure", [False, True])
def test_lines_in_batches_give_what_one_at_a_time_gives(size: int, failure: bool) -> None:
    """feed_lines (a follower's burst, screened in one pass once ready): the same events at the
    same lines, the same verdict, the same line count and last line, as feed line by line,
    through a runtime traceback, a JSON record, blank and non-ASCII lines and a NUL hole."""
    lines = [*serving_journal.journal("v1", "raw", 3000, failure=failure, startup_lines=300)]
    lines[1500:1500] = _AFTER[:5]
    lines += _AFTER
    one, one_events = _by_line(lines)
    batch, batch_events = _in_batches(lines, size)
    assert batch_events == one_events
    assert batch.diagnosis() == one.diagnosis()
    assert batch.finish(1) == one.finish(1)
    assert batch.finish(whole_log=True) == one.finish(whole_log=True)
    assert batch.work == one.work
    assert (batch._number, batch._last) == (one._number, one._last)


def test_request_lines_hold_no_after_ready_token() -> None:
    """A server's request lines (uvicorn's access line for the routes clients poll) hold none
    of any pack's after-ready tokens: rules whose longest string is in them ("model" of the
    banner's fact, " HTTP/1." of the proxy signature) are screened for another they need."""
    from bringup.core.after_ready import AfterReady
    from bringup.core.packs import common

    for engine in Engine:
        tokens = AfterReady(packs.get(engine)).tokens(True)
        assert tokens is not None
        for line in common.ROUTINE_LINES:
            assert not [t for t in tokens if t in line], (engine, line)


@pytest.mark.parametrize(
    ("pattern", "avoid", "strings"),
    [
        (r"[█▀▄]\s+model\s+(?P<m>\S+)", (), {"model"}),
        (r"[█▀▄]\s+model\s+(?P<m>\S+)", ("GET /v1/models",), {"█", "▀", "▄"}),
        (r"x[ab]y|model (?P<m>\S+)", ("model",), {"x", "model "}),
        (r'https?://\S+ "[A-Z]+ https?://\S* HTTP/1\.[01]"', ('"GET /x HTTP/1.1" 200',), {" http"}),
        (r"model", ("models",), {"model"}),  # nothing else is needed: kept
    ],
)
def test_required_strings_avoid_routine_lines(
    pattern: str, avoid: tuple[str, ...], strings: set[str]
) -> None:
    """With lines to avoid, the strings picked are ones those lines lack, where the pattern
    needs such (a class of a few characters counts then); else what it needs most."""
    import re

    from bringup.core.packs import index

    assert index.required(re.compile(pattern), avoid) == strings
