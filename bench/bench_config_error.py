"""Benchmark: how soon `bringup run` names a real vLLM config error, tree against tree, in one run.

Not a test. Run (under the machine's measuring slot; each vLLM takes a vLLM slot itself)::

    git worktree add --detach /tmp/before COMMIT
    /work/locks/measure .venv/bin/python bench/bench_config_error.py \
        --tree before=/tmp/before --tree after=. --rounds 3

Real vLLM 0.32 (CPU build) on the tiny Llama with ``--max-model-len 4096`` (the model has 2048
positions): vLLM prints the ``User-specified max_model_len`` error, then tears itself down.
Each tree's own ``bringup run --json`` follows it behind ``bench_vllm_real``'s stamping relay:
the detection latency is the root-cause line written -> the failure verdict. A tree that holds
every config error for the follower's grace (2 s) names it at the grace or at vLLM's exit,
whichever comes first. The trees run in the order A B, B A, ... (the load falls on both alike).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_vllm_real as real  # noqa: E402


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", action="append", required=True, help="NAME=PATH (a checkout)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "config_error.md")
    args = ap.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree)
    problem = real.vllm_problem()
    if problem is not None:
        print(f"bench_config_error: skipped: {problem} (scripts/install-vllm.sh)")
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="bench-config-error-"))
    got: dict[str, list[float]] = {name: [] for name in trees}
    order: list[str] = []
    load_before = load()
    try:
        model = real.tiny_model(tmp, 1)
        names = list(trees)
        for r in range(args.rounds):
            for name in names if r % 2 == 0 else names[::-1]:
                env = real.vllm_environ(tmp / f"env-{name}-{r}")
                env["PYTHONPATH"] = str(Path(trees[name]).resolve() / "src")
                server = real.serve_argv(model, real.free_port(), max_model_len=4096)
                out = real.follow(real.slot(server), env, 0.0, tmp)
                print(name, out, flush=True)
                if "detection_s" in out:
                    got[name].append(out["detection_s"])
                order.append(name)
                real.remove_environ(tmp / f"env-{name}-{r}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = "\n".join(
        f"| {name} ({trees[name]}) | {statistics.median(xs) * 1000:.0f} ms | "
        f"{', '.join(f'{x * 1000:.0f}' for x in xs)} ms |"
        if xs
        else f"| {name} ({trees[name]}) | - | no detection |"
        for name, xs in got.items()
    )
    text = f"""# Real vLLM config error: line -> verdict (`bench/bench_config_error.py`)

One run on {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}
(a shared machine; load average {load_before} before, {load()} after), real vLLM 0.32.0 CPU
build, `--max-model-len 4096` on the tiny Llama of 2048 positions, in the order
{", ".join(order)}.

| Tree | Detection, median | Each run |
|---|---|---|
{rows}
"""
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
