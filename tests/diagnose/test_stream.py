"""diagnose in pieces (core/logfeed): the verdict of the whole-buffer fast path, in constant
memory; binary blocks skipped, over-long lines cut, NUL holes and UTF-16 read."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from bringup.core.analyzer import diagnose_bytes
from bringup.core.logfeed import LineBlocks, blocks_of, diagnose_chunks, is_binary, read_blocks
from bringup.core.vocab import Engine

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
CORPUS = Path(os.environ.get("BRINGUP_CORPUS", "/work/shared/corpus/logs"))
FIXTURES = sorted(p for p in LOGS.rglob("*.log"))


def _pieces(data: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out, pos = [], 0
    while pos < len(data):
        n = rng.choice((1, 7, 100, 4096, 65536))
        out.append(data[pos : pos + n])
        pos += n
    return out


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_pieces_give_the_whole_buffer_verdict(path: Path) -> None:
    """Every fixture log, cut into pieces of random sizes, gives diagnose_bytes's verdict."""
    data = path.read_bytes()
    assert diagnose_chunks(_pieces(data, len(data))) == diagnose_bytes(data)


def test_the_real_corpus_gives_the_whole_buffer_verdict() -> None:
    """The 161 real logs (read from the shared corpus, never copied here), in 4 KiB pieces."""
    logs = sorted(CORPUS.rglob("*.log")) if CORPUS.is_dir() else []
    if not logs:
        pytest.skip(f"the real-log corpus is not at {CORPUS} (set BRINGUP_CORPUS)")
    for path in logs:
        data = path.read_bytes()
        pieces = [data[i : i + 4096] for i in range(0, len(data), 4096)]
        assert diagnose_chunks(pieces) == diagnose_bytes(data), path.name


def test_line_blocks_keep_lines_whole_and_cut_overlong_ones() -> None:
    assert list(blocks_of([b"ab", b"c\nde", b"f\ng", b"h"])) == [b"abc\n", b"def\n", b"gh"]
    cut = list(blocks_of([b"x" * 10, b"y" * 10, b"z\nnext\n"], max_line=8))
    assert cut == [b"xxxxxxxx\n", b"next\n"]  # one line, cut at 8 bytes, the rest dropped
    blocks = LineBlocks(max_line=4)
    assert blocks.push(b"ab\ncdefgh") == b"ab\ncdef\n"
    assert blocks.push(b"ij\nk") == b""
    assert blocks.end() == b"k"


def _readinto(data: bytes, most: int):  # type: ignore[no-untyped-def]
    """A file's readinto over ``data`` that gives at most ``most`` bytes a call (a pipe)."""
    pos = 0

    def readinto(view: memoryview) -> int:
        nonlocal pos
        n = min(len(view), most, len(data) - pos)
        view[:n] = data[pos : pos + n]
        pos += n
        return n

    return readinto


@pytest.mark.parametrize("block", [1, 3, 8, 9, 64, 1 << 20])
@pytest.mark.parametrize("most", [1, 5, 1 << 20])
def test_blocks_read_into_their_buffers_are_the_blocks_cut_from_pieces(
    block: int, most: int
) -> None:
    """read_blocks (one copy, from the file) cuts what blocks_of cuts from pieces of the same
    size (as the file was read before): the same blocks, a partial line over max_line cut
    there and its rest dropped, a last line without a newline, whatever each read returns."""
    rng = random.Random(block * 31 + most)
    for data in [
        b"",
        b"\n",
        b"ab\ncdefgh",
        b"x" * 30 + b"\nnext\n" + b"y" * 9,
        b"".join(
            rng.choice([b"a", b"bb\n", b"\n", b"c" * 20, b"d" * 7 + b"\n"]) for _ in range(300)
        ),
    ]:
        for max_line in (4, 8, 1 << 20):
            pieces = [data[i : i + block] for i in range(0, len(data), block)]
            want = list(blocks_of(pieces, max_line))
            got = list(read_blocks(_readinto(data, most), block, max_line))
            assert got == want, (data, max_line)


def test_binary_is_skipped_and_the_log_after_it_read() -> None:
    """A log behind 4 MiB of random bytes is found as if the garbage were not there."""
    log = (LOGS / "vllm_0.33_minimax_sampler_oom.log").read_bytes()
    garbage = random.Random(3).randbytes(4 << 20)
    assert is_binary(garbage)
    assert not is_binary(log)
    d = diagnose_chunks(_pieces(garbage + b"\n" + log, 1))
    alone = diagnose_bytes(log)
    assert d.failure is not None
    assert alone.failure is not None
    assert (d.failure.failure_class, d.failure.line) == (
        alone.failure.failure_class,
        alone.failure.line,
    )
    assert d.failure.line_number == alone.failure.line_number + garbage.count(b"\n") + 1


def test_a_file_without_newlines_and_pure_garbage() -> None:
    d = diagnose_chunks([b"A" * (1 << 20)] * 8)  # 8 MiB, one line
    assert d.failure is None
    assert d.outcome.value == "incomplete"
    assert diagnose_chunks([random.Random(5).randbytes(1 << 20)]).engine is None


def test_a_nul_hole_ends_the_log_and_utf16_is_read_as_text() -> None:
    """What follows a crash's NUL hole is an older process's (as in the fast path); UTF-16
    (a PowerShell redirect) reads as text."""
    log = (LOGS / "vllm_0.33_port_in_use.log").read_bytes()
    want = diagnose_bytes(log).failure
    assert want is not None
    holed = log + b"\0" * 4096 + (LOGS / "vllm_0.33_ok_tp1.log").read_bytes()
    assert diagnose_chunks(_pieces(holed, 4)) == diagnose_bytes(holed)
    failure = diagnose_chunks(_pieces(holed, 4)).failure
    assert failure is not None
    assert failure.failure_class == want.failure_class
    utf16 = diagnose_chunks([b"\xff\xfe" + log.decode().encode("utf-16-le")]).failure
    assert utf16 is not None
    assert utf16.failure_class == want.failure_class


def test_engine_found_after_the_hold_window_still_counts() -> None:
    """More noise than is held before the banner: the failure after it is still found."""
    log = (LOGS / "vllm_0.33_port_in_use.log").read_bytes()
    noise = b"".join(b"noise line %d from another service\n" % i for i in range(20_000))
    d = diagnose_chunks(_pieces(noise + log, 2), hold_bytes=64 * 1024)
    want = diagnose_bytes(log).failure
    assert d.failure is not None
    assert want is not None
    assert d.failure.failure_class == want.failure_class
    assert d.failure.line_number == want.line_number + 20_000


def test_given_engine_on_garbage() -> None:
    data = random.Random(9).randbytes(2 << 20)
    assert diagnose_chunks([data], Engine.VLLM).failure is None
