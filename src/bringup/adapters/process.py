"""The server as a child process: spawned in its own process group, read line by line, stopped.

Only processes bringup started are ever signalled: the child (a session and process-group
leader, ``start_new_session``) and the members of its group or its descendants that were
created after it. Command line equivalent of ``terminate``: ``kill -TERM -PGID``, wait the
grace period, then ``kill -KILL -PGID``.

When the server's processes are all gone (stopped by bringup or ended by themselves),
``release`` disarms the group's sentinel and removes the /dev/shm objects they were seen
holding (sampled every ``SHM_SAMPLE_SECONDS`` while they run, and before each stop signal)
that no process holds any more (``bringup.adapters.shm``). ``detach`` (``--keep``) leaves both.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO

import psutil

from bringup.adapters.shm import ShmLedger
from bringup.errors import UsageError

LineSink = Callable[[str, str], None]  # (stream name "stdout" | "stderr", line without "\n")
BatchSink = Callable[[str, list[str]], None]  # (stream name, lines that arrived together)
EofSink = Callable[[str], None]  # (stream name)

SHM_SAMPLE_SECONDS = 2.0  # how often the server's /dev/shm objects are looked at while it runs

_DRAIN = (
    "import os,sys,threading\n"
    "out=open(sys.argv[1],'ab',buffering=0)\n"
    "def pump(fd):\n"
    "    while True:\n"
    "        b=os.read(fd,65536)\n"
    "        if not b: return\n"
    "        out.write(b)\n"
    "ts=[threading.Thread(target=pump,args=(int(f),)) for f in sys.argv[2:]]\n"
    "[t.start() for t in ts]; [t.join() for t in ts]\n"
)


def decode_line(raw: bytes) -> str:
    """One line of bytes as text: ``\\n`` and a trailing ``\\r`` removed, bad bytes replaced."""
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    return raw.decode("utf-8", errors="replace")


def read_lines(stream: IO[bytes], name: str, on_line: LineSink, on_eof: EofSink | None) -> None:
    """Deliver every line of ``stream`` (a partial last line included), then signal EOF."""
    try:
        for raw in iter(stream.readline, b""):
            on_line(name, decode_line(raw))
    except (OSError, ValueError):
        pass  # the pipe was closed under us (detach, shutdown)
    finally:
        if on_eof is not None:
            on_eof(name)


def child_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """The child's environment: the caller's, with Python output unbuffered so lines arrive live."""
    env = dict(environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def read_batches(
    stream: IO[bytes],
    name: str,
    on_lines: BatchSink,
    on_eof: EofSink | None,
    *,
    batch_seconds: float = 0.05,
) -> None:
    """Deliver ``stream``'s lines in batches: whatever arrived, then a pause of ``batch_seconds``.

    One wake-up per batch instead of per line keeps a chatty server cheap to follow; a line
    waits at most ``batch_seconds`` longer. A partial last line is delivered at EOF.
    """
    pending = b""
    read = getattr(stream, "read1", stream.read)
    try:
        while chunk := read(65536):
            *complete, pending = (pending + chunk).split(b"\n")
            if complete:
                on_lines(name, [decode_line(raw) for raw in complete])
            if batch_seconds:
                time.sleep(batch_seconds)
    except (OSError, ValueError):
        pass  # the pipe was closed under us (detach, shutdown)
    finally:
        if pending:
            on_lines(name, [decode_line(pending)])
        if on_eof is not None:
            on_eof(name)


class ChildProcess:
    """A started server: its output arrives through ``on_lines``; stop it with ``terminate``."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        on_lines: BatchSink,
        on_eof: EofSink | None,
        alive_fd: int | None = None,
        shm: ShmLedger | None = None,
    ) -> None:
        self._popen = popen
        self._alive_fd = alive_fd  # closed by bringup's death: the sentinel then ends the group
        self.pid = popen.pid
        self.pgid = popen.pid  # start_new_session: the child leads its own group
        self._created = _create_time(popen.pid)
        self.signals_sent: list[str] = []  # what terminate() sent, in order
        self.shm = shm if shm is not None else ShmLedger()
        self.shm_removed: list[str] = []  # what release() removed from /dev/shm
        self._released = threading.Event()  # the server is done with: sampling ends
        self._told: set[str] = set()  # names the sentinel was told
        self._told_bytes = 0
        self._told_lock = threading.Lock()
        self._sampler = threading.Thread(target=self._sample_shm, daemon=True, name="shm-sampler")
        self._sampler.start()
        self._readers = [
            threading.Thread(
                target=read_batches, args=(s, n, on_lines, on_eof), daemon=True, name=f"read-{n}"
            )
            for s, n in ((popen.stdout, "stdout"), (popen.stderr, "stderr"))
            if s is not None
        ]
        for t in self._readers:
            t.start()

    @classmethod
    def start(
        cls,
        argv: Sequence[str],
        *,
        environ: Mapping[str, str],
        on_lines: BatchSink,
        on_eof: EofSink | None = None,
        cwd: str | None = None,
        shm: ShmLedger | None = None,
    ) -> ChildProcess:
        """Start ``argv`` in a new session; UsageError (exit 2) if it cannot be executed."""
        if not argv:
            raise UsageError(
                "no server command given",
                hint="put it after `--`, e.g. `bringup run -- vllm serve MODEL`",
            )
        # the sentinel reads one end; only bringup holds the other (not inherited: O_CLOEXEC)
        watch_end, alive_end = os.pipe()
        try:
            popen = _spawn(argv, environ, cwd, _die_with_parent(os.getpid(), watch_end))
        except BaseException:
            os.close(alive_end)
            raise
        finally:
            os.close(watch_end)
        return cls(popen, on_lines, on_eof, alive_end, shm)

    def disarm(self) -> None:
        """Tell the sentinel bringup is done with the server (stopped or left running on
        purpose): it exits without a signal. Idempotent."""
        with self._told_lock:
            fd, self._alive_fd = self._alive_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.write(fd, DISARM)
            os.close(fd)

    def release(self) -> list[str]:
        """The server's processes are gone: disarm the sentinel, end the sampling, and remove
        the /dev/shm objects they held that no process holds now (their names, also kept in
        ``shm_removed``). Call it once ``members()`` is empty; idempotent."""
        self.disarm()
        if self._released.is_set():
            return []
        self._released.set()
        self._sampler.join(5.0)
        self.shm_removed = self.shm.remove_unheld()
        return self.shm_removed

    def _sample_shm(self) -> None:
        """Every ``SHM_SAMPLE_SECONDS`` while our processes live: what they hold in /dev/shm."""
        while not self._released.is_set():
            members = self.members()
            self._sample(members)
            if not members and self._popen.returncode is not None:
                return
            self._released.wait(SHM_SAMPLE_SECONDS)

    def _sample(self, members: list[psutil.Process]) -> None:
        """What ``members`` hold in /dev/shm, and the new ones told to the sentinel (which
        removes them should bringup die)."""
        self.shm.sample(p.pid for p in members)
        with self._told_lock:
            fd = self._alive_fd
            if fd is None:
                return
            new = [
                (n, k) for n, k in self.shm.held().items() if n not in self._told and "\n" not in n
            ]
            text = b"".join(
                f"{ino} {name}\n".encode("utf-8", "surrogateescape") for name, (_dev, ino) in new
            )
            # bounded, so the pipe (64 KiB) never fills and DISARM always goes through
            if text and self._told_bytes + len(text) <= SENTINEL_TOLD_BYTES:
                with contextlib.suppress(OSError):
                    os.write(fd, text)
                self._told_bytes += len(text)
                self._told.update(n for n, _ in new)

    def poll(self) -> int | None:
        """The exit status if the child has ended (negative: killed by that signal)."""
        return self._popen.poll()

    def join(self) -> int:
        """Wait for the child to end; its exit status."""
        return self._popen.wait()

    def wait(self, timeout_seconds: float) -> int | None:
        """Wait up to ``timeout_seconds`` for the child; its status, or None if still running."""
        try:
            return self._popen.wait(timeout=timeout_seconds)
        except subprocess.TimeoutExpired:
            return None

    def wait_output(self, timeout_seconds: float) -> bool:
        """Wait until both streams reached EOF (all lines delivered); False on timeout.

        A grandchild that inherited the pipes can keep them open after the child exits,
        which is why this is bounded.
        """
        deadline = time.monotonic() + timeout_seconds
        for t in self._readers:
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._readers)

    def members(self) -> list[psutil.Process]:
        """Live processes that are ours: the child, and its descendants and group members that
        were created after it and stayed in its session (a process that made its own session,
        like a daemon, is left alone)."""
        found: dict[int, psutil.Process] = {}
        with contextlib.suppress(psutil.Error):
            leader = psutil.Process(self.pid)
            if self._is_ours(leader):
                found[leader.pid] = leader
                for p in leader.children(recursive=True):
                    if self._in_session(p):
                        found[p.pid] = p
        for p in psutil.process_iter():
            with contextlib.suppress(psutil.Error, OSError):
                if p.pid not in found and os.getpgid(p.pid) == self.pgid and self._is_ours(p):
                    found[p.pid] = p
        return [p for p in found.values() if _alive(p) and not _is_sentinel(p)]

    def stopped_members(self) -> tuple[tuple[int, str], ...]:
        """Our processes that are stopped (SIGSTOP, SIGTSTP, a debugger), as (pid, title)."""
        found = []
        for p in self.members():
            with contextlib.suppress(psutil.Error):
                if p.status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP):
                    argv = p.cmdline()
                    title = os.path.basename(argv[0]) if argv else p.name()
                    found.append((p.pid, title))
        return tuple(found)

    def _in_session(self, p: psutil.Process) -> bool:
        try:
            return os.getsid(p.pid) == self.pgid and self._is_ours(p)
        except OSError:
            return False

    def listens_on(self, port: int) -> bool:
        """Whether one of our processes listens on TCP ``port`` (True when it cannot be told)."""
        pids = {p.pid for p in self.members()}
        try:
            conns = psutil.net_connections(kind="inet")
        except psutil.Error:
            return True
        return any(
            c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid in pids
            for c in conns
        )

    def terminate(self, grace_seconds: float) -> int | None:
        """SIGTERM to the group and our descendants, SIGKILL after ``grace_seconds``.

        ``signals_sent`` lists the signals this sent ("SIGTERM", "SIGKILL"), so the caller can
        tell the server's own exit status from the effect of bringup's signals. Then
        ``release``: the sentinel disarmed, this run's /dev/shm leftovers removed.
        """
        self._signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace_seconds
        while time.monotonic() < deadline:
            self._popen.poll()
            if not self.members():
                break
            time.sleep(0.05)
        else:
            self._signal_all(signal.SIGKILL)
        code = self.wait(max(1.0, grace_seconds))
        self._reap_leftovers()
        self.release()
        return code

    def detach(self, log_path: str) -> None:
        """Leave the server running: hand its output pipes to a small drainer writing ``log_path``.

        Without a reader the server would get EPIPE on its next log line once bringup exits.
        Lines our own reader threads have already taken are not in the file.
        """
        self.disarm()  # left running on purpose: bringup's exit is not a death now
        self._released.set()  # and its /dev/shm objects are still its own
        fds = [s.fileno() for s in (self._popen.stdout, self._popen.stderr) if s is not None]
        with open(log_path, "ab"):
            pass  # exists (and is ours to append to) before the drainer starts
        subprocess.Popen(
            [sys.executable, "-c", _DRAIN, log_path, *map(str, fds)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=fds,
            start_new_session=True,
        )

    def _signal_all(self, sig: signal.Signals) -> None:
        members = self.members()
        self._sample(members)  # just before: what they hold as they stop
        if (members or self._popen.returncode is None) and sig.name not in self.signals_sent:
            self.signals_sent.append(sig.name)
        if self._popen.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, sig)
        for p in members:
            with contextlib.suppress(psutil.Error):
                p.send_signal(sig)

    def _reap_leftovers(self) -> None:
        left = self.members()
        if left and "SIGKILL" not in self.signals_sent:
            self.signals_sent.append("SIGKILL")
        for p in left:
            with contextlib.suppress(psutil.Error):
                p.kill()
        psutil.wait_procs(self.members(), timeout=2.0)

    def _is_ours(self, p: psutil.Process) -> bool:
        try:
            created = p.create_time()
        except psutil.Error:
            return False
        if p.pid == self.pid:
            return abs(created - self._created) < 0.05  # the same process, not a reused pid
        return created >= self._created - 0.05


