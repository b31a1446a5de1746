"""Where a followed server's log lines and its end come from.

A source delivers ``LineItem`` values as lines arrive and one ``ExitItem`` when the server
ends, through an ``emit`` callback that the supervisor's queue provides (thread-safe).

- ``ChildSource``: a server bringup starts (``bringup run``); the only source that may signal.
- ``FileSource``: ``--log FILE``, followed like ``tail -F`` (renames and truncation).
- ``PidSource``: ``--pid PID``, liveness through psutil; no log lines.
- ``UnitSource``: ``--unit NAME``: ``systemctl show`` and ``journalctl -u NAME -o json -f``
  of the current invocation, resumed after a reconnect with ``--after-cursor``.
- ``ContainerSource``: ``--container NAME``: ``docker inspect`` and ``docker logs -f --timestamps``.

The watch sources never signal the server; ``stop`` only ends bringup's own readers.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psutil

from bringup.adapters.commands import LocalRunner, Runner
from bringup.adapters.process import ChildProcess, decode_line, read_lines
from bringup.core import service
from bringup.errors import AdapterError, InputError


@dataclass(frozen=True, slots=True)
class LineItem:
    """One log line (``stream``: stdout, stderr, journal, log, docker)."""

    stream: str
    text: str


@dataclass(frozen=True, slots=True)
class LinesItem:
    """Several lines of one stream that arrived together, in order."""

    stream: str
    texts: list[str]


@dataclass(frozen=True, slots=True)
class ExitItem:
    """The server ended; ``code`` is its exit status when known (negative: killed by signal)."""

    code: int | None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class NoteItem:
    """Something the user should know about the source itself (a reconnect, say)."""

    text: str


Item = LineItem | LinesItem | ExitItem | NoteItem
Emit = Callable[[Any], None]


class Source(Protocol):
    """Lines and the end of one server."""

    description: str  # "pid 4242", "unit vllm.service", ...

    def start(self, emit: Emit) -> None:
        """Begin delivering items; raise BringupError when the source cannot be followed."""
        ...

    def stop(self, grace_seconds: float) -> None:
        """Stop following (and, for a server bringup started, stop the server)."""
        ...

    def command(self) -> list[str] | None:
        """The server's command line, when it can be known (for engine, host and port)."""
        ...


class ChildSource:
    """A server started by bringup, in its own process group."""

    def __init__(self, argv: Sequence[str], environ: Mapping[str, str]) -> None:
        self.argv = list(argv)
        self.environ = environ
        self.child: ChildProcess | None = None
        self.description = "server"

    def start(self, emit: Emit) -> None:
        self.child = ChildProcess.start(
            self.argv, environ=self.environ, on_lines=lambda s, ts: emit(LinesItem(s, ts))
        )
        self.description = f"pid {self.child.pid}"
        threading.Thread(
            target=self._wait, args=(self.child, emit), daemon=True, name="wait-child"
        ).start()

    @staticmethod
    def _wait(child: ChildProcess, emit: Emit) -> None:
        code = child.join()
        child.wait_output(2.0)  # deliver every line before the exit
        emit(ExitItem(code))

    def stop(self, grace_seconds: float) -> None:
        if self.child is not None:
            self.child.terminate(grace_seconds)

    def detach(self, log_path: str) -> None:
        """Leave the server running, its output going to ``log_path``."""
        if self.child is not None:
            self.child.detach(log_path)

    def command(self) -> list[str] | None:
        return self.argv


class _Stoppable:
    def __init__(self) -> None:
        self._stopped = threading.Event()

    def stop(self, grace_seconds: float) -> None:
        self._stopped.set()


