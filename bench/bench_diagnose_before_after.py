"""diagnose's speed for several trees (before and after changes), in one run, interleaved.

Not a test. Run (under the machine's measuring slot)::

    git worktree add --detach /tmp/old COMMIT
    /work/locks/measure .venv/bin/python bench/bench_diagnose_before_after.py \
        --tree "before=/tmp/old" --tree "after=." --rounds 2

One workload for every tree, made by this checkout's ``bench/bench_diagnose.py``: its
1,000,000-line vLLM log (noise around a real startup that fails near the end) and 1 MiB of
5-byte lines that each pass the screen with no engine known (``x.py``). Each tree's ``src``
first on the path, in a fresh process per tree and round, in the order A B C, C B A, ...:

- ``diagnose_bytes`` on the log in memory (best of 3);
- ``LogAnalyzer.feed`` per line over the log (the live path, 1 run);
- a whole ``bringup diagnose --json`` process on the 1 MiB of 5-byte lines (wall clock).
"""

from __future__ import annotations

import argparse
import ast
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_diagnose import make_log  # noqa: E402  (this checkout's: one workload for all trees)

CODE = """
import sys, time
from pathlib import Path
from bringup.core.analyzer import LogAnalyzer, diagnose_bytes
data = Path(sys.argv[1]).read_bytes()
best = float("inf")
for _ in range(3):
    t = time.perf_counter(); d = diagnose_bytes(data); best = min(best, time.perf_counter() - t)
lines = data.decode().split("\\n")[:-1]
t = time.perf_counter()
a = LogAnalyzer()
for line in lines:
    a.feed(line)
live = a.finish()
feed = time.perf_counter() - t
assert live.failure is not None and d.failure is not None
print({"bytes": best, "feed": feed, "line": d.failure.line_number, "live_line": live.failure.line_number})
"""


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def one_run(tree: Path, log: Path, short: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "NO_COLOR": "1"}
    argv = [sys.executable, "-c", CODE, str(log)]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: {proc.stderr[-3000:]}")
    got: dict[str, float] = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "bringup", "diagnose", "--json", str(short)],
        env=env,
        capture_output=True,
        check=False,
    )
    got["short"] = time.perf_counter() - start
    return got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", action="append", required=True, help="NAME=PATH (a checkout)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/diagnose_before_after.md")
    args = ap.parse_args()
    trees = {name: Path(path).resolve() for name, path in (t.split("=", 1) for t in args.tree)}
    got: dict[str, list[dict[str, float]]] = {k: [] for k in trees}
    names = list(trees)
    order: list[str] = []
    for r in range(args.rounds):
        order += names if r % 2 == 0 else names[::-1]
    load_before = load()
    with tempfile.TemporaryDirectory(prefix="bench-diagnose-ba-") as tmp:
        short = Path(tmp) / "short.log"
        short.write_bytes(b"x.py\n" * ((1 << 20) // 5))
        log = Path(tmp) / "vllm_1m.log"
        log.write_bytes(make_log(args.lines))
        for name in order:
            got[name].append(one_run(trees[name], log, short))
            print(name, got[name][-1], "load", load(), flush=True)
    lines = {(r["line"], r["live_line"]) for runs in got.values() for r in runs}

    def med(runs: list[dict[str, float]], key: str) -> str:
        return f"{statistics.median(r[key] for r in runs):.3f} s"

    rows = "\n".join(
        f"| {name} | {med(runs, 'bytes')} | {med(runs, 'feed')} | {med(runs, 'short')} |"
        for name, runs in got.items()
    )
    cpu = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    text = f"""# diagnose, tree against tree (`bench/bench_diagnose_before_after.py`)

One run on {cpu} (a shared machine; load average {load_before} before, {load()} after), under
`/work/locks/measure`. Trees: {", ".join(f"{k} = {v}" for k, v in trees.items())}. One workload
(this checkout's `bench/bench_diagnose.py`): the {args.lines:,}-line log and 1 MiB of 5-byte
lines (`x.py`, each passing the screen with no engine known); in the order {", ".join(order)};
medians over the rounds. The root-cause line (whole buffer, live): {sorted(lines)}.

| Tree | 1M-line log in memory (`diagnose_bytes`, best of 3) | 1M-line log fed line by line (live path) | 1 MiB of 5-byte lines, whole `bringup diagnose` |
|---|---|---|---|
{rows}
"""
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
