"""``RemoteFileSource``: ``watch --log FILE --host H``, a remote log file followed over ssh."""

from __future__ import annotations

import re
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
from bringup.errors import InputError

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

    def __init__(self, path: str, runner: SshRunner) -> None:
        super().__init__({}, runner.streaming_argv)
        self.path = path
        self.runner = runner
        self.description = f"log {path} on {runner.target}"
        self.offset_bytes = 0
        self.inode: str | None = None

    def start(self, emit: Emit) -> None:
        if self.runner.run(["test", "-e", self.path]).returncode != 0:
            raise InputError(
                f"{self.runner.target}: log file not found: {self.path}",
                hint="give the path the server writes to on that host",
            )
        threading.Thread(target=self._follow, args=(emit,), daemon=True, name="remote-log").start()

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