class FileSource(_Stoppable):
    """A log file followed by name, like ``tail -F``: from its start, across renames and truncation."""

    def __init__(self, path: str, *, poll_seconds: float = 0.1) -> None:
        super().__init__()
        self.path = Path(path)
        self.poll_seconds = poll_seconds
        self.description = f"log {path}"

    def start(self, emit: Emit) -> None:
        if not self.path.exists():
            raise InputError(
                f"log file not found: {self.path}", hint="give the path the server writes to"
            )
        threading.Thread(target=self._follow, args=(emit,), daemon=True, name="follow-log").start()

    def command(self) -> list[str] | None:
        return None

    def _follow(self, emit: Emit) -> None:
        handle, inode, pending = None, None, b""
        while not self._stopped.is_set():
            if handle is None:
                with contextlib.suppress(OSError):
                    handle = self.path.open("rb")
                    inode = os.fstat(handle.fileno()).st_ino
                if handle is None:
                    self._stopped.wait(self.poll_seconds)
                    continue
            chunk = handle.read(65536)
            if chunk:
                pending = _emit_lines(pending + chunk, "log", emit)
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
    """Emit every complete line of ``data``; return the unfinished rest."""
    *lines, rest = data.split(b"\n")
    for raw in lines:
        emit(LineItem(stream, decode_line(raw)))
    return rest


class PidSource(_Stoppable):
    """A running process bringup did not start: only whether it is alive (never signalled)."""

    def __init__(self, pid: int, *, poll_seconds: float = 0.5) -> None:
        super().__init__()
        self.pid = pid
        self.poll_seconds = poll_seconds
        self.description = f"pid {pid}"
        self._process: psutil.Process | None = None

    def start(self, emit: Emit) -> None:
        try:
            self._process = psutil.Process(self.pid)
        except psutil.NoSuchProcess as exc:
            raise InputError(
                f"no process with pid {self.pid}", hint="check the pid with `ps -p PID`"
            ) from exc
        threading.Thread(target=self._watch, args=(emit,), daemon=True, name="watch-pid").start()

    def command(self) -> list[str] | None:
        try:
            return list(self._process.cmdline()) if self._process else None
        except psutil.Error:
            return None

    def _watch(self, emit: Emit) -> None:
        assert self._process is not None
        while not self._stopped.wait(self.poll_seconds):
            if not _running(self._process):
                emit(ExitItem(None, f"process {self.pid} is gone"))
                return


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


RECONNECT_ATTEMPTS = 6  # reader restarts in a row without a new line before giving up


def reconnect_delay_seconds(attempt: int) -> float:
    """Backoff before reconnect ``attempt`` (1, 2, ...): 0.5 s doubling, at most 10 s."""
    return float(min(0.5 * 2 ** max(attempt - 1, 0), 10.0))


class _Follower(_Stoppable):
    """Runs a long-lived reader command (``journalctl -f``, ``docker logs -f``) and restarts it.

    ``wrap`` turns the reader's argv into the one to run here (``ssh HOST -- ...`` for a
    remote host: a runner with ``streaming_argv``, such as ``SshRunner``, provides it).
    """

    def __init__(
        self, environ: Mapping[str, str], wrap: Callable[[list[str]], list[str]] | None = None
    ) -> None:
        super().__init__()
        self.environ = dict(environ)
        self.wrap = wrap
        self._popen: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def _spawn(self, argv: list[str]) -> subprocess.Popen[bytes]:
        argv = self.wrap(argv) if self.wrap is not None else argv
        try:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.environ,
            )
        except OSError as exc:
            raise AdapterError(
                f"cannot run `{argv[0]}`: {exc.strerror or exc}",
                hint=f"install {argv[0]} or put it on PATH",
            ) from exc
        with self._lock:
            self._popen = popen
        return popen

    def stop(self, grace_seconds: float) -> None:
        super().stop(grace_seconds)
        with self._lock:
            popen = self._popen
        if popen is not None and popen.poll() is None:
            popen.terminate()  # our own reader process, never the server
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(2.0)


