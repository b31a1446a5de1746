"""Hostile files at full size (a script, not a test): memory and time of whole bringup processes.

    .venv/bin/python bench/bench_files.py [--gib 2] [--out bench/results/files.md]

Each case runs ``bringup ...`` as a child process and reads its peak resident memory from
``wait4`` (ru_maxrss) and its wall time:

1. ``diagnose`` on a 2 GiB binary file (random bytes). Goals: under 200 MB, at least 100 MB/s.
2. ``diagnose`` on a 2 GiB log (the 1,000,000-line benchmark log of bench_diagnose.py, repeated,
   the failure at the very end). Goal: under 200 MB.
3. ``diagnose`` on a 2 GiB file with no newline at all. Goal: under 200 MB.
4. ``verify`` on a safetensors file whose header claims 10**15 bytes, and on a GGUF whose
   header claims 10**15 tensors and a 10**15-byte string. Goal: under 200 MB, at once.
5. ``diagnose -`` on 2 GiB of binary piped in. Goal: under 200 MB.
6. ``bench --dataset`` on a 2 GiB ShareGPT array and a 2 GiB JSONL file whose only usable
   prompt is the last entry (so the whole file is read), and on the array cut short (exit 2).
   No server listens (exit 3 after the dataset is read): the figure is the reading. Goal:
   under 200 MB.

The files are written to a temporary folder (page cache warm) and deleted afterwards.
"""

from __future__ import annotations

import argparse
import os
import platform
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "bench")]

from bench_diagnose import make_log  # noqa: E402

MiB = 1 << 20
BRINGUP = [sys.executable, "-m", "bringup"]


def run(args: list[str], stdin_file: Path | None = None) -> tuple[int, float, float, str]:
    """(exit code, wall seconds, peak RSS in MB, stderr) of ``bringup ARGS``.

    The peak is GNU time's ``%M`` of the bringup process itself (a forked child's own
    ru_maxrss would count the pages it shared with this script before exec)."""
    stdin = stdin_file.open("rb") if stdin_file else subprocess.DEVNULL
    started = time.perf_counter()
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "MAXRSS %M", *BRINGUP, *args],
        stdin=stdin,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    wall = time.perf_counter() - started
    if stdin_file:
        stdin.close()  # type: ignore[union-attr]
    err = proc.stderr.decode(errors="replace").strip().splitlines()
    rss = float(err[-1].split()[1]) / 1024 if err and err[-1].startswith("MAXRSS") else float("nan")
    return proc.returncode, wall, rss, "\n".join(err[:-1])[-200:]


def fill(path: Path, size: int, block: bytes) -> None:
    with path.open("wb") as f:
        left = size
        while left > 0:
            f.write(block[:left])
            left -= len(block)


