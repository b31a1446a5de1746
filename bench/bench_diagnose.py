"""Benchmark: diagnose a generated 1,000,000-line vLLM log, beside `grep -c -E` on the same file,
and whole ``bringup diagnose`` processes on hostile inputs (memory and speed), in one run.

Not a test. Run: ``.venv/bin/python bench/bench_diagnose.py [--lines N] [--gib G] [--out FILE]``
(under ``/work/locks/measure`` on the shared machine: the load is written beside the figures).
The log is mostly NCCL INFO lines, uvicorn access-log lines and tqdm download bars, around a
real vLLM 0.33 startup that fails near the end (the MiniMax-M2.5 sampler-warmup OOM).
grep gets the vLLM pack's own failure signatures, translated to POSIX ERE, in one call.

Rows, in one process, interleaved where they are compared:

- ``diagnose_bytes``: the log in memory (screen, then read);
- streamed: ``diagnose_chunks`` over the file read in blocks, as ``bringup diagnose FILE`` does;
- ``LogAnalyzer.feed`` per line (the live path: every line through the analyzer);
- whole ``bringup diagnose --json`` processes (peak RSS from GNU time, wall clock): the 1M-line
  log, G GiB of random bytes (file and stdin), a G GiB log with the failure at its end, G GiB
  without a newline, and 1 MiB of 5-byte lines that each pass the screen (the slowest input
  per byte: every line read with every pack's tables).
  Goals: under 200 MB of memory on any input, at least 100 MB/s on binary garbage.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bringup.adapters import files
from bringup.core.analyzer import LogAnalyzer, diagnose_bytes
from bringup.core.logfeed import diagnose_chunks
from bringup.core.packs.vllm.signatures import SIGNATURES

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


def processes(
    t: Path, log_path: Path, log: bytes, gib: float
) -> list[tuple[str, int, float, float, float]]:
    """Whole ``bringup diagnose --json`` processes: (input, exit, seconds, peak RSS MB, MB/s)."""
    from bench_files import fill, run  # bench_files imports this module's make_log

    rows = []
    n_lines = log.count(b"\n") + (0 if log.endswith(b"\n") else 1)
    code, wall, rss, _ = run(["diagnose", "--json", str(log_path)])
    rows.append(
        (
            f"the {n_lines:,}-line log ({len(log) / 2**20:.0f} MiB)",
            code,
            wall,
            rss,
            len(log) / wall / 1e6,
        )
    )
    size = int(gib * 2**30)
    binary = t / "weights.bin"
    fill(binary, size, os.urandom(64 << 20))
    code, wall, rss, _ = run(["diagnose", "--json", str(binary)])
    rows.append((f"{gib:g} GiB of random bytes", code, wall, rss, size / wall / 1e6))
    code, wall, rss, _ = run(["diagnose", "--json", "-"], stdin_file=binary)
    rows.append((f"{gib:g} GiB of random bytes on stdin", code, wall, rss, size / wall / 1e6))
    binary.unlink()
    big = t / "big.log"
    noise = log[: log.rfind(b"\n", 0, len(log) // 2) + 1]  # the first half: no failure yet
    written = 0
    with big.open("wb") as f:
        while written + len(noise) < size - len(log):
            f.write(noise)
            written += len(noise)
        f.write(log)
        written += len(log)
    code, wall, rss, _ = run(["diagnose", "--json", str(big)])
    rows.append(
        (
            f"a {written / 2**30:.2f} GiB log, failure at the end",
            code,
            wall,
            rss,
            written / wall / 1e6,
        )
    )
    big.unlink()
    one_line = t / "one-line.log"
    fill(one_line, size, b"A" * (64 << 20))
    code, wall, rss, _ = run(["diagnose", "--json", str(one_line)])
    rows.append((f"{gib:g} GiB without a newline", code, wall, rss, size / wall / 1e6))
    one_line.unlink()
    short = t / "short.log"
    unit = b"x.py\n"
    fill(short, 1 << 20, unit * ((1 << 20) // len(unit)))
    code, wall, rss, _ = run(["diagnose", "--json", str(short)])
    rows.append(
        (
            "1 MiB of 5-byte lines, each read with every table (no engine known)",
            code,
            wall,
            rss,
            (1 << 20) / wall / 1e6,
        )
    )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--gib", type=float, default=2.0, help="size of the hostile inputs")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/diagnose.md")
    args = parser.parse_args()
    load_start = os.getloadavg()

    data = make_log(args.lines)
    n = data.count(b"\n")
    with tempfile.TemporaryDirectory(prefix="bringup-bench-diagnose-") as tmp:
        path = Path(tmp) / "vllm_1m.log"
        path.write_bytes(data)

        def streamed() -> object:
            with path.open("rb") as fh:
                return diagnose_chunks(files.iter_blocks(fh, path=path, what="log file"))

        result = diagnose_bytes(data)
        if result.failure is None or "warming up sampler" not in result.failure.line:
            raise SystemExit(f"wrong verdict on the generated log: {result}")
        if streamed() != result:
            raise SystemExit("the streamed path and diagnose_bytes disagree on the generated log")
        fast_s, stream_s = float("inf"), float("inf")
        for _ in range(args.repeat):  # interleaved: the two paths see the same load
            fast_s = min(fast_s, time_best(lambda: diagnose_bytes(data), 1))
            stream_s = min(stream_s, time_best(streamed, 1))

        lines = data.decode().split("\n")[:-1]

        def feed_all() -> None:
            analyzer = LogAnalyzer()
            for line in lines:
                analyzer.feed(line)
            analyzer.finish()

        feed_s = time_best(feed_all, 1)
        lines.clear()

        eres = [to_ere(sig.pattern.pattern) for sig in SIGNATURES]
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
        load_mid = os.getloadavg()
        procs = processes(Path(tmp), path, data, args.gib)
    load_end = os.getloadavg()

    f = result.failure
    rows = [
        ("diagnose_bytes (in memory: screen + read)", fast_s, n / fast_s),
        ("streamed file (diagnose_chunks, as `bringup diagnose FILE`)", stream_s, n / stream_s),
        ("LogAnalyzer.feed per line (live path)", feed_s, n / feed_s),
        (f"grep -c -E, {len(eres)} failure patterns", grep_s, n / grep_s),
    ]
    worst = max(r[3] for r in procs)
    garbage = procs[1][4]

    def load(avg: tuple[float, float, float]) -> str:
        return " ".join(f"{x:.2f}" for x in avg)

    report = [
        "# bringup diagnose: benchmark",
        "",
        (
            f"Summary: the 1,000,000-line log in **{fast_s:.3f} s** in memory and **{stream_s:.3f} s** "
            f"streamed from its file, {feed_s:.3f} s fed line by line (earlier quiet run, before the "
            "generic pack: 0.566 s in memory, 1.576 s line by line); every whole `bringup "
            f"diagnose` process peaks at **{worst:.0f} MB** or less (goal < 200 MB); random bytes at "
            f"**{garbage:,.0f} MB/s** (goal >= 100 MB/s). Load average (1, 5, 15 min): "
            f"{load(load_start)} at the start, {load(load_mid)} after the 1M-line rows, "
            f"{load(load_end)} at the end."
        ),
        "",
        (
            f"`bench/bench_diagnose.py --gib {args.gib:g}`: {n:,} lines ({len(data) / 2**20:.1f} MiB) "
            "of vLLM 0.33 log, mostly NCCL INFO, uvicorn access-log and tqdm download noise, with the "
            f"MiniMax-M2.5 sampler-warmup OOM near the end. Best of {args.repeat}, the in-memory and "
            f"streamed paths interleaved (feed: 1 run). Python {platform.python_version()}, "
            f"{platform.machine()}, shared 2-core machine."
        ),
        "",
        (
            "How: the screen (the substrings every interesting line carries) is one pass of a "
            "multi-token Aho-Corasick automaton (`ahocorasick-rs`, SIMD) over the buffer, where it "
            "was one `bytes.find` sweep per token (18 now for vLLM, 13 in the earlier run); the live "
            "path tests each line with the same automaton. Every corpus verdict is unchanged (both "
            "paths, all 161 logs, compared before and after)."
        ),
        "",
        "| what | seconds | lines/s |",
        "|---|---:|---:|",
        *[f"| {name} | {secs:.3f} | {rate:,.0f} |" for name, secs, rate in rows],
        "",
        (
            f"Goal: >= 300,000 lines/s for diagnose_bytes. Verdict found: `{f.failure_class.value}` "
            f"in `{f.phase.value}` at line {f.line_number:,} (the same on both paths); grep counted "
            f"{grep_count} matching lines and gives no class, phase or root cause."
        ),
        "",
        "Whole `bringup diagnose --json` processes (peak RSS from GNU time, page cache warm):",
        "",
        "| input | exit | seconds | peak RSS (MB) | MB/s |",
        "|---|---:|---:|---:|---:|",
        *[
            f"| {name} | {code} | {wall:.2f} | {rss:.0f} | {rate:,.1f} |"
            for name, code, wall, rss, rate in procs
        ],
        "",
    ]
    text = "\n".join(report)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
