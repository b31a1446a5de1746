"""Running bringup itself on a remote host over ssh (``bringup COMMAND --host ...``)::

    ssh [-tt] ... user@server -- [sudo -n] bringup COMMAND ARGS...

Standard streams pass through and the remote exit code is bringup's. ssh's own failures
(unknown host key, authentication, connection) are one line naming the host, found by a
first ``true`` over the same ControlMaster connection the command then uses.

``run`` gets a remote terminal (``-tt``): stopping the local bringup sends Ctrl-C through it
(the remote bringup stops the server, prints its verdict, exits 130) and, if that does not end
it within the grace, closes the connection, which hangs up (SIGHUP) the remote bringup; that
too stops the server. The flags that ask for this are read in ``bringup.cli.remote``.

Command line equivalent: ``ssh user@server -- bringup verify /models/llama``.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO, Any, TextIO

from bringup.adapters.ssh import SSH_EXIT_ERROR, SshRunner, SshTarget, ssh_argv, target_from
from bringup.errors import RemoteError

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
