"""Benchmark: `bringup run` following REAL vLLM 0.32 (CPU build) beside the engine twin, in one run.

Not a test. Run: ``.venv/bin/python bench/bench_vllm_real.py [--runs N] [--follow S] [--out FILE]``
(real vLLM from scripts/install-vllm.sh; every vLLM it starts goes through
/work/locks/with-vllm-slot when that exists).

The server is started under a small stamping relay (``stamp_relay``): it passes the server's
output through line by line and notes, out of band, when each line was written. So:

- detection latency: the root-cause line written (its stamp) -> the failure verdict;
- ready latency: "Application startup complete." written -> the ready verdict (health,
  /v1/models and the 1-token smoke answer included);
- the supervisor's CPU time and peak RSS: `bringup run`'s own process (not the server's),
  sampled every 0.1 s, over the startup and ``--follow`` seconds of serving after ready.

Cases: real vLLM with the KV cache too small (``--kv-cache-memory-bytes 262144 --max-model-len
2048``) and a ready start; the twin's ``kv_insufficient`` and ``ready`` scenarios. Results go
to bench/results/vllm_real.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from builders.vllm_env import (  # noqa: E402
    remove_environ,
    serve_argv,
    tiny_model,
    vllm_environ,
    vllm_problem,
)

SLOT = Path("/work/locks/with-vllm-slot")
RELAY = r"""
import subprocess, sys, time
stamps = open(sys.argv[1], "w")
p = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
for raw in p.stdout:
    sys.stdout.buffer.write(raw); sys.stdout.flush()
    stamps.write(f"{time.time():.6f} {raw.decode(errors='replace').rstrip()}\n"); stamps.flush()
sys.exit(p.wait())
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def follow(server: list[str], env: dict[str, str], follow_s: float, tmp: Path) -> dict[str, Any]:
    """Run `bringup run --json` on ``server`` behind the relay; measure it."""
    stamps = tmp / f"stamps-{time.monotonic_ns()}.txt"
    relayed = [sys.executable, "-c", RELAY, str(stamps), *server]
    argv = [sys.executable, "-m", "bringup", "run", "--engine", "vllm", "--json", "--quiet"]
    argv += ["--grace", "15s", "--", *relayed]
    seen: dict[str, float] = {}
    events: list[dict[str, Any]] = []
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    me = psutil.Process(proc.pid)

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("{"):
                e = json.loads(line)
                events.append(e)
                seen.setdefault(e["event"], time.time())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    peak = 0
    cpu = me.cpu_times()
    while proc.poll() is None:
        try:
            peak = max(peak, me.memory_info().rss)
            cpu = me.cpu_times()
        except psutil.Error:
            break
        if "ready" in seen and time.time() - seen["ready"] >= follow_s:
            proc.send_signal(signal.SIGTERM)  # stop after following the serving engine
            break
        time.sleep(0.1)
    proc.wait(timeout=180)
    reader.join(10)
    lines = [ln.split(" ", 1) for ln in stamps.read_text().splitlines() if " " in ln]
    out: dict[str, Any] = {
        "cpu_seconds": cpu.user + cpu.system,
        "peak_rss_mb": peak / 2**20,
        "outcome": events[-1].get("outcome") if events else None,
    }
    failure = next((e for e in events if e["event"] == "failure"), None)
    if failure is not None:
        written = next((float(t) for t, text in lines if text == failure["line"]), None)
        if written is not None:
            out["detection_s"] = seen["failure"] - written
    if "ready" in seen:
        written = next(
            (float(t) for t, text in lines if text.endswith("Application startup complete.")),
            None,
        )
        if written is not None:
            out["ready_s"] = seen["ready"] - written
    return out


def slot(argv: list[str]) -> list[str]:
    return [str(SLOT), *argv] if SLOT.exists() else argv


def median(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} ms" if values else "n/a"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--follow", type=float, default=30.0)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "vllm_real.md"))
    args = ap.parse_args()
    problem = vllm_problem()
    if problem is not None:
        print(f"bench_vllm_real: skipped: {problem} (scripts/install-vllm.sh)")
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="bench-vllm-"))
    try:
        model = tiny_model(tmp, 1)
        results: dict[str, list[dict[str, Any]]] = {}
        for n in range(args.runs):
            env = vllm_environ(tmp / f"env-{n}")
            kv_env = dict(env)
            kv_env.pop("VLLM_CPU_KVCACHE_SPACE", None)
            twin = [sys.executable, "-m", "bringup", "twin", "vllm", "--time-scale", "0.05"]
            cases = {
                "real vLLM, KV cache too small": (
                    serve_argv(
                        model, free_port(), "--kv-cache-memory-bytes", "262144", max_model_len=2048
                    ),
                    kv_env,
                ),
                "real vLLM, ready": (serve_argv(model, free_port()), env),
                "twin, kv_insufficient": (
                    [*twin, "--scenario", "kv_insufficient", "--port", str(free_port())],
                    env,
                ),
                "twin, ready": ([*twin, "--scenario", "ready", "--port", str(free_port())], env),
            }
            for name, (server, case_env) in cases.items():
                wrapped = slot(server) if name.startswith("real") else server
                r = follow(wrapped, case_env, args.follow, tmp)
                print(f"{name}: {r}", flush=True)
                results.setdefault(name, []).append(r)
            remove_environ(tmp / f"env-{n}")
        write(results, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def write(results: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> None:
    rows = []
    for name, runs in results.items():
        det = [r["detection_s"] for r in runs if "detection_s" in r]
        rdy = [r["ready_s"] for r in runs if "ready_s" in r]
        cpu = max(r["cpu_seconds"] for r in runs)
        rss = max(r["peak_rss_mb"] for r in runs)
        rows.append(
            f"| {name} | {median(det) if det else '-'} | {median(rdy) if rdy else '-'} "
            f"| {cpu:.2f} s | {rss:.1f} MB | {len(runs)} |"
        )
    text = f"""# Real vLLM under `bringup run` (beside the twin)

Measured with `bench/bench_vllm_real.py` on {platform.machine()}, {os.cpu_count()} cores, Python
{platform.python_version()} (a shared, loaded machine), real vLLM 0.32.0 CPU build on the tiny
2-layer Llama (`--enforce-eager`), and the engine twin, in one run. Latencies are medians; CPU
and RSS are `bringup run`'s own process (the worst run), over the startup and, for ready
cases, {args.follow:g} s of serving after ready.

| Case | Detection: root-cause line written -> verdict | Ready: "Application startup complete." -> verdict | bringup CPU | bringup peak RSS | Runs |
|---|---|---|---|---|---|
{chr(10).join(rows)}

Detection is one queue hop from the reader thread; the ready latency includes /health,
/v1/models and the 1-token smoke completion against the real server.
"""
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
