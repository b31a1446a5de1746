"""One node's server, started and stopped over ssh (``bringup run --nodes``).

On the node, a small POSIX shell wrapper (``WRAPPER``) runs the command in a session of
its own (``setsid``), its output into a log file under the run folder and, through
``tee``, back to bringup over the ssh channel. The wrapper's stdin is the ssh channel:
when it ends (bringup asks to stop, or bringup itself is gone, or the connection drops)
the wrapper sends SIGTERM to the server's process group, SIGKILL after the grace (vLLM
may ignore SIGTERM while it waits for the other nodes), then SIGKILL to anything left in
the session. The server's exit is said as soon as its output has all come through
(``@@bringup-node exited N``); then the wrapper removes the /dev/shm objects that the server's own processes mapped or held open
(sampled every 2 s while it runs, before the SIGTERM and again before the SIGKILL) and that no process holds
any more: a killed vLLM leaks ``psm_*``, ``sem.mp-*`` and its CPU build's
``*-cpushm_*`` buffers. Objects of other runs are never touched: only what a process of
this server's session was seen holding is a candidate (the names go to ``shm``, those
removed to ``shm-removed`` in the run folder). The server's pid, log, command and exit
status stay in the run folder, which ``bringup status --nodes`` reads.

With the Ray backend, a node's ``ray start --block`` runs in the same wrapper: its daemons
(gcs_server, raylet, the agents, the workers) stay in its session, so the same stop ends
exactly the Ray this run started (``ray stop`` would end every Ray on the node); its
``--temp-dir`` is removed after the stop, its logs kept in the run folder's ``ray-logs``.

Command line equivalent: ``ssh node -- sh -c WRAPPER sh GRACE DIR TEMP env NAME=value ... vllm serve ...``.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Callable, Sequence

from bringup.adapters.process import decode_line
from bringup.adapters.ssh import SSH_EXIT_ERROR, SshTarget, explain_ssh_failure, ssh_argv

RUN_ROOT = "/tmp/bringup-nodes"  # on each node: one folder per run and rank
RUN_ROOT_VARIABLE = "BRINGUP_NODES_DIR"  # in bringup's environment: another root on the nodes
MARK = "@@bringup-node "  # the wrapper's own lines start with this

# $1 grace in tenths of a second, $2 the run folder, $3 a folder of this run to remove once the
# server ended ("-": none; Ray's --temp-dir, whose logs are kept in the run folder's ray-logs);
# then the command (env NAME=value ... argv).
WRAPPER = r"""g=$1; d=$2; x=$3; shift 3
mkdir -p "$d" || exit 70
printf '%s\n' "$*" > "$d/cmd"
rm -f "$d/fifo" "$d/exit"; mkfifo "$d/fifo" || exit 70
: > "$d/shm"
exec 3<&0
tee -p "$d/log" < "$d/fifo" &
t=$!
setsid "$@" > "$d/fifo" 2>&1 < /dev/null 3<&- &
p=$!
echo $p > "$d/pid"
echo "@@bringup-node pid $p dir $d"
seen() {
  for q in $(ps -o pid= -s $p 2>/dev/null); do
    grep -o '/dev/shm/[^ ]*' /proc/$q/maps 2>/dev/null
    ls -l /proc/$q/fd 2>/dev/null | grep -o '/dev/shm/[^ ]*'
  done | sed 's|^/dev/shm/||' | sort -u >> "$d/shm"
}
stop() {
  seen
  kill -TERM -$p 2>/dev/null; n=0
  while kill -0 -$p 2>/dev/null && [ $n -lt $g ]; do sleep 0.1; n=$((n+1)); done
  seen
  kill -KILL -$p 2>/dev/null
  for q in $(ps -o pid= -s $p 2>/dev/null); do kill -KILL $q 2>/dev/null; done
}
{ read -r _; echo "@@bringup-node stopping" >&2; stop; } <&3 >/dev/null 2>&1 &
w=$!
exec 3<&-
{ while kill -0 $p 2>/dev/null; do seen; sleep 2; done; } >/dev/null 2>&1 &
s=$!
wait $p; c=$?
echo $c > "$d/exit"
stop
wait $t
echo "@@bringup-node exited $c"
kill $w $s 2>/dev/null
sort -u "$d/shm" | while IFS= read -r f; do
  [ -n "$f" ] && [ -e "/dev/shm/$f" ] || continue
  grep -qsF -- "/dev/shm/$f" /proc/[0-9]*/maps && continue
  ls -l /proc/[0-9]*/fd 2>/dev/null | grep -qF -- "/dev/shm/$f" && continue
  rm -f -- "/dev/shm/$f" && echo "$f" >> "$d/shm-removed"
