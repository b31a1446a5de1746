"""SIGKILL of bringup (the OOM killer, say) never leaves its server running: the server gets
a parent-death SIGTERM (prctl PR_SET_PDEATHSIG) and stops its own workers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

BRINGUP = str(Path(sys.executable).with_name("bringup"))

# a "server" with a worker of its own, which stops the worker on SIGTERM as engines do
# (seen here: a worker can sit with SIGTERM pending and not die, hence the KILL after a grace)
SERVER = """
import signal, subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
def stop(*_):  # as engines do: TERM the worker, KILL it after a grace
    worker.terminate()
    try:
        worker.wait(5)
    except subprocess.TimeoutExpired:
        worker.kill(); worker.wait()
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("serving", flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux's"
)
def test_sigkill_of_bringup_ends_the_server_and_its_worker(tmp_path: Path) -> None:
    run = subprocess.Popen(
        [
            BRINGUP,
            "run",
            "--stall",
            "0",
            "--url",
            "http://127.0.0.1:9",
            "--",
            sys.executable,
            "-c",
            SERVER,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    family: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 60
        while len(family) < 2:
            assert time.monotonic() < deadline, "the server and its worker never started"
            family = psutil.Process(run.pid).children(recursive=True)
            time.sleep(0.1)
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=10)
        gone, alive = psutil.wait_procs(family, timeout=20)
        assert alive == [], [p.cmdline() for p in alive]
        assert len(gone) == 2
    finally:
        for p in family:  # only what this test started
            if p.is_running():
                p.kill()
        if run.poll() is None:
            run.kill()
        if run.stdout:
            run.stdout.close()
