"""Benchmark: the live supervisor (`bringup run`) against the scripted fake vLLM server.

Not a test. Run: ``.venv/bin/python bench/bench_supervisor.py [--runs N] [--seconds S] [--out FILE]``.

- detection latency: from the moment the server writes the root-cause line (it stamps
  ``time.time()`` just before) to the failure verdict (``on_event`` of ``run_startup``);
- ready latency: from the moment the server's socket listens (stamped right after
  ``listen()``) to the ready verdict (health, /v1/models and the 1-token smoke request done);
- CPU time and peak RSS of a ``bringup run`` process (its own, not the server's) following a
  chatty serving engine for S seconds after ready: access-log, stats and NCCL lines at
  200 lines/s, and separately at 2,000 lines/s. The engine's lines are echoed (plain output
  to a pipe, as under systemd), which is the realistic, more expensive case.

Goals (issue 5): detection < 1 s, ready < 0.5 s, < 2 % of one core, < 80 MB.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from bringup.core.live import LiveEvent
from bringup.follow.types import StartupConfig
from bringup.follow.wiring import follow_local

ROOT = Path(__file__).resolve().parents[1]
FAKE = ROOT / "tests/run/fake_server.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_latency(mode: str, event: str) -> float:
    """Seconds from the server's stamp to the ``event`` verdict."""
    with tempfile.TemporaryDirectory() as tmp:
        stamp = Path(tmp) / "stamp"
        argv = (
            sys.executable,
            str(FAKE),
            "--mode",
            mode,
            "--port",
            str(free_port()),
            "--stamp",
            str(stamp),
            "--shards",
            "2",
            "--step",
            "0.3",
            "--linger",
            "30",
        )
        seen: dict[str, float] = {}

        def on_event(e: LiveEvent) -> None:
            seen.setdefault(e.event, time.time())

        config = StartupConfig(
            argv=argv, exit_when_ready=True, grace_seconds=2.0, environ=dict(os.environ)
        )
        follow_local(config, on_event=on_event)
        return seen[event] - float(stamp.read_text())


def latencies(mode: str, event: str, runs: int) -> list[float]:
    return [one_latency(mode, event) for _ in range(runs)]


def follow_cost(rate: float, seconds: float) -> dict[str, float]:
    """CPU seconds and peak RSS of `bringup run` following a chatty engine for ``seconds``."""
    argv = [
        sys.executable,
        "-m",
        "bringup",
        "run",
        "--stall",
        "0",
        "--",
        sys.executable,
        str(FAKE),
        "--mode",
        "chatty",
        "--rate",
        str(rate),
        "--port",
        str(free_port()),
        "--shards",
        "0",
    ]
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    ps = psutil.Process(proc.pid)
    assert proc.stdout is not None
    lines = 0
    ready = threading.Event()

    def drain() -> None:
        nonlocal lines
        assert proc.stdout is not None
        for raw in proc.stdout:
            lines += 1
            if b"READY" in raw:
                ready.set()

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    ready.wait(60)
    time.sleep(1.0)
    cpu0 = sum(ps.cpu_times()[:2])
    lines0, t0 = lines, time.monotonic()
    peak = 0
    while time.monotonic() - t0 < seconds:
        peak = max(peak, ps.memory_info().rss)
        time.sleep(0.5)
    cpu1 = sum(ps.cpu_times()[:2])
    elapsed = time.monotonic() - t0
    got = lines - lines0
    hwm = _vm_hwm(proc.pid)
    proc.terminate()
    proc.wait(30)
    return {
        "rate": rate,
        "seconds": elapsed,
        "lines_per_second": got / elapsed,
        "cpu_seconds": cpu1 - cpu0,
        "cpu_percent_of_one_core": 100.0 * (cpu1 - cpu0) / elapsed,
        "peak_rss_mb": max(peak, hwm) / 1e6,
    }


def _vm_hwm(pid: int) -> int:
    """Peak resident set size (VmHWM) in bytes, from /proc; 0 where there is no /proc."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def fmt(xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, round(0.9 * (len(xs) - 1)))]
    return f"median {statistics.median(xs) * 1000:.0f} ms, p90 {p90 * 1000:.0f} ms, max {xs[-1] * 1000:.0f} ms (n={len(xs)})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--out", default=str(ROOT / "bench/results/supervisor.md"))
    args = ap.parse_args()
    detect = latencies("oom", "failure", args.runs)
    print("detection:", fmt(detect), flush=True)
    ready = latencies("ready", "ready", args.runs)
    print("ready:", fmt(ready), flush=True)
    costs = [follow_cost(rate, args.seconds) for rate in (200.0, 2000.0)]
    for c in costs:
        print(c, flush=True)
    write(Path(args.out), detect, ready, costs)


def write(
    path: Path, detect: list[float], ready: list[float], costs: list[dict[str, float]]
) -> None:
    cpu = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    rows = "\n".join(
        f"| {c['rate']:.0f} lines/s (measured {c['lines_per_second']:.0f}) | {c['seconds']:.0f} s | "
        f"{c['cpu_seconds']:.2f} s | {c['cpu_percent_of_one_core']:.2f} % | {c['peak_rss_mb']:.1f} MB |"
        for c in costs
    )
    text = f"""# Supervisor (`bringup run` / `bringup watch`)

Measured with `bench/bench_supervisor.py` on {cpu} (a shared, loaded machine), against
the scripted fake vLLM server `tests/run/fake_server.py`, in one run.

| Figure | Result | Goal |
|---|---|---|
| Detection: root-cause line written → failure verdict | {fmt(detect)} | < 1 s |
| Ready: server socket listening → ready verdict (health + /v1/models + 1-token smoke) | {fmt(ready)} | < 0.5 s |

Following a serving engine after ready (access-log, stats and NCCL lines; the engine's
lines echoed to a pipe as under systemd); `bringup run`'s own process only:

| Engine output | Followed for | CPU time | Share of one core | Peak RSS |
|---|---|---|---|---|
{rows}

Goals: < 2 % of one core (at the realistic 100-300 lines/s), < 80 MB.
Ready latency is bounded by the probe interval (0.25 s between refused connects) plus the
three requests; detection is one queue hop from the reader thread.
"""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
