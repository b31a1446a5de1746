"""`make demo-service` tells the seed's story against a real systemd: `up` says FAILED with the
sampler-warmup OOM while systemd says activating, then `up --retry 1` ends ready."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from builders.systemd_ns import SystemdNamespace

SCRIPT = Path(__file__).resolve().parents[2] / "scripts/demo_service.py"


def test_demo_service_tells_the_story(systemd: SystemdNamespace) -> None:
    """(The fixture only proves systemd boots here; the demo boots its own.)"""
    tmp = Path(tempfile.mkdtemp(prefix="bu-ds-", dir="/tmp"))  # short: systemd's socket paths
    env = {**os.environ, "BRINGUP_DEMO_TIME_SCALE": "0.01", "NO_COLOR": "1", "TMPDIR": str(tmp)}
    try:
        done = subprocess.run(
            [sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=110
        )
        left = sorted(p.name for p in tmp.iterdir())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-2000:]
    assert "demo-service: the story as told" in out
    assert "FAILED: cuda_oom during warmup" in out
    assert "at the verdict: activating" in out
    assert "retry 1/1: attempt 2 with --max-num-seqs 256" in out
    assert "READY: MiniMaxAI/MiniMax-M2.5 answered" in out
    assert left == [], f"the demo left {left} in its temporary folder"
