"""A whole log of any size, in pieces, into the analyzer: constant memory, binary skipped.

``analyzer.diagnose_bytes`` reads a log held in memory; a 2 GB log or a binary file given
by mistake must not be. :func:`diagnose_chunks` takes the bytes as they are read (any
piece sizes) and gives the same verdict as ``diagnose_bytes`` on the whole, holding at
most a few blocks:

- :class:`LineBlocks` cuts the stream into blocks of whole lines; a line longer than
  :data:`MAX_LINE_BYTES` is cut there (the analyzer reads no more of a line than that) and
  the rest of it dropped, so a file without a newline costs no memory.
- Until the engine is recognised, blocks are held (up to :data:`HOLD_BYTES`) and replayed
  once it is, so lines before the banner count as in the fast path; past that much text
  without a banner, the analyzer reads on without an engine (its generic tables).
- A block holding NUL bytes among many other control bytes is binary (an image, weights,
  compressed data): no engine writes it, so only the runs of text inside it (at least
  :data:`MIN_TEXT_RUN` bytes without a control byte: a log spliced into garbage) are read,
  found with a few C-speed passes over its bytes. A run of 64 NUL bytes (the hole a crash
  leaves) ends the log, as in the fast path; single NUL bytes in a text block (UTF-16) are
  dropped.

Pure: the caller reads the file (``bringup.adapters.files.iter_blocks``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator

from bringup.core import logline, packs
from bringup.core.analyzer import LogAnalyzer, detect_engine
from bringup.core.diagnosis import Diagnosis
from bringup.core.packs.types import Pack
from bringup.core.vocab import Engine

MAX_LINE_BYTES = 1 << 20  # logline.parse reads 65,536 characters of a line at most
BLOCK_BYTES = 8 << 20  # read at a time by read_blocks
HOLD_BYTES = 32 << 20  # the engine's banner comes in the first kilobytes of a real log
BINARY_CONTROL_SHARE = 0.01  # of a block's bytes: text logs have none, random bytes ~8 %
MIN_TEXT_RUN = 256  # inside binary, a run this long without control bytes is read as text
NUL_HOLE = b"\0" * 64  # a hole a crash leaves in a file (as the analyzer reads it)
# control bytes no text log holds (tab, newlines, form feed, CR and ESC are not among them)
_CONTROLS = frozenset([0, *range(0x01, 0x09), *range(0x0E, 0x1B), 0x1C, 0x1D, 0x1E, 0x1F])
_CONTROL_BYTES = bytes(sorted(_CONTROLS - {0}))  # NUL is counted apart: a hole is not binary
SAMPLE_BYTES = 64 * 1024
_MASK = bytes(0 if b in _CONTROLS else 0x61 for b in range(256))  # control -> NUL, else "a"
_RUN = b"a" * MIN_TEXT_RUN


class LineBlocks:
    """Cut a byte stream into blocks that end at a newline (the last may not)."""

    def __init__(self, max_line: int = MAX_LINE_BYTES) -> None:
        self.max_line = max_line
        self._carry = b""
        self._skipping = False  # inside an over-long line: drop up to its newline

    def push(self, data: bytes) -> bytes:
        """The whole lines completed by ``data`` (b"" when none is)."""
        if self._skipping:
            end = data.find(b"\n")
            if end == -1:
                return b""
            data, self._skipping = data[end + 1 :], False
        buf = self._carry + data if self._carry else data
        last = buf.rfind(b"\n")
        if last == -1:
            self._carry = b""
            return self._cut(buf) if len(buf) > self.max_line else self._keep(buf)
        rest = buf[last + 1 :]
        if len(rest) > self.max_line:
            self._carry = b""
            return buf[: last + 1] + self._cut(rest)
        self._carry = rest
        return buf[: last + 1]

    def end(self) -> bytes:
        """The partial last line, if any (a line without a newline still counts)."""
        tail, self._carry = self._carry, b""
        return tail

    def take(self, buf: bytearray) -> bytearray:
        """:meth:`push` for a buffer that already starts with the carried line (see
        :meth:`carried`) and that the caller gives up: the block is cut out of it in place,
        without a copy; empty when no line is complete."""
        if self._skipping:  # the carried line was cut: nothing was carried
            end = buf.find(b"\n")
            if end == -1:
                return bytearray()
            del buf[: end + 1]  # at the front of a bytearray: no copy
            self._skipping = False
        last = buf.rfind(b"\n")
        if last == -1:
            if len(buf) > self.max_line:
                return self._cut_in_place(buf, 0)
            self._carry = bytes(buf)
            return bytearray()
        if len(buf) - last - 1 > self.max_line:
            return self._cut_in_place(buf, last + 1)
        self._carry = bytes(buf[last + 1 :])
        del buf[last + 1 :]
        return buf

    def carried(self) -> bytes:
        """The partial line the next bytes continue (:meth:`take`'s buffer starts with it)."""
        return self._carry

    def _cut_in_place(self, buf: bytearray, start: int) -> bytearray:
        """The over-long line from ``start`` cut at ``max_line``; its rest is skipped."""
        self._carry, self._skipping = b"", True
        del buf[start + self.max_line :]
        buf += b"\n"
        return buf

    def _cut(self, line: bytes) -> bytes:
        self._skipping = True
        return line[: self.max_line] + b"\n"

    def _keep(self, buf: bytes) -> bytes:
        self._carry = buf
        return b""


def blocks_of(chunks: Iterable[bytes], max_line: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """Blocks of whole lines from chunks of any size (see :class:`LineBlocks`)."""
    cutter = LineBlocks(max_line)
    for chunk in chunks:
        block = cutter.push(chunk)
        if block:
            yield block
    tail = cutter.end()
    if tail:
        yield tail


def read_blocks(
    readinto: Callable[[memoryview], int],
    block_bytes: int = BLOCK_BYTES,
    max_line: int = MAX_LINE_BYTES,
) -> Iterator[bytes]:
    """The blocks :func:`blocks_of` cuts, read with ``readinto`` (a file's: fills the view it is
    given, returns how much, 0 at the end) straight into each block after the line carried from
    the one before: the bytes are copied once, from the file, where reading pieces and cutting
    them copies each block twice more (joining the carried line, cutting at the last newline).
    The blocks are ``bytearray`` objects, each new (the caller may keep them)."""
    cutter = LineBlocks(max_line)
    while True:
        carry = cutter.carried()
        block = bytearray(len(carry) + block_bytes)
        block[: len(carry)] = carry
        got = len(carry)
        with memoryview(block) as view:
            while got < len(block) and (n := readinto(view[got:])):
                got += n
        del block[got:]
        if got == len(carry):  # the end
            tail = cutter.end()
            if tail:
                yield tail
            return
        cut = cutter.take(block)
        if cut:
            yield cut  # type: ignore[misc]  # a bytearray: it has all the readers use of bytes


def is_binary(block: bytes) -> bool:
    """True for binary data: NUL bytes and more than 1 % other control bytes."""
    return _mask(block) is not None


def _mask(block: bytes) -> bytes | None:
    """For a binary block, its mask (control bytes NUL, the rest ``a``); None for text.

    Decided on a sample (the block's first 64 KiB): a mostly-text block taken for binary
    still has its text read, as the runs of text in it.
    """
    if b"\0" not in block:  # one memchr pass: text logs stop here
        return None
    sample = block[:SAMPLE_BYTES]
    controls = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
    if controls <= BINARY_CONTROL_SHARE * len(sample):
        return None
    return block.translate(_MASK)


def text_runs(block: bytes, mask: bytes) -> list[tuple[int, int]]:
    """(start, end) of every run of at least MIN_TEXT_RUN bytes without a control byte."""
    runs = []
    pos = 0
    while (start := mask.find(_RUN, pos)) != -1:
        end = mask.find(b"\0", start + MIN_TEXT_RUN)
        end = len(mask) if end == -1 else end
        runs.append((start, end))
        pos = end
    return runs


class _Feed:
    """The state of one streamed diagnosis."""

    def __init__(self, engine: Engine | None, hold_bytes: int) -> None:
        self.pack: Pack | None = packs.get(engine) if engine is not None else None
        self.analyzer: LogAnalyzer | None = (
            LogAnalyzer(self.pack.engine) if self.pack is not None else None
        )
        self.tokens = tuple(t for p in packs.declared() for t in p.detect)
        self.full = False  # JSON records hide their text: every line is read
        self.started = False
        self.held: deque[tuple[int, bytes]] = deque()
        self.held_bytes = 0
        self.hold_bytes = hold_bytes
        self.next_line = 1
        self.last_text: tuple[int, bytes] | None = None  # the last block that is not blank
        self.ended = False

    def block(self, data: bytes) -> None:
        hole = data.find(NUL_HOLE)
        if hole >= 0:  # an older process's lines follow the hole: the log ends there
            data, self.ended = data[:hole], True
        first = self.next_line
        self.next_line += data.count(b"\n")
        if not data.endswith(b"\n"):
            self.next_line += 1
        mask = _mask(data)
        if mask is not None:  # binary: read only the runs of text inside it
            for start, end in text_runs(data, mask):
                self._text(first + data.count(b"\n", 0, start), data[start:end] + b"\n")
            return
        self._text(first, data)

    def _text(self, first: int, data: bytes) -> None:
        if b"\0" in data:
            data = data.replace(b"\0", b"")
        if not self.started:
            self.started = True
            self.full = logline.needs_full_read(data[:4096])
        if not self.full and logline.has_any(data, logline.FULL_READ_MARKS):
            self.full = True
        if not data.isspace():  # stops at the first byte that is not blank
            self.last_text = (first, data)
        if self.analyzer is None:
            hit = logline.find_first(data, self.tokens)
            if hit is None:
                self._hold(first, data)
                return
            self.pack = detect_engine(hit[1])
            self._start()
        self._read(first, data)

    def _hold(self, first: int, data: bytes) -> None:
        self.held.append((first, data))
        self.held_bytes += len(data)
        if self.held_bytes > self.hold_bytes:  # no banner yet: read on without an engine
            self._start()

    def _start(self) -> None:
        self.analyzer = LogAnalyzer(self.pack.engine if self.pack is not None else None)
        held, self.held, self.held_bytes = self.held, deque(), 0
        for first, data in held:
            self._read(first, data)

    def _read(self, first: int, data: bytes) -> None:
        analyzer = self.analyzer
        assert analyzer is not None
        pack = self.pack
        full = pack is None or pack.screen is None or self.full
        analyzer.read_block(data, first, None if full or pack is None else pack.screen)

    def finish(self) -> Diagnosis:
        if self.analyzer is None:  # no line names an engine: every line is read as is
            self._start()
        assert self.analyzer is not None
        if self.last_text is not None:
            first, data = self.last_text
            last = logline.last_line(data)
            if last is not None:
                self.analyzer.note_last(first + last[0] - 1, last[1])
        return self.analyzer.finish(whole_log=True)


def diagnose_chunks(
    chunks: Iterable[bytes],
    engine: Engine | None = None,
    *,
    hold_bytes: int = HOLD_BYTES,
    max_line: int = MAX_LINE_BYTES,
) -> Diagnosis:
    """The verdict on a log read in pieces: ``diagnose_bytes`` without holding it whole."""
    return diagnose_blocks(blocks_of(chunks, max_line), engine, hold_bytes=hold_bytes)


def diagnose_blocks(
    blocks: Iterable[bytes], engine: Engine | None = None, *, hold_bytes: int = HOLD_BYTES
) -> Diagnosis:
    """:func:`diagnose_chunks` of blocks already cut at line ends (:func:`read_blocks`)."""
    feed = _Feed(engine, hold_bytes)
    for block in blocks:
        feed.block(block)
        if feed.ended:
            break
    return feed.finish()
