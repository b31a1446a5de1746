"""Real vLLM 0.32 (CPU build) with -tp 2 under `bringup run`: the ``vllm_dist_*-cpushm_*``
buffers its workers map are gone once bringup has stopped it, and an unrelated object of the
same shape, made by the test, is untouched.

The names this run's vLLM used are read by the test itself from its processes' maps while it
serves, so another run's objects (other tests, other users of the machine) are neither
counted nor touched.
"""

from __future__ import annotations

import mmap
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from engine.real_engine import free_port
from vllm_real.runner import Run, bringup_run_live, cpushm_mapped, events_of, read_until

from builders.vllm_env import serve_argv

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(600)]


def _finish(proc: subprocess.Popen[str], log: Path, events: list[dict[str, Any]]) -> Run:
    out, _ = proc.communicate(timeout=180)
    return Run(proc.returncode, events + events_of(out), log.read_text())


def test_tp2_stop_removes_its_cpushm_buffers_and_no_one_elses(
    vllm_models: dict[str, Path], vllm_env: dict[str, str], vllm_cpushm: bool, tmp_path: Path
) -> None:
    """Where vLLM's kernels for this CPU have no shared-memory communicator (AVX2 only), its
    workers map none: then nothing of anyone's is removed, which is checked just the same."""
    env = {**vllm_env, "VLLM_CPU_OMP_THREADS_BIND": "0|1"}
    theirs = f"vllm_dist_i22test{os.getpid()}-tp:0-[0-1]-cpushm_0"  # another run's, mapped
    fd = os.open(f"/dev/shm/{theirs}", os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, 4096)
    their_map = mmap.mmap(fd, 4096)
    os.close(fd)
    idle = f"vllm_dist_i22idle{os.getpid()}-tp:0-[0-1]-cpushm_1"  # another run's, held by none
    Path("/dev/shm", idle).write_bytes(b"x")
    ours: set[str] = set()
    try:
        argv = serve_argv(vllm_models["two"], free_port(), "-tp", "2")
        log = tmp_path / "bringup.err"
        with bringup_run_live(argv, env, log=log) as proc:
            events = read_until(proc, "ready")
            assert events[-1]["event"] == "ready", log.read_text()[-3000:]
            ours = cpushm_mapped(proc.pid)
            assert bool(ours) == vllm_cpushm, (ours, vllm_cpushm)
            assert all(Path("/dev/shm", name).exists() for name in ours)
            proc.terminate()  # as Ctrl-C: bringup stops the server it started
            run = _finish(proc, log, events)
        assert run.code == 0, run.tail()
        summary = run.summary
        assert summary["stopped_by_bringup"] is not None
        assert ours <= set(summary["shm_removed"]), (ours, summary["shm_removed"])
        assert theirs not in summary["shm_removed"]
        assert [name for name in ours if Path("/dev/shm", name).exists()] == []
        assert Path("/dev/shm", theirs).exists()
        assert Path("/dev/shm", idle).exists()
    finally:
        their_map.close()
        for name in (theirs, idle):
            Path("/dev/shm", name).unlink(missing_ok=True)
