"""The earlier instance of the ``guard_wait`` scenario: holds GPU memory, then lets go.

``python -m bringup.twin.holder twin vllm --port P --tp N --model M --gpus-file F
--gpus 0,1,2,3 --hold-seconds S`` runs in its own session (it is someone else's process:
a ``bringup run`` that stops the new server's process group must not touch it). The
parent records its memory in the readings file; after ``S`` seconds, once the parent (the
new instance, which fails for want of that memory) has ended, or on SIGTERM, it removes its
entries and exits 0. Waiting for the parent makes the story hold on a slow machine too.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bringup.twin.procs import Terminated, ignore_termination, install_termination
from bringup.twin.readings import Ledger

TITLE = "VLLM::EngineCore"
_MARKER_LIFETIME_SECONDS = 600.0


def _marker(key: str) -> Path:
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"bringup-twin-guard-{digest}.json"


def should_start(key: str, now: float) -> bool:
    """True unless an earlier instance was already played for ``key`` (one per file)."""
    try:
        data = json.loads(_marker(key).read_text())
        return now - float(data["started"]) > _MARKER_LIFETIME_SECONDS
    except (OSError, ValueError, KeyError):
        return True


def start(
    key: str, port: int, tp: int, model: str, gpus_file: str, gpus: list[int], hold_seconds: float
) -> subprocess.Popen[bytes]:
    """Start the holder in its own session and remember that it was played for ``key``."""
    argv = [
        sys.executable,
        "-m",
        "bringup.twin.holder",
        "twin",
        "vllm",
        "--port",
        str(port),
        "--tp",
        str(tp),
        "--model",
        model,
        "--gpus-file",
        gpus_file,
        "--gpus",
        ",".join(map(str, gpus)),
        "--hold-seconds",
        f"{hold_seconds:.3f}",
    ]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    with contextlib.suppress(OSError):
        _marker(key).write_text(json.dumps({"pid": proc.pid, "started": time.time()}))
    return proc


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bringup.twin.holder")
    parser.add_argument("words", nargs="*")
    parser.add_argument("--port", type=int)
    parser.add_argument("--tp", type=int)
    parser.add_argument("--model")
    parser.add_argument("--gpus-file", required=True)
    parser.add_argument("--gpus", default="")
    parser.add_argument("--hold-seconds", type=float, required=True)
    args = parser.parse_args(argv)
    install_termination()
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None).prctl(15, TITLE.encode()[:15], 0, 0, 0)
    parent = os.getppid()  # the new instance, whose start this one makes fail
    try:
        time.sleep(args.hold_seconds)
        while os.getppid() == parent:  # never before that start has failed (however slow)
            time.sleep(0.05)
    except Terminated:
        pass
    finally:
        ignore_termination()
        Ledger(args.gpus_file).release({os.getpid()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
