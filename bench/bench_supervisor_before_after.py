"""The supervisor's figures before and after a change, in one run, interleaved.

Not a test. Run (under the machine's measuring slot)::

    git worktree add --detach /tmp/before COMMIT
    /work/locks/measure .venv/bin/python bench/bench_supervisor_before_after.py \
        --before /tmp/before --after . --rounds 2 --runs 8 --seconds 20

Each tree's own ``bench/bench_supervisor.py`` functions run with that tree's ``src`` first on the
path (and its own fake server), in the order before, after, after, before, ... so that a
load that drifts during the run falls on both sides alike. The detection and ready
latencies of every round are pooled per tree; the follow cost is the median of the rounds.
"""

from __future__ import annotations

import argparse
import ast
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def one_run(tree: Path, runs: int, seconds: float) -> dict[str, object]:
    """``tree``'s own ``bench_supervisor`` functions: its latencies (s) and follow costs."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "NO_COLOR": "1"}
    code = (
        "import sys; sys.path[:0] = [sys.argv[1]]; import bench_supervisor as b; "
        "n, s = int(sys.argv[2]), float(sys.argv[3]); "
        "print('raw detect', b.latencies('oom', 'failure', n), flush=True); "
        "print('raw ready', b.latencies('ready', 'ready', n), flush=True); "
        "[print(b.follow_cost(r, s), flush=True) for r in (200.0, 2000.0)]"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tree / "bench"), str(runs), str(seconds)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, object] = {"costs": []}
    for line in proc.stdout.splitlines():
        if line.startswith("raw "):
            name, values = line[4:].split(" ", 1)
            found[name] = ast.literal_eval(values)
        elif line.startswith("{"):
            found["costs"].append(ast.literal_eval(line))  # type: ignore[attr-defined]
    return found


def fmt(xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, round(0.9 * (len(xs) - 1)))]
    return f"median {statistics.median(xs) * 1000:.0f} ms, p90 {p90 * 1000:.0f} ms (n={len(xs)})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, default=ROOT)
    ap.add_argument("--before-name", default="before")
    ap.add_argument("--after-name", default="after")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/supervisor_before_after.md")
    args = ap.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    pooled: dict[str, dict[str, list]] = {
        k: {"detect": [], "ready": [], "c200": [], "c2000": []} for k in trees
    }
    load_before = load()
    order = []
    for r in range(args.rounds):
        order += ["before", "after"] if r % 2 == 0 else ["after", "before"]
    for side in order:
        got = one_run(trees[side], args.runs, args.seconds)
        pooled[side]["detect"] += got["detect"]  # type: ignore[arg-type]
        pooled[side]["ready"] += got["ready"]  # type: ignore[arg-type]
        for cost in got["costs"]:  # type: ignore[attr-defined]
            pooled[side]["c200" if cost["rate"] < 1000 else "c2000"].append(cost)
        print(side, "done; load", load(), flush=True)
    load_after = load()
    write(args, trees, pooled, load_before, load_after, order)


def _cost(costs: list[dict[str, float]]) -> str:
    cpu = statistics.median(c["cpu_percent_of_one_core"] for c in costs)
    rss = statistics.median(c["peak_rss_mb"] for c in costs)
    return f"{cpu:.2f} % of one core, {rss:.1f} MB"


def write(args, trees, pooled, load_before, load_after, order) -> None:
    names = {"before": args.before_name, "after": args.after_name}
    rows = "\n".join(
        f"| {names[k]} | {fmt(pooled[k]['detect'])} | {fmt(pooled[k]['ready'])} | "
        f"{_cost(pooled[k]['c200'])} | {_cost(pooled[k]['c2000'])} |"
        for k in ("before", "after")
    )
    cpu = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    text = f"""# Supervisor before and after (`bench/bench_supervisor_before_after.py`)

One run on {cpu} (a shared machine; load average {load_before} before, {load_after} after),
each tree's own `bench/bench_supervisor.py` ({args.runs} runs per latency, {args.seconds:g} s
per follow cost), in the order {", ".join(names[s] for s in order)}; latencies pooled over the
rounds, follow costs the median of the rounds.

| Tree | Detection: root-cause line → failure verdict | Ready: listening → ready verdict | Following 200 lines/s | Following 2,000 lines/s |
|---|---|---|---|---|
{rows}
"""
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
