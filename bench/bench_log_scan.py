"""Where `watch --log` begins on a large existing log (a script, not a test).

    .venv/bin/python bench/bench_log_scan.py [--mib 1024] [--runs 5] [--out bench/results/log_scan.md]

A log a service appends to holds every restart; `watch --log` begins at the newest attempt.
Before, it read the file's last 64 MiB at once to find it; now it reads backwards, 1 MiB first
and twice as much each time, until the lines read settle it. Both are timed here, interleaved,
in one process (the same file, page cache warm): "before" is the old code's reading, kept
here as a function (last 64 MiB, decoded, ``newest_attempt_start`` forward).

Cases: a short newest attempt (a few lines) after ``--mib`` MiB of older attempts, and a
newest attempt of 10 MiB (the backwards read needs 1 + 2 + 4 + 8 MiB). Figures: bytes read
and seconds until the newest attempt's lines have all been handed on.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src")]

from bringup.adapters.process import decode_line  # noqa: E402
from bringup.adapters.sources import logfile  # noqa: E402
from bringup.adapters.sources.items import LineItem  # noqa: E402
from bringup.core.log_attempts import newest_attempt_start  # noqa: E402

MiB = 1 << 20
BANNER = "(APIServer pid=6) INFO 11-30 09:47:00 [api_server.py:1] vLLM API server version 0.32.0"
LOADING = (
    "(EngineCore pid=9) INFO 11-30 09:50:03 [gpu_model_runner.py:4327] Starting to load model m..."
)
OOM = (
    "(EngineCore pid=7) ERROR 11-30 09:47:02 [core.py:700] torch.OutOfMemoryError: CUDA out of "
    "memory occurred when warming up sampler with 1024 dummy requests."
)
FILLER = "(EngineCore pid=7) INFO 11-30 09:47:01 [core.py:1] " + "x" * 60


def write(path: Path, old_mib: int, newest_mib: int) -> None:
    block = (FILLER + "\n") * (MiB // (len(FILLER) + 1))
    with path.open("w") as f:
        f.write(f"{BANNER}\n{LOADING}\n")
        for _ in range(old_mib):
            f.write(block)
        f.write(f"{OOM}\n{BANNER}\n{LOADING}\n")
        for _ in range(newest_mib):
            f.write(block)
        f.write("last\n")


def before(path: Path) -> tuple[float, int]:
    """The old code (FileSource before this change): the last 64 MiB read at once, decoded,
    and read forward by ``newest_attempt_start``; then the newest attempt's lines handed on."""
    started = time.perf_counter()
    handed: list[str] = []
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        begin = max(0, size - logfile.SCAN_BYTES)
        handle.seek(begin)
        data = handle.read(size - begin)
        if begin:
            data = data[data.find(b"\n") + 1 :] if b"\n" in data else b""
        *raw, _rest = data.split(b"\n")
        lines = [decode_line(r) for r in raw]
        first, _attempts = newest_attempt_start(lines)
        handed.extend(lines[first:])
    assert handed[-1] == "last"
    return time.perf_counter() - started, size - begin


def now(path: Path) -> tuple[float, int]:
    """``FileSource`` as it is: seconds until the newest attempt's last line was handed on."""
    source = logfile.FileSource(str(path), poll_seconds=0.01)
    done = threading.Event()

    def emit(item: Any) -> None:
        if isinstance(item, LineItem) and item.text == "last":
            done.set()

    started = time.perf_counter()
    source.start(emit)
    done.wait(600)
    seconds = time.perf_counter() - started
    source.stop(0.0)
    return seconds, source.scanned_bytes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "log_scan.md"))
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-log-scan-") as tmp:
        for label, newest in (("a few lines", 0), ("10 MiB", 10)):
            path = Path(tmp) / "server.log"
            write(path, args.mib, newest)
            size = path.stat().st_size
            got: dict[str, list[tuple[float, int]]] = {"before": [], "now": []}
            for _ in range(args.runs):  # interleaved
                got["before"].append(before(path))
                got["now"].append(now(path))
            rows.append((label, size, got))
            path.unlink()
    load_after = os.getloadavg()[0]
    intro = (
        f"`bench/bench_log_scan.py --mib {args.mib} --runs {args.runs}`: `FileSource` finding the "
        f"newest attempt of a log whose older attempts fill {args.mib} MiB, median of "
        f"{args.runs} interleaved run(s), page cache warm. Before: the last 64 MiB read at once "
        "and read forward (the old code, kept in this script); now: `FileSource`, reading backwards "
        "from 1 MiB, doubling, each line looked at once. Seconds: until the newest "
        f"attempt's last line was handed on. Python {platform.python_version()}, "
        f"{platform.machine()}, shared 2-core machine, load average {load_before:.1f} at the "
        f"start and {load_after:.1f} at the end."
    )
    lines = [
        "# watch --log: where to begin on a large log",
        "",
        intro,
        "",
        "| newest attempt | file | before: bytes read | before: seconds | now: bytes read | now: seconds |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, size, got in rows:
        b = got["before"]
        n = got["now"]
        lines.append(
            f"| {label} | {size / MiB:,.0f} MiB | {b[0][1] / MiB:,.0f} MiB | "
            f"{statistics.median(s for s, _ in b):.3f} | {n[0][1] / MiB:,.0f} MiB | "
            f"{statistics.median(s for s, _ in n):.3f} |"
        )
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