def _create_time(pid: int) -> float:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return time.time()


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _spawn(
    argv: Sequence[str],
    environ: Mapping[str, str],
    cwd: str | None,
    preexec: Callable[[], None] | None,
) -> subprocess.Popen[bytes]:
    """``Popen`` in a new session; UsageError (exit 2) if it cannot be executed."""
    try:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_environ(environ),
            cwd=cwd,
            start_new_session=True,
            preexec_fn=preexec,
        )
    except FileNotFoundError as exc:
        raise UsageError(
            f"command not found: {argv[0]}",
            hint="check the spelling and PATH, or give an absolute path",
        ) from exc
    except PermissionError as exc:
        raise UsageError(
            f"cannot execute {argv[0]}: permission denied",
            hint="check that the file is executable",
        ) from exc
    except OSError as exc:
        raise UsageError(f"cannot start {argv[0]}: {exc.strerror or exc}") from exc


PR_SET_PDEATHSIG = 1  # prctl(2)
DISARM = b"d\n"  # bringup is done with the server: the sentinel leaves without a signal
SENTINEL_MARK = "bringup-group-sentinel"
SENTINEL_TOLD_BYTES = 32768  # the most bringup writes to the sentinel's pipe before DISARM
SENTINEL_GRACE_SECONDS = 10.0  # SIGTERM to the group, then SIGKILL, as bringup's own stop

