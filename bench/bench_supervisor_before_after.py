"""The supervisor's figures for several trees (before and after changes), in one run, interleaved.

Not a test. Run (under the machine's measuring slot)::

    git worktree add --detach /tmp/old COMMIT
    /work/locks/measure .venv/bin/python bench/bench_supervisor_before_after.py \
        --tree "15c74cd=/tmp/old" --tree "main=/tmp/main" --tree "after=." \
        --rounds 2 --runs 5 --seconds 15

Each tree's own ``bench/bench_supervisor.py`` functions run with that tree's ``src`` first on the
path, against ONE workload: this checkout's fake server (``tests/run/fake_server.py``), so every
tree follows the same lines. The trees run in the order A B C, C B A, ... so that a load that
drifts during the run falls on every side alike. Figures per tree:

- detection: a sampler-warmup OOM line written -> the failure verdict;
- config error: a ``max_model_len`` config error written -> the failure verdict (the server
  tears down for 3 s: a tree that holds the error for its 2 s grace shows it);
- ready: the socket listening -> the ready verdict;
- the follow cost of ``bringup run`` at each ``--rates`` lines/s (CPU share of one core, peak RSS).

Latencies are pooled over the rounds; follow costs are the median of the rounds.
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
FAKE = ROOT / "tests/run/fake_server.py"

# run inside each tree: its bench_supervisor, this checkout's fake server
CODE = """
import sys
from pathlib import Path
sys.path[:0] = [sys.argv[1]]
import bench_supervisor as b
b.FAKE = Path(sys.argv[2])
n, s = int(sys.argv[3]), float(sys.argv[4])
rates = [float(r) for r in sys.argv[5].split(",") if r]
print("raw detect", b.latencies("oom", "failure", n), flush=True)
print("raw config", b.latencies("config", "failure", n), flush=True)
print("raw ready", b.latencies("ready", "ready", n), flush=True)
for r in rates:
    print(b.follow_cost(r, s), flush=True)
"""


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def one_run(tree: Path, runs: int, seconds: float, rates: str) -> dict[str, object]:
    """``tree``'s own ``bench_supervisor`` functions: its latencies (s) and follow costs."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "NO_COLOR": "1"}
    argv = [sys.executable, "-c", CODE, str(tree / "bench"), str(FAKE), str(runs)]
    argv += [str(seconds), rates]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: {proc.stderr[-3000:]}")
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
    ap.add_argument("--tree", action="append", required=True, help="NAME=PATH (a checkout)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--rates", default="2000")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/supervisor_before_after.md")
    args = ap.parse_args()
    trees = {name: Path(path).resolve() for name, path in (t.split("=", 1) for t in args.tree)}
    pooled: dict[str, dict[str, list]] = {
        k: {"detect": [], "config": [], "ready": [], "costs": []} for k in trees
    }
    load_before = load()
    names = list(trees)
    order: list[str] = []
    for r in range(args.rounds):
        order += names if r % 2 == 0 else names[::-1]
    for name in order:
        got = one_run(trees[name], args.runs, args.seconds, args.rates)
        for key in ("detect", "config", "ready"):
            pooled[name][key] += got[key]  # type: ignore[arg-type]
        pooled[name]["costs"] += got["costs"]  # type: ignore[arg-type]
        print(name, "done; load", load(), flush=True)
    write(args, trees, pooled, load_before, load(), order)


def _cost(costs: list[dict[str, float]], rate: float) -> str:
    mine = [c for c in costs if c["rate"] == rate]
    cpu = statistics.median(c["cpu_percent_of_one_core"] for c in mine)
    rss = statistics.median(c["peak_rss_mb"] for c in mine)
    return f"{cpu:.2f} % of one core, {rss:.1f} MB"


def write(args, trees, pooled, load_before, load_after, order) -> None:
    rates = [float(r) for r in args.rates.split(",") if r]
    head = " | ".join(f"Following {r:,.0f} lines/s" for r in rates)
    rows = "\n".join(
        f"| {name} | {fmt(p['detect'])} | {fmt(p['config'])} | {fmt(p['ready'])} | "
        + " | ".join(_cost(p["costs"], r) for r in rates)
        + " |"
        for name, p in pooled.items()
    )
    cpu = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    text = f"""# Supervisor, tree against tree (`bench/bench_supervisor_before_after.py`)

One run on {cpu} (a shared machine; load average {load_before} before, {load_after} after), under
`/work/locks/measure`. Trees: {", ".join(f"{k} = {v}" for k, v in trees.items())}. Each tree's own
`bench/bench_supervisor.py` against one workload (this checkout's fake server), {args.runs} runs
per latency and {args.seconds:g} s per follow cost, in the order {", ".join(order)}; latencies
pooled over the rounds, follow costs the median of the rounds. The config-error server tears
down for 3 s after its line (the fake's ``--teardown``).

| Tree | Detection: OOM line → failure verdict | Config error line → failure verdict | Ready: listening → ready verdict | {head} |
|---|---|---|---|{"---|" * len(rates)}
{rows}
"""
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
