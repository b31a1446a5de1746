"""``bringup COMMAND --host [user@]server[:port] ...``: run a file-based command on the remote host.

``verify``, ``plan``, ``guard``, ``diagnose``, ``unit`` and ``run`` read files, GPUs and
processes of the machine they run on, so with ``--host`` bringup runs *itself* there::

    ssh [-tt] ... user@server -- [sudo -n] bringup COMMAND ARGS...

The remote flags (``--host``, ``--accept-new-host-key``, ``--sudo``, ``--remote-bringup
PATH``) are taken out of the arguments before the first ``--`` only (after it they belong
to the server command). Standard streams pass through and the remote exit code is bringup's.
ssh's own failures (unknown host key, authentication, connection) are one line naming the
host, found by a first ``true`` over the same ControlMaster connection the command then uses.

``run`` gets a remote terminal (``-tt``): stopping the local bringup sends Ctrl-C through it
(the remote bringup stops the server, prints its verdict, exits 130) and, if that does not end
it within the grace, closes the connection, which hangs up (SIGHUP) the remote bringup; that
too stops the server.

Command line equivalent: ``ssh user@server -- bringup verify /models/llama``.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, TextIO

from bringup.adapters.process import decode_line
from bringup.adapters.sources import (
    RECONNECT_ATTEMPTS,
    Emit,
    ExitItem,
    LineItem,
    NoteItem,
    _Follower,
    reconnect_delay_seconds,
)
from bringup.adapters.ssh import SSH_EXIT_ERROR, SshRunner, SshTarget, ssh_argv, target_from
from bringup.errors import InputError, RemoteError, UsageError

STOP_GRACE_SECONDS = (
    30.0  # after Ctrl-C is sent, how long the remote bringup has to stop its server
)
NOT_FOUND = 127

# $1 message, $2 bringup, $3 "sudo" or "", $4 "" (exec), "tty" or "raw" (run), then the arguments.
# For run, bringup writes into a FIFO drained by a relay that outlives a hangup, so a closed
# connection never makes its writes fail while it stops the server; the shell passes INT, HUP
# and TERM on to it and exits with its status. "raw": no local terminal, so give the remote one
# sane modes (^C is intr) without echo.
_LAUNCH = """m=$1; b=$2; s=$3; r=$4; shift 4
command -v "$b" >/dev/null 2>&1 || { printf '%s\\n' "$m" >&2; exit 127; }
if [ -n "$s" ]; then set -- sudo -n "$b" "$@"; else set -- "$b" "$@"; fi
[ -z "$r" ] && exec "$@"
[ "$r" = raw ] && stty sane -echo 2>/dev/null
d=$(mktemp -d) && mkfifo "$d/o" || exit 70
(trap '' INT HUP TERM; cat; cat >/dev/null) <"$d/o" &
"$@" >"$d/o" 2>&1 </dev/null &
p=$!
for g in INT HUP TERM; do trap "kill -$g $p 2>/dev/null" $g; done
while :; do wait $p; c=$?; kill -0 $p 2>/dev/null || break; done
wait; rm -rf "$d"; exit $c"""


@dataclass(frozen=True, slots=True)
class RemoteCall:
    """Where and how to run bringup remotely, and the command's own arguments."""

    host: str
    accept_new_host_key: bool
    sudo: bool
    remote_bringup: str
    args: tuple[str, ...]  # the command's arguments with the remote flags taken out


def split_remote_flags(args: Sequence[str]) -> RemoteCall | None:
    """Take the remote flags out of ``args`` (before the first ``--``); None without ``--host``."""
    args = list(args)
    end = args.index("--") if "--" in args else len(args)
    head, tail = args[:end], args[end:]
    values: dict[str, str | None] = {"--host": None, "--remote-bringup": None}
    switches = {"--accept-new-host-key": False, "--sudo": False}
    rest: list[str] = []
    i = 0
    while i < len(head):
        word = head[i]
        name, eq, inline = word.partition("=")
        if name in values:
            if not eq and i + 1 >= len(head):
                raise UsageError(f"{name} needs a value", hint="e.g. --host ops@gpu1")
            values[name] = inline if eq else head[i + 1]
            i += 1 if eq else 2
            continue
        if word in switches:
            switches[word] = True
        else:
            rest.append(word)
        i += 1
    if values["--host"] is None:
        if any(switches.values()) or values["--remote-bringup"] is not None:
            raise UsageError("--accept-new-host-key, --sudo and --remote-bringup need --host")
        return None
    return RemoteCall(
        values["--host"],
        switches["--accept-new-host-key"],
        switches["--sudo"],
        values["--remote-bringup"] or "bringup",
        tuple(rest + tail),
    )