# The group's sentinel: ``python -S -c SENTINEL MARK GRACE``, stdin the read end of a pipe
# only bringup writes to: ``INODE NAME`` lines (the /dev/shm objects bringup saw the group
# hold, as it samples them), or DISARM. It forks at once (the server it was spawned from
# never waits for it: the first process exits and is reaped before the server's exec), ignores the signals
# its group gets, and blocks on stdin. DISARM: bringup is done, leave. EOF without it: bringup
# died (SIGKILL, the OOM killer): SIGTERM to the group, a grace for the workers to stop, then
# SIGKILL to what is left, itself last. It is a member of the group, so the group, and with
# it the group id, lives until then: the signals can reach no one else's processes. Before
# each signal it adds the /dev/shm objects the group maps or holds open then to those bringup
# told it; once the others are gone it removes those that are still the same file (inode),
# bringup's user's, and held by no process (bringup, dead, cannot: a killed vLLM -tp 2 leaks
# its *-cpushm_* buffers; the server itself is gone at once, by its parent-death signal).
SENTINEL = """
import os, signal, sys, time
if os.fork():
    os._exit(0)
os.closerange(3, 1 << 16)
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
    signal.signal(s, signal.SIG_IGN)
seen, pending = {}, b""
while True:
    try:
        got = os.read(0, 65536)
    except InterruptedError:
        continue
    except OSError:
        got = b""
    if not got:
        break
    *told, pending = (pending + got).split(b"\\n")
    for line in told:
        if line == b"d":
            os._exit(0)
        ino, _, name = line.partition(b" ")
        if ino.isdigit() and name:
            seen[int(ino)] = name.decode("utf-8", "surrogateescape")
me, group = os.getpid(), os.getpgrp()
def others():
    left = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            try:
                with open("/proc/" + name + "/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == group and fields[0] != b"Z":
                left.append(int(name))
    return left
def held(pids):
    found = {}
    for pid in pids:
        base = "/proc/%d/" % pid
        try:
            with open(base + "maps", "rb") as f:
                lines = [x.split(None, 5) for x in f.read().splitlines() if b" /dev/shm/" in x]
        except OSError:
            lines = []
        paths = [(x[5].decode("utf-8", "surrogateescape"), int(x[4])) for x in lines if len(x) == 6]
        try:
            fds = os.listdir(base + "fd")
        except OSError:
            fds = []
        for fd in fds:
            try:
                target = os.readlink(base + "fd/" + fd)
                if target.startswith("/dev/shm/"):
                    paths.append((target, os.stat(base + "fd/" + fd).st_ino))
            except OSError:
                pass
        for path, ino in paths:
            name = path[9:]
            if name and "/" not in name and not name.endswith(" (deleted)"):
                found[ino] = name
    return found
if others():
    seen.update(held(others()))
    os.killpg(group, signal.SIGTERM)
    end = time.monotonic() + float(sys.argv[2])
    while others() and time.monotonic() < end:
        time.sleep(0.05)
    seen.update(held(others()))
    end = time.monotonic() + 5
    while others() and time.monotonic() < end:
        for pid in others():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)
if seen:
    still = held([int(x) for x in os.listdir("/proc") if x.isdigit() and int(x) != me])
    for ino, name in seen.items():
        try:
            st = os.lstat("/dev/shm/" + name)
            if st.st_ino == ino and st.st_uid == os.geteuid() and ino not in still:
                os.unlink("/dev/shm/" + name)
        except OSError:
            pass
os.killpg(group, signal.SIGKILL)
"""


