"""``RemoteFileSource``: ``watch --log FILE --host H``, a remote log file followed over ssh."""

from __future__ import annotations

import re
import subprocess
import threading
from typing import IO

from bringup.adapters.process import decode_line
from bringup.adapters.sources.items import Emit, ExitItem, LineItem, NoteItem
from bringup.adapters.sources.reader import (
    RECONNECT_ATTEMPTS,
    ReaderCommand,
    reconnect_delay_seconds,
)
from bringup.adapters.ssh import SshRunner
from bringup.core.log_attempts import BackwardScan
from bringup.errors import InputError, RemoteError

SCAN_TIMEOUT_SECONDS = 120.0
SCAN_BYTES = 16 << 20  # the most of a remote log's end read (over ssh) to find its newest attempt
FIRST_SCAN_BYTES = 1 << 20  # the first read; each next one 4x as much

# $1 path, $2 bytes wanted at most: prints "INODE SIZE", then the file's last bytes up to SIZE
# (not what was appended since: the offset must be the one the size says)
_SCAN = """set -e
set -- "$1" "$2" $(stat -L -c '%i %s' "$1")
echo "$3 $4"
if [ "$4" -gt 0 ]; then
  start=$(( $4 > $2 ? $4 - $2 + 1 : 1 ))
  tail -c "+$start" "$1" | head -c $(( $4 - start + 1 ))
fi"""

# $1 path, $2 first byte wanted (1-based), $3 the inode followed so far (or ""). A different
# inode or a file shorter than the offset: rotated or truncated, so start at byte 1. Prints
# "INODE START" first ("- START" when the file is not there yet), then tail -F's bytes.
_TAIL = """i=$(stat -L -c %i "$1" 2>/dev/null || echo -); s=$(stat -L -c %s "$1" 2>/dev/null || echo 0)
b=$2
if { [ -n "$3" ] && [ "$i" != "$3" ]; } || [ "$s" -lt $(($2 - 1)) ]; then b=1; fi
echo "$i $b"
exec tail -c "+$b" -F "$1" 2>&1"""
_TAIL_NOTE = re.compile(
    r"^tail: .*(has been replaced|has appeared|file truncated|following new file)"
)