done
if [ "$x" != - ] && [ -d "$x" ]; then
  for l in "$x"/session_*/logs; do [ -d "$l" ] && mkdir -p "$d/ray-logs" && cp -r "$l"/. "$d/ray-logs/" 2>/dev/null; done
  rm -rf -- "$x"
fi
rm -f "$d/fifo"
echo "@@bringup-node exit $c"
exit $c"""

LineSink = Callable[[str], None]
ExitSink = Callable[[int | None, str | None], None]  # (exit code, ssh's own error)


def run_folder(root: str, run_id: str, rank: int) -> str:
    """Where a node keeps its server's pid, log, command and exit status."""
    return f"{root.rstrip('/')}/{run_id}-rank{rank}"


class RemoteServer:
    """A server command on one node, started through the wrapper over ssh."""

    def __init__(
        self,
        target: SshTarget,
        argv: Sequence[str],
        env: Sequence[tuple[str, str]],
        folder: str,
        *,
        grace_seconds: float,
        remove_after: str | None = None,
    ) -> None:
        self.target = target
        self.folder = folder
        self.grace_seconds = grace_seconds
        remote = [
            "sh",
            "-c",
            WRAPPER,
            "sh",
            str(max(1, round(grace_seconds * 10))),
            folder,
            remove_after or "-",
            "env",
            *(f"{k}={v}" for k, v in env),
            *argv,
        ]
        self.argv = ssh_argv(target, remote)
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None  # the server's pid on the node
        self._stderr: list[str] = []
        self._done = threading.Event()

    def start(self, on_line: LineSink, on_exit: ExitSink) -> None:
        """Start it; lines and the end arrive through the callbacks (from reader threads)."""
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        threading.Thread(target=self._read_err, daemon=True, name="node-stderr").start()
        threading.Thread(
            target=self._read_out, args=(on_line, on_exit), daemon=True, name="node-stdout"
        ).start()

    def _read_err(self) -> None:
        assert self.proc is not None
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self._stderr.append(decode_line(raw))

    def _read_out(self, on_line: LineSink, on_exit: ExitSink) -> None:
        assert self.proc is not None
        assert self.proc.stdout is not None
        code: int | None = None
        told = False  # the exit was passed on at the wrapper's first word of it
        for raw in self.proc.stdout:
            text = decode_line(raw)
            if text.startswith(MARK):
                words = text[len(MARK) :].split()
                number = words[1] if len(words) > 1 and words[1].lstrip("-").isdigit() else None
                if words[:1] == ["pid"] and number is not None:
                    self.pid = int(number)
                elif words[:1] in (["exited"], ["exit"]) and number is not None:
                    code = int(number)
                    if not told:  # at once: the wrapper's cleanup follows, still "running"
                        told = True
                        on_exit(_signal_code(code), None)
                continue
            on_line(text)
        returncode = self.proc.wait()
        error = None
        if code is None:
            stderr = "\n".join(self._stderr)
            if returncode == SSH_EXIT_ERROR:
                error = explain_ssh_failure(self.target, stderr)
            else:
                code = returncode
        self._done.set()
        if not told:
            on_exit(_signal_code(code), error)

    def stop(self) -> None:
        """Ask the node to stop the server (SIGTERM, SIGKILL after the grace) and wait for it."""
        proc = self.proc
        if proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            assert proc.stdin is not None
            proc.stdin.write(b"stop\n")
            proc.stdin.close()
        if not self._done.wait(self.grace_seconds + 15.0):
            proc.kill()  # the connection goes; the wrapper sees its stdin end and stops the server
            self._done.wait(5.0)

    @property
    def running(self) -> bool:
        """The ssh session is still open."""
        return self.proc is not None and not self._done.is_set()


def _signal_code(code: int | None) -> int | None:
    """The shell's 128+N for a server killed by signal N, as the negative code Python uses."""
    if code is not None and 128 < code < 160:
        return -(code - 128)
    return code