def remote_argv(call: RemoteCall, command: str, target: SshTarget, *, mode: str = "") -> list[str]:
    """The remote command: a small ``sh`` launcher that checks bringup is installed, then execs it."""
    message = (
        f"bringup: error: {target}: `{call.remote_bringup}` is not installed there (install "
        "bringup on the remote host, or give its path with --remote-bringup PATH)"
    )
    return [
        "sh",
        "-c",
        _LAUNCH,
        "sh",
        message,
        call.remote_bringup,
        "sudo" if call.sudo else "",
        mode,
        command,
        *call.args,
    ]


def add_remote_arguments(parser: argparse.ArgumentParser) -> None:
    """The remote flags, for ``--help`` (they are taken out before parsing)."""
    group = parser.add_argument_group("remote host (bringup runs there, over ssh)")
    group.add_argument(
        "--host",
        metavar="[USER@]SERVER[:PORT]",
        help="run this command on SERVER (bringup must be installed there)",
    )
    group.add_argument(
        "--accept-new-host-key",
        action="store_true",
        help="trust SERVER's host key on first use (never a changed one)",
    )
    group.add_argument(
        "--sudo",
        action="store_true",
        help="run it there with `sudo -n` (never prompts for a password)",
    )
    group.add_argument(
        "--remote-bringup",
        metavar="PATH",
        help="the bringup executable there (default: bringup on PATH)",
    )


def forward(
    command: str,
    call: RemoteCall,
    *,
    stdin: TextIO,
    stdout: TextIO,
    stderr: TextIO,
    environ: Mapping[str, str],
) -> int:
    """Run ``bringup COMMAND`` on the remote host; return its exit code."""
    target = target_from(call.host, accept_new_host_key=call.accept_new_host_key, environ=environ)
    runner = SshRunner(target)
    runner.run(
        ["true"], timeout_seconds=target.connect_timeout_seconds + 20
    )  # ssh failures: one line
    is_run = command == "run"
    local_tty = is_run and _is_tty(stdin)
    mode = ("tty" if local_tty else "raw") if is_run else ""
    argv = ssh_argv(target, remote_argv(call, command, target, mode=mode), tty=is_run)
    try:
        proc = subprocess.Popen(
            argv,
            stdin=_stdin_for(stdin, is_run=is_run, local_tty=local_tty),
            stdout=_fd_or_pipe(stdout),
            stderr=_fd_or_pipe(stderr),
        )
    except OSError as exc:
        raise RemoteError(
            "the `ssh` client is not installed here", hint="install openssh-client"
        ) from exc
    copiers = [_copy(proc.stdout, stdout), _copy(proc.stderr, stderr)]
    with _stopping(proc, interrupt=is_run and not local_tty):
        code = proc.wait()
    for t in copiers:
        if t is not None:
            t.join(5.0)
    if code < 0:
        return 128 - code  # our ssh client was killed by a signal
    if code == NOT_FOUND:
        return NOT_FOUND
    if code == SSH_EXIT_ERROR:
        stderr.write(
            f"bringup: error: {target}: the connection ended (ssh exit 255) while running "
            f"`bringup {command}` there\n"
        )
    return code


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def _has_fd(stream: TextIO) -> bool:
    try:
        stream.fileno()
    except (AttributeError, ValueError, OSError):
        return False
    return True


def _fd_or_pipe(stream: TextIO) -> int:
    """Inherit a real file descriptor; otherwise (a StringIO in tests) copy through a pipe."""
    if _has_fd(stream):
        stream.flush()
        return stream.fileno()
    return subprocess.PIPE


def _stdin_for(stream: TextIO, *, is_run: bool, local_tty: bool) -> int:
    if local_tty:
        return stream.fileno()
    if is_run:
        return subprocess.PIPE  # kept open: Ctrl-C is sent through it
    return stream.fileno() if _has_fd(stream) else subprocess.DEVNULL


def _copy(source: IO[bytes] | None, sink: TextIO) -> threading.Thread | None:
    if source is None:
        return None

    def pump() -> None:
        for raw in iter(source.readline, b""):
            sink.write(raw.decode("utf-8", errors="replace"))
            sink.flush()

    thread = threading.Thread(target=pump, daemon=True, name="ssh-copy")
    thread.start()
    return thread