def bench_datasets(t: Path, size: int) -> list[tuple[str, int, float, float, float | None]]:
    """``bench --dataset`` on ~``size`` bytes of ShareGPT (JSON array) and JSONL."""
    import json

    one_turn = json.dumps({"conversations": [{"from": "human", "value": "y " * 500}]})
    usable = json.dumps(
        {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "."}]}
    )
    url = "http://127.0.0.1:9/"  # nothing listens: bench stops after reading the dataset
    rows: list[tuple[str, int, float, float, float | None]] = []
    array = t / "sharegpt.json"
    block = (",\n".join([one_turn] * 1000) + ",\n").encode()
    with array.open("wb") as f:
        f.write(b"[")
        written = 1
        while written + len(block) < size:
            f.write(block)
            written += len(block)
        f.write(usable.encode() + b"]")
    total = array.stat().st_size
    code, wall, rss, _ = run(["bench", url, "--dataset", str(array), "--requests", "1"])
    rows.append(
        (
            f"bench --dataset, {total / 2**30:.2f} GiB ShareGPT array (the one prompt at the end)",
            code,
            wall,
            rss,
            total / wall / 1e6,
        )
    )
    os.truncate(array, total - 40)
    code, wall, rss, _ = run(["bench", url, "--dataset", str(array), "--requests", "1"])
    rows.append(
        (
            "bench --dataset, the same array cut short at the end",
            code,
            wall,
            rss,
            total / wall / 1e6,
        )
    )
    array.unlink()
    lines = t / "prompts.jsonl"
    row = json.dumps({"text": "y " * 500}) + "\n"
    with lines.open("wb") as f:
        chunk = (row * 1000).encode()
        written = 0
        while written + len(chunk) < size:
            f.write(chunk)
            written += len(chunk)
        f.write(json.dumps({"prompt": "hi"}).encode() + b"\n")
    total = lines.stat().st_size
    code, wall, rss, _ = run(["bench", url, "--dataset", str(lines), "--requests", "1"])
    rows.append(
        (
            f"bench --dataset, {total / 2**30:.2f} GiB JSONL (the one prompt at the end)",
            code,
            wall,
            rss,
            total / wall / 1e6,
        )
    )
    lines.unlink()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/files.md")
    args = parser.parse_args()
    size = int(args.gib * 1024 * MiB)
    rows = []
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bringup-bench-files-") as tmp:
        t = Path(tmp)
        random_block = os.urandom(64 * MiB)
        binary = t / "weights.bin"
        fill(binary, size, random_block)
        code, wall, rss, _ = run(["diagnose", "--json", str(binary)])
        rows.append(
            (f"diagnose, {args.gib:g} GiB of random bytes", code, wall, rss, size / wall / 1e6)
        )
        code, wall, rss, _ = run(["diagnose", "--json", "-"], stdin_file=binary)
        rows.append(
            (
                f"diagnose -, {args.gib:g} GiB of random bytes on stdin",
                code,
                wall,
                rss,
                size / wall / 1e6,
            )
        )
        binary.unlink()

        log = make_log(1_000_000)
        big_log = t / "vllm.log"
        noise = log[: log.rfind(b"\n", 0, len(log) // 2) + 1]  # the first half: no failure yet
        with big_log.open("wb") as f:
            written = 0
            while written + len(noise) < size - len(log):
                f.write(noise)
                written += len(noise)
            f.write(log)
            written += len(log)
        code, wall, rss, _ = run(["diagnose", "--json", str(big_log)])
        rows.append(
            (
                f"diagnose, {written / 2**30:.2f} GiB vLLM log (failure at the end)",
                code,
                wall,
                rss,
                written / wall / 1e6,
            )
        )
        big_log.unlink()

        one_line = t / "one-line.log"
        fill(one_line, size, b"A" * (64 * MiB))
        code, wall, rss, _ = run(["diagnose", "--json", str(one_line)])
        rows.append(
            (f"diagnose, {args.gib:g} GiB without a newline", code, wall, rss, size / wall / 1e6)
        )
        one_line.unlink()

        claim = t / "model.safetensors"
        claim.write_bytes(struct.pack("<Q", 10**15) + b'{"a": {"dtype": "F32"' + b" " * 4096)
        code, wall, rss, _ = run(["verify", "--json", str(claim)])
        rows.append(("verify, safetensors header claiming 10^15 bytes", code, wall, rss, None))
        near = t / "near.safetensors"
        fill(near, 99_000_000 + 8, b"[" * (64 * MiB))
        with near.open("r+b") as f:
            f.write(struct.pack("<Q", 99_000_000))
        code, wall, rss, _ = run(["verify", "--json", str(near)])
        rows.append(
            (
                "verify, a 99 MB header of garbage (just under the 100 MB limit)",
                code,
                wall,
                rss,
                None,
            )
        )

        gguf = t / "model.gguf"
        gguf.write_bytes(
            b"GGUF" + struct.pack("<IQQ", 3, 10**15, 1) + struct.pack("<Q", 10**15) + b"x" * 4096
        )
        code, wall, rss, _ = run(["verify", "--json", str(gguf)])
        rows.append(("verify, GGUF claiming 10^15 tensors", code, wall, rss, None))
        gguf.write_bytes(
            b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + struct.pack("<Q", 10**15) + b"x" * 4096
        )
        code, wall, rss, _ = run(["verify", "--json", str(gguf)])
        rows.append(("verify, GGUF metadata key claiming 10^15 bytes", code, wall, rss, None))

        rows += bench_datasets(t, size)

    load_end = os.getloadavg()[0]
    lines = [
        "# bringup on hostile files: memory and time",
        "",
        (
            f"`bench/bench_files.py --gib {args.gib:g}`: each row is one whole `bringup` process "
            "(peak RSS from wait4, wall clock, page cache warm). Goals: under 200 MB on any input, "
            f"binary garbage at 100 MB/s or more. Python {platform.python_version()}, "
            f"{platform.machine()}, shared 2-core machine, load average {load_start:.1f} at the "
            f"start and {load_end:.1f} at the end."
        ),
        "",
        "| input | exit | seconds | peak RSS (MB) | MB/s |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, code, wall, rss, rate in rows:
        lines.append(
            f"| {name} | {code} | {wall:.2f} | {rss:.0f} | {'' if rate is None else f'{rate:,.0f}'} |"
        )
    worst = max(r[3] for r in rows)
    garbage_rate = rows[0][4] or 0.0
    lines += [
        "",
        (
            f"Largest peak: {worst:.0f} MB (goal < 200 MB); random bytes read at "
            f"{garbage_rate:,.0f} MB/s (goal >= 100 MB/s)."
        ),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
