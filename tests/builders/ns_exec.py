"""``python3 ns_exec.py PID CMD...``: run CMD inside the namespaces of PID (nsenter -m -u -i -p -C)
and pass TERM, INT and HUP on to it.

nsenter forks for the PID namespace and does not forward signals, so stopping a
``nsenter … journalctl -f`` would leave the journalctl running inside. This wrapper is the
command prefix the real-systemd tests give bringup (``BRINGUP_COMMAND_PREFIX``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path


def _inner(nsenter_pid: int) -> list[int]:
    pids: list[int] = []
    for task in Path(f"/proc/{nsenter_pid}/task").glob("*/children"):
        with contextlib.suppress(OSError, ValueError):
            pids += [int(p) for p in task.read_text().split()]
    return pids


def main() -> int:
    target, argv = sys.argv[1], sys.argv[2:]
    child = subprocess.Popen(["nsenter", "-t", target, "-m", "-u", "-i", "-p", "-C", *argv])

    def forward(signum: int, _frame: object) -> None:
        for pid in _inner(child.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    code = child.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