@contextlib.contextmanager
def _stopping(proc: subprocess.Popen[bytes], *, interrupt: bool) -> Any:
    """While the remote command runs, SIGINT/SIGTERM/SIGHUP here stop it there."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.getsignal(s) for s in signals}
    handler = _stop_handler(proc, interrupt=interrupt)
    for s in signals:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _stop_handler(
    proc: subprocess.Popen[bytes], *, interrupt: bool
) -> Callable[[int, object], None]:
    state = {"count": 0}

    def handler(_signum: int, _frame: object) -> None:
        state["count"] += 1
        if interrupt and state["count"] == 1 and proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.write(b"\x03")  # the remote terminal turns it into SIGINT
                proc.stdin.flush()
            timer = threading.Timer(STOP_GRACE_SECONDS, _hang_up, args=(proc,))
            timer.daemon = True
            timer.start()
            return
        _hang_up(proc)

    return handler


def _hang_up(proc: subprocess.Popen[bytes]) -> None:
    """End our ssh client: the connection closes and the remote terminal hangs up (SIGHUP)."""
    if proc.poll() is None:
        proc.terminate()


# -- following a remote log file ------------------------------------------------------------------

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


class RemoteFileSource(_Follower):
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


# -- commands that stay local and reach the host over ssh (watch, up, status) ---------------------


def add_host_arguments(parser: argparse.ArgumentParser) -> None:
    """``--host`` and ``--accept-new-host-key`` for watch, up and status."""
    parser.add_argument(
        "--host",
        metavar="[USER@]SERVER[:PORT]",
        help="the service runs on SERVER: reach it over ssh (systemctl, journalctl, tail, nvidia-smi run there)",
    )
    parser.add_argument(
        "--accept-new-host-key",
        action="store_true",
        help="with --host: trust SERVER's host key on first use (never a changed one)",
    )


def ssh_runner(args: argparse.Namespace, environ: Mapping[str, str]) -> SshRunner | None:
    """An SshRunner for ``--host``, else None."""
    if not getattr(args, "host", None):
        if getattr(args, "accept_new_host_key", False):
            raise UsageError("--accept-new-host-key needs --host")
        return None
    return SshRunner(
        target_from(args.host, accept_new_host_key=args.accept_new_host_key, environ=environ)
    )


_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


def probe_url(url: str, runner: object) -> str:
    """A URL the server gave for itself (``127.0.0.1:8000``) as seen from here: on the ssh host."""
    target = getattr(runner, "target", None)
    if not isinstance(target, SshTarget) or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    hostport, slash, path = rest.partition("/")
    host, colon, port = (
        hostport.rpartition(":") if not hostport.endswith("]") else (hostport, "", "")
    )
    if host not in _LOOPBACK:
        return url
    remote = f"[{target.host}]" if ":" in target.host else target.host
    return f"{scheme}://{remote}{colon}{port}{slash}{path}"


GPU_QUERY = [
    "nvidia-smi",
    "--query-gpu=index,name,memory.used,memory.total",
    "--format=csv,noheader,nounits",
]


def remote_gpus(runner: SshRunner) -> tuple[list[dict[str, object]], str | None]:
    """The remote host's GPUs through ``nvidia-smi`` (status's ``gpus`` shape), or a note why not."""
    from bringup.core.fleet import parse_nvidia_smi

    try:
        result = runner.run(GPU_QUERY)
    except RemoteError as exc:
        return [], f"not read: {exc}"
    if result.returncode != 0:
        detail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return (
            [],
            f"not read: {runner.target}: nvidia-smi exited with {result.returncode}: {detail}",
        )
    return [
        {"index": g.index, "name": g.name, "used_bytes": g.used_bytes, "total_bytes": g.total_bytes}
        for g in parse_nvidia_smi(result.stdout)
    ], None


def server_url(argv: Sequence[str], runner: SshRunner) -> str:
    """Where a remote server command (its ``--host``/``--port``, else the engine's default port)
    answers, as seen from here."""
    from bringup.core import engine_args, packs
    from bringup.supervisor import resolve_url

    engine = engine_args.parse_server_command(list(argv)).engine if argv else None
    try:
        port = packs.get(engine).http.default_port if engine is not None else 8000
    except KeyError:
        port = 8000
    return probe_url(resolve_url(None, list(argv), port), runner)
