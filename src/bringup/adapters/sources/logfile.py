"""``FileSource``: a log file followed by name, like ``tail -F``: from the newest attempt the
file holds (``core.log_attempts``), or from its end (``start="end"``)."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any

from bringup.adapters import files
from bringup.adapters.process import decode_line
from bringup.adapters.sources.items import Emit, LineItem, LinesItem, NoteItem, Stoppable
from bringup.core.log_attempts import BackwardScan
from bringup.errors import BringupError, InputError

SCAN_BYTES = 64 << 20  # the most of an existing log read (backwards) to find its newest attempt
FIRST_SCAN_BYTES = 1 << 20  # the first chunk read from its end; each next one twice as big
MAX_LINE_BYTES = 1 << 20  # the analyzer reads 65,536 characters of a line at most
_BATCH_LINES = 4096  # lines of the newest attempt emitted as one item
HINT = "give the log file the server writes to (a pipe: `... | bringup diagnose -`)"


class FileSource(Stoppable):
    """A log file followed by name, like ``tail -F``: from its start, across renames and truncation."""

    def __init__(self, path: str, *, poll_seconds: float = 0.1, start: str = "newest") -> None:
        super().__init__()
        if start not in ("newest", "end", "beginning"):
            raise ValueError(f"start={start!r}")
        self.path = Path(path)
        self.poll_seconds = poll_seconds
        self.start_at = start
        self.description = f"log {path}"
        self.scanned_bytes = 0  # read from the end of the existing file to find where to begin

    def start(self, emit: Emit) -> None:
        if not os.path.lexists(self.path):
            raise InputError(
                f"log file not found: {files.shown(self.path)}",
                hint="give the path the server writes to",
            )
        # a FIFO, device, folder or unreadable file is one line now, not a silent wait
        files.open_file(self.path, what="log file", hint=HINT).close()
        threading.Thread(target=self._follow, args=(emit,), daemon=True, name="follow-log").start()

    def command(self) -> list[str] | None:
        return None

    def _skip_to_start(self, handle: Any, emit: Emit) -> bytes:
        """Position ``handle`` where following begins; the lines of the newest attempt that
        are already there are emitted. Returns the unfinished last line."""
        size = os.fstat(handle.fileno()).st_size
        if self.start_at == "end":
            handle.seek(size)
            emit(NoteItem(f"following {files.shown(self.path)} from its end (new lines only)"))
            return b""
        if self.start_at == "beginning":
            return b""
        lines, rest, attempts, whole = self._scan_back(handle, size)
        if attempts > 1:
            held = f"{attempts} attempts" if whole else f"at least {attempts} attempts"
            emit(
                NoteItem(
                    f"{files.shown(self.path)} holds {held}: following the newest "
                    f"(its first {len(lines)} lines), not the earlier ones"
                )
            )
        for start in range(0, len(lines), _BATCH_LINES):
            emit(LinesItem("log", lines[start : start + _BATCH_LINES]))
        return rest

    def _scan_back(self, handle: Any, size: int) -> tuple[list[str], bytes, int, bool]:
        """Read the file backwards from ``size``, a chunk at a time (``FIRST_SCAN_BYTES``,
        then twice as much each time, at most ``SCAN_BYTES`` in all), each line once, until
        ``BackwardScan`` settles where the newest attempt begins. Returns its complete lines
        in order, the unfinished last line, the attempts seen, and whether the whole file was
        read (then that count is the file's). Beyond the bound, the lines from the first whole
        one in it. ``scanned_bytes`` counts what was read."""
        scan = BackwardScan()
        found: list[bytes] = []  # complete lines, last first
        pos, chunk, carry, rest = size, FIRST_SCAN_BYTES, b"", None
        floor = max(0, size - SCAN_BYTES)
        while True:
            start = max(floor, pos - chunk)
            handle.seek(start)
            parts = (handle.read(pos - start) + carry).split(b"\n")
            self.scanned_bytes = size - start
            pos, chunk = start, chunk * 2
            if rest is None:
                rest = parts.pop()  # after the last newline: a line still being written
            carry = parts.pop(0) if pos and parts else b""  # its start is in the next chunk
            for raw in reversed(parts):
                if scan.feed(decode_line(raw)) and pos:
                    break  # settled; with the file's start in this chunk, go on to count
                found.append(raw)
            else:
                if pos == floor or not pos:
                    break
                continue
            found.append(raw)
            break
        handle.seek(size)
        keep = found if scan.start is None else found[: scan.start + 1]
        return [decode_line(r) for r in reversed(keep)], rest or b"", scan.attempts, not pos

    def _follow(self, emit: Emit) -> None:
        handle, inode, pending = None, None, b""
        first_open = True
        while not self._stopped.is_set():
            if handle is None:
                with contextlib.suppress(BringupError):  # gone, or replaced by a FIFO
                    handle = files.open_file(self.path, what="log file")
                    inode = os.fstat(handle.fileno()).st_ino
                if handle is None:
                    self._stopped.wait(self.poll_seconds)
                    continue
                if first_open:
                    first_open = False
                    pending = self._skip_to_start(handle, emit)
            try:
                chunk = handle.read(65536)
            except OSError:
                chunk = b""
            if chunk:
                pending = _emit_lines(pending + chunk, "log", emit)
                if len(pending) > MAX_LINE_BYTES:  # no newline in sight: cut the line there
                    emit(LineItem("log", decode_line(pending[:MAX_LINE_BYTES])))
                    pending = b""
                continue
            moved, truncated = self._changed(handle, inode)
            if moved or truncated:
                if pending:
                    emit(LineItem("log", decode_line(pending)))
                pending = b""
                if moved:
                    handle.close()
                    handle = None
                else:
                    handle.seek(0)
                continue
            self._stopped.wait(self.poll_seconds)
        if handle is not None:
            handle.close()

    def _changed(self, handle: Any, inode: int | None) -> tuple[bool, bool]:
        try:
            st = self.path.stat()
        except OSError:
            return False, False  # renamed away, not yet recreated: keep reading the old one
        if st.st_ino != inode:
            return True, False
        return False, st.st_size < handle.tell()


def _emit_lines(data: bytes, stream: str, emit: Emit) -> bytes:
    """Emit the complete lines of ``data`` as one item (the follower reads them as one batch);
    return the unfinished rest."""
    *lines, rest = data.split(b"\n")
    if lines:
        emit(LinesItem(stream, [decode_line(raw) for raw in lines]))
    return rest