def _is_sentinel(p: psutil.Process) -> bool:
    try:
        return SENTINEL_MARK in p.cmdline()
    except psutil.Error:
        return False


def _die_with_parent(parent: int, watch_fd: int | None = None) -> Callable[[], None] | None:
    """In the child, before exec: SIGTERM when bringup dies (even by SIGKILL, the OOM killer),
    so a server is never left orphaned holding its GPUs; SIGTERM lets it stop its own workers
    (the engines' shutdown path). A server that does not stop its workers would still leave
    them, so with ``watch_fd`` (the read end of a pipe only bringup writes to) the child also
    starts its group's sentinel (``SENTINEL``), which ends the whole group when bringup dies.
    Linux only; elsewhere None (no such guarantee)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    sentinel = [sys.executable, "-S", "-c", SENTINEL, SENTINEL_MARK, str(SENTINEL_GRACE_SECONDS)]

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # bringup died before the signal was armed
            os.kill(os.getpid(), signal.SIGTERM)
        if watch_fd is not None:
            # posix_spawn, not fork: no Python runs in a copy of a threaded bringup. The new
            # process is in this session and group (setsid already ran); it forks the sentinel
            # and exits, and is reaped here, so the server never has it as a child.
            devnull = os.open(os.devnull, os.O_RDWR)
            try:
                pid = os.posix_spawn(
                    sys.executable,
                    sentinel,
                    {},
                    file_actions=[
                        (os.POSIX_SPAWN_DUP2, watch_fd, 0),
                        (os.POSIX_SPAWN_DUP2, devnull, 1),
                        (os.POSIX_SPAWN_DUP2, devnull, 2),
                    ],
                )
                os.waitpid(pid, 0)
            except OSError:
                pass  # no sentinel: the parent-death signal above still stops the server
            finally:
                os.close(devnull)
            os.close(watch_fd)

    return arm
