"""Benchmark of `bringup plan` (a script, not a test): run it, paste the figures.

    .venv/bin/python bench/bench_plan.py [--out bench/results/plan.md]

1. Plan on a synthetic 125-shard checkpoint (sparse shards holding Llama-3.1-70B's tensors in
   BF16, ~141 GB apparent, no disk use): headers only. Timed in-process (scan + plan) and as
   the whole CLI in a fresh process. Goal: under 1 s. For comparison, in the same run: the
   bare-config path (tensors synthesised from config.json) on the same architecture.
2. Accuracy against the reference points from public vLLM logs (tests/plan/reference_points.py):
   median error of weights per GPU and of KV tokens.
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from bringup.cli.main import Context, main  # noqa: E402
from plan.helpers import bundled_config  # noqa: E402
from plan.reference_points import POINTS, accuracy  # noqa: E402

from builders.safetensors import write_checkpoint  # noqa: E402


def _llama70b_checkpoint(folder: Path) -> Path:
    cfg = bundled_config("Llama-3.1-70B")
    return write_checkpoint(
        folder,
        n_shards=125,
        hidden=8192,
        layers=80,
        heads=64,
        kv_heads=8,
        intermediate=28672,
        vocab=128256,
        config=cfg,
    )


def _time_in_process(argv: list[str], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        out = io.StringIO()
        start = time.perf_counter()
        main(argv, Context(stdout=out, stderr=io.StringIO(), environ={"NO_COLOR": "1"}))
        times.append(time.perf_counter() - start)
        json.loads(out.getvalue())
    return times


def _time_process(argv: list[str], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "bringup", *argv], capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return times


def main_bench() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(ROOT / "bench/results/plan.md"))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = _llama70b_checkpoint(Path(tmp) / "llama70b")
        apparent = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
        argv = ["plan", str(folder), "--gpu", "H100", "--gpus", "4", "-tp", "4", "--json"]
        in_proc = _time_in_process(argv, args.repeat)
        proc = _time_process(argv, args.repeat)
        cfg = str(folder / "config.json")
        bare = _time_in_process(
            ["plan", cfg, "--gpu", "H100", "--gpus", "4", "-tp", "4", "--json"], args.repeat
        )
    acc = accuracy()
    lines = [
        "# bringup plan: benchmark and accuracy",
        "",
        (
            f"Machine: {platform.machine()}, Python {platform.python_version()}, {platform.system()}; "
            f"median of {args.repeat} runs."
        ),
        "",
        "## Plan on a 125-shard checkpoint (headers only)",
        "",
        (
            f"Synthetic Llama-3.1-70B BF16 checkpoint, 125 sparse shards, {apparent / 1e9:.1f} GB apparent size, "
            "TP 4 on H100. Goal: under 1 s."
        ),
        "",
        "| what | median s | min s |",
        "|---|---|---|",
        f"| scan headers + plan, in process | {statistics.median(in_proc):.3f} | {min(in_proc):.3f} |",
        f"| `python -m bringup plan FOLDER --json` (fresh process) | {statistics.median(proc):.3f} | {min(proc):.3f} |",
        f"| same architecture from config.json alone, in process | {statistics.median(bare):.3f} | {min(bare):.3f} |",
        "",
        "## Accuracy against public vLLM logs",
        "",
        (
            f"Median |error| of weights per GPU: {100 * acc['median_weights_error']:.1f} % "
            f"(goal 2 %); KV tokens: {100 * (acc['median_kv_tokens_error'] or 0):.1f} % (goal 5 %)."
        ),
        "",
        (
            "| point | source | weights predicted GiB | weights error | KV predicted GiB | KV error GiB | "
            "KV tokens error | bytes/token check | verdict | note |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p, r in zip(POINTS, acc["rows"], strict=True):

        def pct(key: str, row: dict[str, object] = r) -> str:
            v = row.get(key)
            return f"{100 * v:+.1f} %" if isinstance(v, float) else "-"

        kv_err = r.get("kv_gib_error")
        lines.append(
            f"| {p.name} | {p.source} | {r['weights_gib']:.2f} | {pct('weights_error')} | {r['kv_gib']:.2f} | "
            f"{kv_err:+.2f} |"
            if isinstance(kv_err, float)
            else f"| {p.name} | {p.source} | {r['weights_gib']:.2f} | {pct('weights_error')} | {r['kv_gib']:.2f} | - |"
        )
        lines[-1] += (
            f" {pct('kv_tokens_error')} | {pct('kv_tokens_from_measured_pool_error')} | {r['verdict']} | {p.note} |"
        )
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main_bench()
