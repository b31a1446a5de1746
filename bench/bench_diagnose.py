"""Benchmark: diagnose a generated 1,000,000-line vLLM log, beside `grep -c -E` on the same file.

Not a test. Run: ``.venv/bin/python bench/bench_diagnose.py [--lines N] [--out FILE]``.
The log is mostly NCCL INFO lines, uvicorn access-log lines and tqdm download bars, around a
real vLLM 0.33 startup that fails near the end (the MiniMax-M2.5 sampler-warmup OOM).
grep gets the vLLM pack's own failure signatures, translated to POSIX ERE, in one call.
"""

from __future__ import annotations

import argparse
import platform
import random
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bringup.core.analyzer import LogAnalyzer, diagnose_bytes
from bringup.core.packs import vllm

ROOT = Path(__file__).resolve().parents[1]
FAILED_LOG = ROOT / "tests/fixtures/logs/vllm_0.33_minimax_sampler_oom.log"


def noise_line(rng: random.Random, i: int) -> str:
    r = rng.random()
    if r < 0.55:
        rank = i % 4
        return (
            f"gpu-node-07:{4500 + rank}:{4600 + i % 97} [{rank}] NCCL INFO Channel {i % 32:02d}/0 : "
            f"{rank}[{rank}] -> {(rank + 1) % 4}[{(rank + 1) % 4}] via P2P/CUMEM/read"
        )
    if r < 0.85:
        return (
            f'INFO:     10.0.{i % 255}.{i % 13}:{30000 + i % 2000} - "POST /v1/chat/completions '
            'HTTP/1.1" 200 OK'
        )
    pct = i % 100
    return (
        f"model-{i % 48 + 1:05d}-of-00048.safetensors: {pct:3d}%|{'█' * (pct // 10):10s}| "
        f"{pct * 48 // 10}M/4.80G [00:{i % 60:02d}<01:02, 78.5MB/s]"
    )


def make_log(total_lines: int, seed: int = 7) -> bytes:
    """The failed startup's lines spread through noise; the failure lands near the end."""
    story = FAILED_LOG.read_text().splitlines()
    rng = random.Random(seed)
    noise_count = total_lines - len(story)
    head = story[:60]  # up to the warmup: spread over the first 90 % of the file
    tail = story[60:]
    out: list[str] = []
    step = max(1, int(noise_count * 0.9) // len(head))
    i = 0
    for line in head:
        out.append(line)
        for _ in range(step):
            out.append(noise_line(rng, i))
            i += 1
    while len(out) < total_lines - len(tail) - 500:
        out.append(noise_line(rng, i))
        i += 1
    out.extend(tail)
    while len(out) < total_lines:
        out.append(noise_line(rng, i))
        i += 1
    return ("\n".join(out) + "\n").encode()


def to_ere(pattern: str) -> str:
    """A Python regex from the pack as POSIX ERE for grep -E (the subset the packs use)."""
    ere = re.sub(r"\(\?P<\w+>", "(", pattern).replace("(?:", "(")
    ere = ere.replace(r"\d", "[0-9]").replace(r"\s", "[[:space:]]").replace(r"\S", "[^[:space:]]")
    ere = ere.replace(r"\w", "[[:alnum:]_]").replace(r"\W", "[^[:alnum:]_]")
    return ere.replace("*?", "*").replace("+?", "+").replace("??", "?")


def time_best(fn: object, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/diagnose.md")
    args = parser.parse_args()

    data = make_log(args.lines)
    n = data.count(b"\n")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "vllm_1m.log"
        path.write_bytes(data)

        result = diagnose_bytes(data)
        if result.failure is None or "warming up sampler" not in result.failure.line:
            raise SystemExit(f"wrong verdict on the generated log: {result}")
        fast_s = time_best(lambda: diagnose_bytes(data), args.repeat)

        lines = data.decode().split("\n")[:-1]

        def feed_all() -> None:
            analyzer = LogAnalyzer()
            for line in lines:
                analyzer.feed(line)
            analyzer.finish()

        feed_s = time_best(feed_all, 1)

        eres = [to_ere(sig.pattern.pattern) for sig in vllm.SIGNATURES]
        grep = shutil.which("grep")
        grep_s, grep_count = float("nan"), -1
        if grep:
            cmd = [grep, "-c", "-E", *(x for e in eres for x in ("-e", e)), str(path)]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode in (0, 1):
                grep_count = int(proc.stdout.strip() or 0)
                grep_s = time_best(
                    lambda: subprocess.run(cmd, capture_output=True, check=False), args.repeat
                )

    f = result.failure
    rows = [
        ("diagnose_bytes (fast path: screen + read)", fast_s, n / fast_s),
        ("LogAnalyzer.feed per line (live path)", feed_s, n / feed_s),
        (f"grep -c -E, {len(eres)} failure patterns", grep_s, n / grep_s),
    ]
    report = [
        "# bringup diagnose: benchmark",
        "",
        (
            f"`bench/bench_diagnose.py`: {n:,} lines ({len(data) / 2**20:.1f} MiB) of vLLM 0.33 log, "
            "mostly NCCL INFO, uvicorn access-log and tqdm download noise, with the MiniMax-M2.5 "
            f"sampler-warmup OOM near the end. Best of {args.repeat} (feed: 1 run). Python "
            f"{platform.python_version()}, {platform.machine()}, shared 2-core machine."
        ),
        "",
        "| what | seconds | lines/s |",
        "|---|---:|---:|",
        *[f"| {name} | {secs:.3f} | {rate:,.0f} |" for name, secs, rate in rows],
        "",
        (
            f"Goal: >= 300,000 lines/s for diagnose_bytes. Verdict found: `{f.failure_class.value}` "
            f"in `{f.phase.value}` at line {f.line_number:,}; grep counted {grep_count} matching "
            "lines and gives no class, phase or root cause."
        ),
        "",
    ]
    text = "\n".join(report)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
