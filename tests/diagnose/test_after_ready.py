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