class UnitSource(_Follower):
    """A systemd unit: its state from ``systemctl show``, its lines from the journal."""

    PROPERTIES = (
        "ActiveState,SubState,MainPID,InvocationID,ExecMainStatus,ExecMainCode,LoadState,ExecStart"
    )

    def __init__(
        self,
        unit: str,
        environ: Mapping[str, str],
        *,
        runner: Runner | None = None,
        poll_seconds: float = 1.0,
    ) -> None:
        super().__init__(environ, getattr(runner, "streaming_argv", None))
        self.unit = unit
        self.runner = runner or LocalRunner(environ)
        self.poll_seconds = poll_seconds
        self.description = f"unit {unit}"
        self.cursor: str | None = None
        self.invocation = ""
        self._state: dict[str, str] = {}

    def show(self) -> dict[str, str]:
        """``systemctl show NAME -p ...`` as a dict."""
        result = self.runner.run(["systemctl", "show", self.unit, f"--property={self.PROPERTIES}"])
        if result.returncode != 0:
            raise AdapterError(
                f"systemctl show {self.unit} failed: {result.stderr.strip() or result.returncode}"
            )
        return dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)

    def journal_argv(self) -> list[str]:
        """The journalctl command for the current invocation, resuming after the cursor."""
        argv = ["journalctl", "-u", self.unit, "-o", "json", "-f", "--no-tail"]
        if self.invocation:
            argv.append(f"_SYSTEMD_INVOCATION_ID={self.invocation}")
        if self.cursor:
            argv += ["--after-cursor", self.cursor]
        return argv

    def start(self, emit: Emit) -> None:
        self._state = self.show()
        if self._state.get("LoadState") == "not-found":
            raise InputError(
                f"unit {self.unit} not found", hint="check the name with `systemctl list-units`"
            )
        self.invocation = self._state.get("InvocationID", "")
        if not self.invocation and self._state.get("ActiveState") == "inactive":
            raise InputError(
                f"unit {self.unit} is not running",
                hint=f"start it: `systemctl start {self.unit}` or `bringup up {self.unit}`",
            )
        threading.Thread(
            target=self._read_journal, args=(emit,), daemon=True, name="journal"
        ).start()
        threading.Thread(
            target=self._poll_state, args=(emit,), daemon=True, name="unit-state"
        ).start()

    def command(self) -> list[str] | None:
        return _exec_start_argv(self._state.get("ExecStart", ""))

    def _read_journal(self, emit: Emit) -> None:
        failures = 0
        while not self._stopped.is_set():
            popen = self._spawn(self.journal_argv())
            assert popen.stdout is not None
            before = self.cursor
            for raw in iter(popen.stdout.readline, b""):
                self._entry(raw, emit)
            popen.wait()
            failures = 1 if self.cursor != before else failures + 1
            if failures > RECONNECT_ATTEMPTS:
                emit(
                    ExitItem(
                        None,
                        f"the journal of {self.unit} could not be read {RECONNECT_ATTEMPTS} times in a row (status {popen.returncode}); giving up",
                    )
                )
                return
            if self._stopped.wait(reconnect_delay_seconds(failures)):
                return
            emit(
                NoteItem(
                    f"journalctl ended (status {popen.returncode}); reconnected, resuming after the last entry"
                )
            )

    def _entry(self, raw: bytes, emit: Emit) -> None:
        try:
            entry = json.loads(raw)
        except ValueError:
            return
        if not isinstance(entry, dict):
            return
        self.cursor = entry.get("__CURSOR", self.cursor)
        message = journal_message(entry.get("MESSAGE"))
        if message is not None:
            for line in message.split("\n"):
                emit(LineItem("journal", line.removesuffix("\r")))

    def _poll_state(self, emit: Emit) -> None:
        while not self._stopped.wait(self.poll_seconds):
            try:
                state = self.show()
            except AdapterError as exc:
                emit(NoteItem(str(exc)))
                continue
            ended = (
                state.get("ActiveState") in ("failed", "inactive")
                or state.get("InvocationID", "") != self.invocation
            )
            if ended:
                self._stopped.wait(self.poll_seconds)  # let the journal deliver the last lines
                emit(
                    ExitItem(
                        _unit_exit_code(state),
                        f"unit {self.unit} is {state.get('ActiveState', '?')}",
                    )
                )
                return


