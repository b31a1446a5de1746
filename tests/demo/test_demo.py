"""`bringup demo` tells the motivating story end to end with real processes and sockets."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import uuid

import psutil
import pytest

from bringup import demo
from bringup.cli.main import Context, main
from bringup.render.json_out import dumps


def test_demo_tells_the_story() -> None:
    """Plan predicts the warmup OOM, run 1 catches it while the server lives, run 2 answers."""
    before = {p.pid for p in psutil.process_iter()}
    mark = uuid.uuid4().hex  # in the environment of every process this demo starts
    proc = subprocess.run(
        [sys.executable, "-m", "bringup", "demo", "--json", "--time-scale", "0.02"],
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
        env={**os.environ, MARK: mark},
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
    # the remedy shown for run 1 is the plan's value, in the plan's numbers for its runner
    remedy = first["remedy"][0]
    assert (remedy["flag"], remedy["value"]) == (
        "--max-num-seqs",
        story["recommended_max_num_seqs"],
    )
    assert "V2 model runner" in remedy["text"]
    assert second["summary"]["outcome"] == "ready"
    assert f"--max-num-seqs {story['recommended_max_num_seqs']}" in " ".join(second["argv"])
    assert second["answer"]
    summaries = [obj for obj in lines if obj.get("event") == "summary"]
    assert [s["outcome"] for s in summaries] == ["failed", "ready"]
    # this demo's own processes only: a demo run beside it (the systemd demo service test,
    # under xdist) has its own
    leftovers = [
        p
        for p in psutil.process_iter(["cmdline"])
        if p.pid not in before
        and "bringup-demo-" in " ".join(p.info["cmdline"] or [])
        and _started_by(p, mark)
        and p.status() != psutil.STATUS_ZOMBIE
    ]
    assert not leftovers, "the demo leaves nothing running"


MARK = "BRINGUP_TEST_DEMO_MARK"


def _started_by(process: psutil.Process, mark: str) -> bool:
    try:
        return process.environ().get(MARK) == mark
    except psutil.Error:
        return False  # gone, or not ours to read


@pytest.mark.parametrize("environ", [{}, {"CUDA_VISIBLE_DEVICES": "1,2,3,0"}])
def test_the_demo_plans_what_bringup_plan_plans(tmp_path, environ) -> None:
    """The demo's plan step calls the library; its plan is the one ``bringup plan --json`` gives."""
    readings = tmp_path / "gpus.json"
    demo.write_readings(readings)
    out, err = io.StringIO(), io.StringIO()
    code = main(demo.plan_argv(readings), Context(stdout=out, stderr=err, environ=environ))
    assert code == 1, err.getvalue()  # the warmup OOM: it does not fit
    planned = json.loads(out.getvalue())
    assert json.loads(dumps(demo.make_plan(readings, environ))) == planned
    assert planned["decode"] is not None  # the catalog knows the GPU: the speed is compared too
