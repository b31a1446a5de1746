"""Benchmark: `bringup up` through a real systemd 252 and journald, against `bringup run` on
the same engine-twin scenarios, in one run.

Not a test. Run: ``.venv/bin/python bench/bench_systemd.py [--rounds N] [--out FILE]`` (root:
it boots systemd as PID 1 of its own namespaces, tests/builders/systemd_ns.py; elsewhere it
writes nothing and says why).

- detection latency: the root-cause line's journal timestamp (``__REALTIME_TIMESTAMP`` of the
  entry journald stored) → `up` printing its FAILED verdict; for `run`, the moment `run`
  echoed that line → its FAILED verdict (the twin's sampler-warmup OOM, ``oom_warmup``);
- ready latency: READY=1 (the journal's "Started NAME.service", written when systemd got it)
  → `up`'s exit; and the server's "Application startup complete." line → the verdict, for
  `up` (journal timestamp → exit) and for `run` (echoed → its READY line).

Wall-clock stamps on one machine (``time.time()`` and journald's realtime clock agree).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from builders.systemd_ns import BootError, SystemdNamespace, why_not  # noqa: E402

BRINGUP = str(Path(sys.executable).with_name("bringup"))
SCALE = "0.01"
READY_LINE = "Application startup complete."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def twin(port: int, gpus: Path, scenario: str) -> list[str]:
    return [BRINGUP, "twin", "vllm", "--scenario", scenario, "--port", str(port), "--host",
            "127.0.0.1", "--gpus-file", str(gpus), "--time-scale", SCALE]  # fmt: skip


def stamped(argv: list[str], env: dict[str, str]) -> tuple[int, list[tuple[float, str]], float]:
    """Run ``argv``; every output line with the wall time it was read; the exit time."""
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    lines = [(time.time(), line.rstrip("\n")) for line in proc.stdout]
    code = proc.wait()
    return code, lines, time.time()


def first(lines: list[tuple[float, str]], text: str) -> tuple[float, str]:
    return next((t, line) for t, line in lines if text in line)


def journal(sd: SystemdNamespace, unit: str) -> list[tuple[float, str]]:
    out = sd.run(["journalctl", "-u", unit, "-o", "json", "--no-pager"]).stdout
    entries = []
    for raw in out.splitlines():
        entry = json.loads(raw)
        message = entry.get("MESSAGE")
        if isinstance(message, str):
            entries.append((int(entry["__REALTIME_TIMESTAMP"]) / 1e6, message))
    return entries


def install(sd: SystemdNamespace, name: str, gpus: Path, scenario: str) -> None:
    argv = [BRINGUP, "unit", name, "--install", "--gpus-from", str(gpus), "--bringup", BRINGUP,
            "--restart-sec", "30s", "--", *twin(free_port(), gpus, scenario)]  # fmt: skip
    subprocess.run(argv, env=sd.env(), check=True, capture_output=True)


def up_round(sd: SystemdNamespace, work: Path, n: int) -> dict[str, float]:
    from bringup.demo import write_readings

    gpus = work / f"gpus-{n}.json"
    write_readings(gpus)
    out: dict[str, float] = {}
    name = f"bench-oom-{n}"
    install(sd, name, gpus, "oom_warmup")
    code, lines, _ = stamped([BRINGUP, "up", name, "--gpus-from", str(gpus)], sd.env())
    assert code == 1, lines[-5:]
    verdict, _ = first(lines, "FAILED:")
    root = first(lines, "root cause: ")[1].split("root cause: ", 1)[1]
    written = next(t for t, m in journal(sd, f"{name}.service") if m == root)
    out["up_detect"] = verdict - written
    sd.systemctl("stop", f"{name}.service", check=False)
    name = f"bench-ready-{n}"
    install(sd, name, gpus, "ready")
    code, lines, exited = stamped([BRINGUP, "up", name, "--gpus-from", str(gpus)], sd.env())
    assert code == 0, lines[-5:]
    entries = journal(sd, f"{name}.service")
    started = next(t for t, m in entries if m.startswith(f"Started {name}.service"))
    server_ready = next(t for t, m in entries if READY_LINE in m)
    out["up_ready_notify"] = exited - started
    out["up_ready_line"] = exited - server_ready
    sd.systemctl("stop", f"{name}.service", check=False)
    return out


def run_round(work: Path, n: int) -> dict[str, float]:
    from bringup.demo import write_readings

    gpus = work / f"run-gpus-{n}.json"
    write_readings(gpus)
    env = {**os.environ, "NO_COLOR": "1"}
    code, lines, _ = stamped(
        [BRINGUP, "run", "--gpus-from", str(gpus), "--", *twin(free_port(), gpus, "oom_warmup")],
        env,
    )
    assert code == 1, lines[-5:]
    verdict, _ = first(lines, "FAILED:")
    root = first(lines, "root cause: ")[1].split("root cause: ", 1)[1]
    echoed = next(t for t, line in lines if line == root)
    out = {"run_detect": verdict - echoed}
    code, lines, _ = stamped(
        [BRINGUP, "run", "--exit-when-ready", "--gpus-from", str(gpus), "--",
         *twin(free_port(), gpus, "ready")], env,
    )  # fmt: skip
    assert code == 0, lines[-5:]
    out["run_ready_line"] = first(lines, "READY: ")[0] - first(lines, READY_LINE)[0]
    return out


def fmt(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    return f"median {statistics.median(ms):.0f} ms, max {ms[-1]:.0f} ms (n={len(ms)})"


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench/results/systemd.md"))
    args = ap.parse_args()
    reason = why_not()
    if reason:
        print(f"bench_systemd: skipped, a real systemd cannot boot here ({reason})")
        return 0
    work = Path(tempfile.mkdtemp(prefix="bringup-bench-systemd-"))
    try:
        sd = SystemdNamespace.start(work / "systemd", name="bringup-bench")
    except BootError as exc:
        print(f"bench_systemd: skipped, a real systemd cannot boot here ({exc})")
        return 0
    figures: dict[str, list[float]] = {}
    load_before = _load()
    try:
        for n in range(args.rounds):
            for key, value in {**up_round(sd, work, n), **run_round(work, n)}.items():
                figures.setdefault(key, []).append(value)
    finally:
        sd.close()
    load_after = _load()
    rows = [
        ("Detection: root-cause line in the journal → `up`'s FAILED verdict", "up_detect"),
        ("Detection: root-cause line echoed by `run` → `run`'s FAILED verdict", "run_detect"),
        ("Ready: READY=1 (systemd's \"Started\") → `up`'s exit", "up_ready_notify"),
        (f"Ready: server's \"{READY_LINE}\" in the journal → `up`'s exit", "up_ready_line"),
        (f"Ready: server's \"{READY_LINE}\" echoed by `run` → `run`'s READY", "run_ready_line"),
    ]
    text = [
        "# systemd (`bringup up` through a real systemd 252 and journald, vs `bringup run`)",
        "",
        (
            f"Measured with `bench/bench_systemd.py` on {platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()} (a shared, loaded machine), in one run: the engine twin "
            f"(`oom_warmup` and `ready`, time scale {SCALE}) as units written by `bringup unit`, systemd "
            "252 as PID 1 of its own namespaces, bringup reaching it through `BRINGUP_COMMAND_PREFIX`."
        ),
        "",
        (
            f"Load average (1, 5, 15 min): {load_before} before, {load_after} after; "
            f"{args.rounds} rounds, each an `up` round then a `run` round (interleaved)."
        ),
        "",
        "| Figure | Result |",
        "|---|---|",
        *[f"| {label} | {fmt(figures[key])} |" for label, key in rows],
        "",
        "`up` reads the journal through `journalctl -f -o json` (one more process and journald's own",
        "delivery between the server and bringup) and, for ready, sends its own health, /v1/models and",
        "smoke requests to the port of the command inside the unit; `run` reads the server's pipes.",
        "",
    ]
    Path(args.out).write_text("\n".join(text))
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
