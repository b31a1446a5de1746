"""`bringup run` over every engine-twin scenario: the right verdict, class and exit code each."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from run.helpers import cli, events, free_port, processes_running

# scenario, extra twin flags, bringup flags, exit code, outcome, failure class
CASES = [
    ("ready", [], ["--exit-when-ready"], 0, "ready", None),
    ("oom_warmup", [], [], 1, "failed", "cuda_oom"),
    ("oom_warmup", ["--max-num-seqs", "256"], ["--exit-when-ready"], 0, "ready", None),
    ("kv_insufficient", [], [], 1, "failed", "kv_cache_insufficient"),
    ("hang_nccl", [], ["--stall", "1.5s"], 4, "stalled", "timeouts"),
    ("slow_load", [], ["--stall", "5s", "--exit-when-ready"], 0, "ready", None),
    # slower, so the engine dies after our smoke request, not during it
    ("die_after_ready", ["--time-scale", "0.03"], [], 1, "failed", None),
    ("guard_wait", [], [], 1, "failed", "gpu_memory_utilization"),
]


def twin(scenario: str, port: int, gpus: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "bringup",
        "twin",
        "vllm",
        "--scenario",
        scenario,
        "--port",
        str(port),
        "--time-scale",
        "0.01",
        "--gpus-file",
        str(gpus),
        *extra,
    ]


@pytest.mark.parametrize(
    ("scenario", "twin_flags", "flags", "code", "outcome", "cls"),
    CASES,
    ids=[f"{c[0]}{'-' + c[1][-1] if c[1] else ''}" for c in CASES],
)
def test_twin_scenario_verdict(tmp_path, scenario, twin_flags, flags, code, outcome, cls):
    """Each twin scenario ends with its verdict, failure class and exit code, and nothing left running."""
    port = free_port()
    gpus = tmp_path / "gpus.json"
    args = [
        "run",
        "--json",
        "--grace",
        "5s",
        "--gpus-from",
        str(gpus),
        *flags,
        "--",
        *twin(scenario, port, gpus, *twin_flags),
    ]
    got_code, out, err = cli(args)
    evs = events(out)
    summary = evs[-1]
    assert (got_code, summary["outcome"]) == (code, outcome), err[-2000:]
    if cls is not None:
        assert summary["failure"]["class"] == cls
    if scenario == "die_after_ready":
        kinds = [e["event"] for e in evs]
        assert kinds.index("ready") < kinds.index("failure")
    if outcome == "ready":
        assert any(e["event"] == "gpu" for e in evs)  # GPU memory from the twin's readings file
    assert processes_running(port) == []


def test_twin_port_in_use(tmp_path):
    """The port taken by someone else: port_in_use, exit 1, and the other listener untouched."""
    port = free_port()
    gpus = tmp_path / "gpus.json"
    with socket.socket() as other:
        other.bind(("0.0.0.0", port))
        other.listen()
        code, out, _ = cli(
            [
                "run",
                "--json",
                "--grace",
                "5s",
                "--gpus-from",
                str(gpus),
                "--",
                *twin("port_in_use", port, gpus),
            ]
        )
        assert other.fileno() != -1
    summary = events(out)[-1]
    assert code == 1
    assert summary["failure"]["class"] == "port_in_use"


def test_run_bench_measures_the_ready_server_then_stops_it():
    """`run --bench --exit-when-ready`: at ready the benchmark runs against the live server, then it is stopped."""
    port = free_port()
    twin = [
        sys.executable,
        "-m",
        "bringup",
        "twin",
        "vllm",
        "--scenario",
        "ready",
        "--port",
        str(port),
        "--time-scale",
        "0.02",
        "--token-rate",
        "200",
    ]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bringup",
            "run",
            "--json",
            "--bench",
            "--exit-when-ready",
            "--",
            *twin,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    objects = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    # when it fails (seen once under load: "failed in ready" after the benchmark), say why
    why = [o for o in objects if o.get("event") in ("failure", "exited")]
    assert proc.returncode == 0, f"{why}\n{proc.stderr[-2000:]}"
    summary = objects[-1]
    assert summary["event"] == "summary"
    assert summary["outcome"] == "ready"
    assert "Output token throughput (tok/s)" in proc.stderr
    assert "Successful requests" in proc.stderr
    assert processes_running(port) == []