def journal_message(value: Any) -> str | None:
    """A journal MESSAGE: a string, or an array of bytes when it was not valid UTF-8."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, int) for b in value):
        return bytes(b & 0xFF for b in value).decode("utf-8", errors="replace")
    return None


def _unit_exit_code(state: Mapping[str, str]) -> int | None:
    try:
        status = int(state.get("ExecMainStatus", ""))
    except ValueError:
        return None
    code = state.get("ExecMainCode", "")
    return -status if code in ("2", "3", "killed", "dumped") else status


def _exec_start_argv(text: str) -> list[str] | None:
    """``systemctl show -p ExecStart``'s value → the argv words (see core.service)."""
    words = service.exec_start_from_show(text)
    return None if words is None else [w for w in words if isinstance(w, str)]


class ContainerSource(_Follower):
    """A docker container: its state from ``docker inspect``, its lines from ``docker logs -f``."""

    def __init__(
        self, name: str, environ: Mapping[str, str], *, runner: Runner | None = None
    ) -> None:
        super().__init__(environ, getattr(runner, "streaming_argv", None))
        self.name = name
        self.runner = runner or LocalRunner(environ)
        self.description = f"container {name}"
        self.since: str | None = None  # timestamp of the last line seen
        self._seen_at_since = 0  # lines seen with exactly that timestamp
        self._inspect: dict[str, Any] = {}

    def inspect(self) -> dict[str, Any]:
        """``docker inspect NAME`` (the first object)."""
        result = self.runner.run(["docker", "inspect", self.name])
        if result.returncode != 0:
            raise InputError(
                f"no container {self.name}: {result.stderr.strip()}",
                hint="check the name with `docker ps -a`",
            )
        try:
            data = json.loads(result.stdout)
            return dict(data[0])
        except (ValueError, IndexError, KeyError, TypeError) as exc:
            raise AdapterError(f"docker inspect {self.name}: unexpected output") from exc

    def logs_argv(self) -> list[str]:
        """``docker logs -f --timestamps NAME``, from the last timestamp seen after a reconnect."""
        argv = ["docker", "logs", "-f", "--timestamps"]
        if self.since:
            argv += ["--since", self.since]
        return [*argv, self.name]

    def start(self, emit: Emit) -> None:
        self._inspect = self.inspect()
        threading.Thread(target=self._follow, args=(emit,), daemon=True, name="docker-logs").start()

    def command(self) -> list[str] | None:
        config = self._inspect.get("Config") or {}
        words = [*(config.get("Entrypoint") or []), *(config.get("Cmd") or [])]
        return [str(w) for w in words] or None

    def _follow(self, emit: Emit) -> None:
        while not self._stopped.is_set():
            popen = self._spawn(self.logs_argv())
            skip = {"n": self._seen_at_since, "ts": self.since}
            sink = functools.partial(self._line, skip=skip, emit=emit)
            readers = [
                threading.Thread(target=read_lines, args=(s, n, sink, None), daemon=True)
                for s, n in ((popen.stdout, "stdout"), (popen.stderr, "stderr"))
            ]
            for t in readers:
                t.start()
            for t in readers:
                t.join()
            popen.wait()
            if self._stopped.is_set():
                return
            state = self._state()
            if state is not None and not state.get("Running", False):
                emit(
                    ExitItem(
                        _int_or_none(state.get("ExitCode")),
                        f"container {self.name} is {state.get('Status', 'stopped')}",
                    )
                )
                return
            emit(NoteItem("docker logs ended; reconnecting from the last timestamp"))
            time.sleep(0.5)

    def _state(self) -> dict[str, Any] | None:
        try:
            return dict(self.inspect().get("State") or {})
        except (AdapterError, InputError):
            return None

    def _line(self, _stream: str, text: str, *, skip: dict[str, Any], emit: Emit) -> None:
        ts, _, message = text.partition(" ")
        with self._lock:
            if skip["ts"] is not None and ts < skip["ts"]:
                return  # delivered before the reconnect
            if ts == skip["ts"] and skip["n"] > 0:
                skip["n"] -= 1
                return
            if ts == self.since:
                self._seen_at_since += 1
            else:
                self.since, self._seen_at_since = ts, 1
        emit(LineItem("docker", message))


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