class RemoteFileSource(ReaderCommand):
    """``watch --log FILE --host H``: ``tail -c +OFFSET -F FILE`` over ssh, counting bytes.

    Only complete lines move the offset, so after a dropped connection the reader restarts at
    the first byte not yet delivered: no line is lost or repeated. Each connection first
    prints the file's inode and size; a different inode or a smaller size means the file was
    rotated or truncated meanwhile, and it is read from its start. Within a connection,
    ``tail -F``'s own notes (replaced, truncated) reset the offset the same way.

    Command line equivalent: ``ssh HOST -- tail -c +1 -F FILE``.
    """

    def __init__(self, path: str, runner: SshRunner, *, start: str = "newest") -> None:
        super().__init__({}, runner.streaming_argv)
        if start not in ("newest", "end", "beginning"):
            raise ValueError(f"start={start!r}")
        self.start_at = start
        self.path = path
        self.runner = runner
        self.description = f"log {path} on {runner.target}"
        self.offset_bytes = 0
        self.inode: str | None = None
        self.scanned_bytes = 0  # of the file's end, read over ssh to find where to begin

    def start(self, emit: Emit) -> None:
        if self.runner.run(["test", "-e", self.path]).returncode != 0:
            raise InputError(
                f"{self.runner.target}: log file not found: {self.path}",
                hint="give the path the server writes to on that host",
            )
        if self.start_at != "beginning":
            self._skip_to_start(emit)
        threading.Thread(target=self._follow, args=(emit,), daemon=True, name="remote-log").start()

    def _skip_to_start(self, emit: Emit) -> None:
        """Where following begins, as ``watch --log`` does on this machine: the file's end
        (``--from-end``), else the first line of the newest attempt in its last bytes: the
        last ``FIRST_SCAN_BYTES``, then 4x as many, up to ``SCAN_BYTES``, until those settle
        it (one ssh call each; ``scanned_bytes`` counts what came over)."""
        if self.start_at == "end":
            self._scan(0)
            emit(
                NoteItem(
                    f"following {self.path} on {self.runner.target} from its end (new lines only)"
                )
            )
            return
        want = FIRST_SCAN_BYTES
        while True:
            begin, data = self._scan(want)
            if begin:  # the first line was cut: start after it
                cut = data.find(b"\n") + 1 if b"\n" in data else len(data)
                begin, data = begin + cut, data[cut:]
            raw = data.split(b"\n")[:-1]  # complete lines only
            scan = BackwardScan()
            for r in reversed(raw):
                if scan.feed(decode_line(r)) and begin:
                    break  # settled; with the file's start here, go on to count
            if scan.start is not None or begin == 0 or want >= SCAN_BYTES:
                break
            want = min(SCAN_BYTES, want * 4)
        first = len(raw) - 1 - scan.start if scan.start is not None else 0
        attempts = scan.attempts
        self.offset_bytes = begin + sum(len(r) + 1 for r in raw[:first])
        if attempts > 1:
            held = f"{attempts} attempts" if begin == 0 else f"at least {attempts} attempts"
            emit(
                NoteItem(
                    f"{self.path} holds {held}: following the newest "
                    f"(its first {len(raw) - first} lines), not the earlier ones"
                )
            )

    def _scan(self, scan: int) -> tuple[int, bytes]:
        """The file's last ``scan`` bytes over ssh: (the offset they begin at, the bytes);
        sets the inode, and the offset to the file's end."""
        argv = ["sh", "-c", _SCAN, "sh", self.path, str(scan)]
        try:  # bytes, not text: the offset counts the file's own bytes
            done = subprocess.run(
                self.wrap(argv) if self.wrap is not None else argv,
                capture_output=True,
                env=self.environ,
                timeout=SCAN_TIMEOUT_SECONDS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RemoteError(f"{self.runner.target}: could not read {self.path}: {exc}") from exc
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", errors="replace").strip().splitlines() or [
                "no output"
            ]
            raise RemoteError(f"{self.runner.target}: could not read {self.path}: {said[-1]}")
        header, _, data = done.stdout.partition(b"\n")
        inode, _, size_text = header.decode("ascii", errors="replace").partition(" ")
        size = int(size_text or 0)
        self.inode = inode or None
        self.offset_bytes = size
        self.scanned_bytes += len(data)
        return size - len(data), data

    def command(self) -> list[str] | None:
        return None

    def tail_argv(self) -> list[str]:
        """The remote reader: says its inode and starting byte, then follows from there."""
        return ["sh", "-c", _TAIL, "sh", self.path, str(self.offset_bytes + 1), self.inode or ""]

    def _follow(self, emit: Emit) -> None:
        failures = 0
        while not self._stopped.is_set():
            popen = self._spawn(self.tail_argv())
            assert popen.stdout is not None
            delivered = self._read(popen.stdout, emit)
            popen.wait()
            failures = 1 if delivered else failures + 1
            if self._stopped.is_set():
                return
            if failures > RECONNECT_ATTEMPTS:
                emit(
                    ExitItem(
                        None,
                        f"lost {self.runner.target}: could not follow {self.path} "
                        f"{RECONNECT_ATTEMPTS} times in a row (ssh status {popen.returncode})",
                    )
                )
                return
            delay = reconnect_delay_seconds(failures)
            if self._stopped.wait(delay):
                return
            emit(
                NoteItem(
                    f"the connection to {self.runner.target} ended (status {popen.returncode}); "
                    f"reconnected after {delay:g}s, resuming {self.path} at byte {self.offset_bytes}"
                )
            )

    def _read(self, stream: IO[bytes], emit: Emit) -> bool:
        """Deliver complete lines; return whether any arrived."""
        header = stream.readline().decode("ascii", errors="replace").split()
        if len(header) == 2:
            self.inode = header[0] if header[0] != "-" else self.inode
            if header[1] == "1" and self.offset_bytes > 0:
                emit(
                    NoteItem(
                        f"{self.path} was rotated or truncated while disconnected; reading it from its start"
                    )
                )
                self.offset_bytes = 0
        delivered = False
        for raw in iter(stream.readline, b""):
            if not raw.endswith(b"\n"):
                break  # a partial last line: read again from its start after reconnecting
            text = decode_line(raw[:-1])
            if _TAIL_NOTE.match(text):
                self.offset_bytes = 0
                emit(NoteItem(f"{self.path} was rotated or truncated; following it from its start"))
                continue
            self.offset_bytes += len(raw)
            emit(LineItem("log", text))
            delivered = True
        return delivered
