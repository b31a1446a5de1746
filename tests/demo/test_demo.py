"""`bringup demo` tells the motivating story end to end with real processes and sockets."""

from __future__ import annotations

import json
import subprocess
import sys

import psutil


def test_demo_tells_the_story() -> None:
    """Plan predicts the warmup OOM, run 1 catches it while the server lives, run 2 answers."""
    before = {p.pid for p in psutil.process_iter()}
    proc = subprocess.run(
        [sys.executable, "-m", "bringup", "demo", "--json", "--time-scale", "0.02"],
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    story = lines[-1]
    assert story["event"] == "demo"
    assert story["told"] is True
    verdict = story["plan"]["verdict"]
    assert (verdict["fits"], verdict["failure_class"], verdict["phase"]) == (
        False,
        "cuda_oom",
        "warmup",
    )
    first, second = story["runs"]
    assert first["summary"]["outcome"] == "failed"
    assert first["summary"]["failure"]["class"] == "cuda_oom"
    assert first["server_pids_alive_at_failure"], (
        "the failure must be caught while the server still runs"
    )
    assert second["summary"]["outcome"] == "ready"
    assert f"--max-num-seqs {story['recommended_max_num_seqs']}" in " ".join(second["argv"])
    assert second["answer"]
    summaries = [obj for obj in lines if obj.get("event") == "summary"]
    assert [s["outcome"] for s in summaries] == ["failed", "ready"]
    leftovers = [
        p
        for p in psutil.process_iter(["cmdline"])
        if p.pid not in before
        and "bringup-demo-" in " ".join(p.info["cmdline"] or [])
        and p.status() != psutil.STATUS_ZOMBIE
    ]
    assert not leftovers, "the demo leaves nothing running"
