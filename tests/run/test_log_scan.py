"""`watch --log` on a large existing log: the newest attempt is found by reading the file
backwards a chunk at a time, so a log with a short newest attempt at the end of many
megabytes of older ones is read only near its end. Counted in bytes read, not time."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from bringup.adapters.sources import logfile
from bringup.adapters.sources.items import LinesItem, NoteItem
from bringup.adapters.sources.logfile import FIRST_SCAN_BYTES, FileSource

BANNER = "(APIServer pid=6) INFO 11-30 09:47:00 [api_server.py:1] vLLM API server version 0.32.0"
LOADING = (
    "(EngineCore pid=9) INFO 11-30 09:50:03 [gpu_model_runner.py:4327] Starting to load model m..."
)
OOM = (
    "(EngineCore pid=7) ERROR 11-30 09:47:02 [core.py:700] torch.OutOfMemoryError: CUDA out of "
    "memory occurred when warming up sampler with 1024 dummy requests."
)
FILLER = "(EngineCore pid=7) INFO 11-30 09:47:01 [core.py:1] " + "x" * 60  # 112 bytes a line
MiB = 1 << 20


def _write(path: Path, *parts: tuple[str, int]) -> None:
    """Each part: a line repeated so many times."""
    with path.open("w") as f:
        for line, times in parts:
            f.write((line + "\n") * times)


def _scan(path: Path) -> tuple[FileSource, list[str], list[str]]:
    """Start following ``path``; the lines and notes of its newest attempt, then stop."""
    source = FileSource(str(path), poll_seconds=0.01)
    items: list[Any] = []
    got = threading.Event()

    def emit(item: Any) -> None:
        items.append(item)
        if isinstance(item, LinesItem) and "last" in item.texts:
            got.set()

    source.start(emit)
    assert got.wait(60), items[-3:]
    source.stop(0.0)
    lines = [t for i in items if isinstance(i, LinesItem) for t in i.texts]
    notes = [i.text for i in items if isinstance(i, NoteItem)]
    return source, lines, notes


def test_a_short_newest_attempt_reads_only_the_first_chunk(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    # 40 MiB of failed attempts, then the newest one: a few lines
    old = (40 * MiB) // (len(FILLER) + 1)
    _write(log, (BANNER, 1), (LOADING, 1), (FILLER, old), (OOM, 1), (BANNER, 1), (LOADING, 1),
           ("last", 1))  # fmt: skip
    assert log.stat().st_size > 40 * MiB
    source, lines, notes = _scan(log)
    assert lines == [BANNER, LOADING, "last"]
    assert source.scanned_bytes == FIRST_SCAN_BYTES  # before: the file's last 64 MiB
    want = f"{log} holds at least 2 attempts: following the newest (its first 3 lines), "
    assert notes == [want + "not the earlier ones"]


def test_a_longer_newest_attempt_reads_back_until_its_start(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    newest = (2 * MiB + MiB // 2) // (len(FILLER) + 1)  # 2.5 MiB: past chunks 1 and 2
    _write(log, (BANNER, 1), (LOADING, 1), (FILLER, (8 * MiB) // 113), (OOM, 1), (BANNER, 1),
           (LOADING, 1), (FILLER, newest), ("last", 1))  # fmt: skip
    source, lines, _ = _scan(log)
    assert lines[:2] == [BANNER, LOADING]
    assert len(lines) == newest + 3
    assert source.scanned_bytes == 3 * FIRST_SCAN_BYTES  # 1 MiB, then 2 MiB more


def test_one_long_attempt_reads_at_most_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logfile, "SCAN_BYTES", 3 * MiB)
    log = tmp_path / "one.log"
    _write(log, (BANNER, 1), (LOADING, 1), (FILLER, (6 * MiB) // 113), ("last", 1))
    source, lines, notes = _scan(log)
    assert source.scanned_bytes == 3 * MiB
    assert lines[-1] == "last"
    assert BANNER not in lines  # beyond the bound: followed from the first whole line in it
    assert notes == []


def test_a_small_log_is_read_whole_and_its_attempts_counted(tmp_path: Path) -> None:
    log = tmp_path / "small.log"
    _write(log, (BANNER, 1), (OOM, 1), (BANNER, 1), (OOM, 1), (BANNER, 1), ("last", 1))
    source, lines, notes = _scan(log)
    assert lines == [BANNER, "last"]
    assert source.scanned_bytes == log.stat().st_size
    assert notes[0].startswith(f"{log} holds 3 attempts: following the newest (its first 2 lines)")


def test_reading_backwards_gives_the_whole_forward_reading() -> None:
    """Many line sequences (start markers, a marker that reads like an error, progress,
    errors, neutral lines): ``BackwardScan`` fed from the end gives the start and the count
    that ``newest_attempt_start`` gives reading forward."""
    import random

    from bringup.core.log_attempts import BackwardScan, newest_attempt_start

    kinds = [BANNER, BANNER + " (error: none)", LOADING, OOM, FILLER, "plain text"]
    rng = random.Random(22)
    for _ in range(3000):
        lines = [rng.choice(kinds) for _ in range(rng.randint(1, 12))]
        first, attempts = newest_attempt_start(lines)
        scan = BackwardScan()
        for line in reversed(lines):
            scan.feed(line)
        got = len(lines) - 1 - scan.start if scan.start is not None else 0
        assert (got, scan.attempts) == (first, attempts), lines
