"""Benchmark: `bringup diagnose` on serving journals, beside `grep -c -E` on the same file.

Not a test. Run: ``.venv/bin/python bench/bench_serving_journal.py [--lines N] [--tree NAME=SRC]
[--live-seconds S] [--out FILE]``.

The journals (tests/builders/serving_journal.py) are what a long-running vLLM server leaves:
a 2,000-line TP-4 startup, then stats, access, request and warning lines, V0 and V1, raw,
journald-wrapped and `docker logs -t`-wrapped, each ending ready or with a restart whose new
start fails. For each journal, in one interleaved run (median of ``--repeat``):

- ``grep -c -E`` with six failure patterns (the comparison the issue names);
- ``bringup diagnose --json FILE`` and ``bringup diagnose --json - < FILE``, whole processes:
  wall time, CPU time (user + system, from wait4) and peak RSS; for every ``--tree`` given
  (``main=/path/to/other/src``), the same with that tree's code, so before and after share the
  run and its load.

Then the live path: ``bringup watch --log FILE --follow`` while a writer appends serving lines
at 2,000 a second; bringup's CPU time over the window, as a share of one core.
The load average is written beside the figures (the machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]

from builders import serving_journal as sj  # noqa: E402

GREP = ("CUDA out of memory", "Traceback", "ERROR", "Error", "Address already in use", "NCCL error")


def run(
    argv: list[str], env: dict[str, str], stdin: Path | None = None
) -> tuple[float, float, int, bytes]:
    """(wall s, CPU s, peak RSS bytes, stdout) of one process."""
    start = time.perf_counter()
    with open(stdin, "rb") if stdin else open(os.devnull, "rb") as inp:
        proc = subprocess.Popen(
            argv, stdin=inp, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        out = proc.stdout.read() if proc.stdout else b""
        _, _status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, out


def _verdict(out: bytes) -> str:
    """The verdict of a `diagnose --json` output, without its schema_version (a tree from before
    it was added prints none)."""
    obj = json.loads(out or b"null")
    if isinstance(obj, dict):
        obj.pop("schema_version", None)
    return json.dumps(obj, sort_keys=True)


PYCACHE: Path | None = None  # bytecode of every tree, as an installed program keeps it


def tree_env(src: Path | None) -> dict[str, str]:
    env = dict(os.environ, NO_COLOR="1")
    if src is not None:
        env["PYTHONPATH"] = str(src)
    # an installed program runs from its compiled bytecode: a shell that forbids writing it
    # (PYTHONDONTWRITEBYTECODE) would add ~0.2 s of compiling to every process measured
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if PYCACHE is not None:
        env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def warm(trees: dict[str, Path | None], log: Path) -> None:
    """One untimed run per tree, so its bytecode is written before anything is measured."""
    for src in trees.values():
        run([sys.executable, "-m", "bringup", "diagnose", "--json", str(log)], tree_env(src))


def bench_file(path: Path, trees: dict[str, Path | None], repeat: int) -> list[dict[str, object]]:
    grep = [
        shutil.which("grep") or "grep",
        "-c",
        "-E",
        *(x for p in GREP for x in ("-e", p)),
        str(path),
    ]
    rows: dict[str, list[tuple[float, float, int]]] = {"grep": []}
    verdicts: dict[str, str] = {}
    for _ in range(repeat):
        w, c, m, _ = run(grep, dict(os.environ))
        rows["grep"].append((w, c, m))
        for name, src in trees.items():
            argv = [sys.executable, "-m", "bringup", "diagnose", "--json"]
            for how, args, stdin in (("file", [str(path)], None), ("stdin", ["-"], path)):
                w, c, m, out = run(argv + args, tree_env(src), stdin)
                rows.setdefault(f"{name} {how}", []).append((w, c, m))
                verdicts[f"{name} {how}"] = _verdict(out)
    base = statistics.median(r[0] for r in rows["grep"])
    base_cpu = statistics.median(r[1] for r in rows["grep"])
    same = len(set(verdicts.values())) == 1
    out = []
    for name, runs in rows.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        out.append(
            {
                "what": name,
                "wall": wall,
                "cpu": cpu,
                "rss": max(r[2] for r in runs),
                "x_wall": wall / base,
                "x_cpu": cpu / base_cpu if base_cpu else float("nan"),
                "same_verdict": same,
            }
        )
    return out


def live_share(src: Path | None, seconds: float, rate: float, tmp: Path) -> float:
    """bringup watch --log's CPU share of one core while ``rate`` serving lines/s are written."""
    import psutil

    log = tmp / "live.log"
    lines = sj.journal("v1", "raw", 2000 + int(rate * (seconds + 5)), failure=False)
    with log.open("w") as f:
        for _ in range(2000):  # the startup, then serving lines written live
            f.write(next(lines) + "\n")
    argv = [sys.executable, "-m", "bringup", "watch", "--log", str(log), "--follow", "--stall", "0"]
    argv += ["--deadline", "0", "--quiet", "--url", "http://127.0.0.1:9", "--json"]
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=tree_env(src)
    )
    ps = psutil.Process(proc.pid)
    time.sleep(3.0)  # imports and the startup read
    try:
        before = sum(ps.cpu_times()[:2])
        t0 = time.perf_counter()
        with log.open("a", buffering=1) as f:
            written = 0
            while (elapsed := time.perf_counter() - t0) < seconds:
                due = int(elapsed * rate)
                while written < due:
                    f.write(next(lines) + "\n")
                    written += 1
                time.sleep(0.01)
        after = sum(ps.cpu_times()[:2])
        return (after - before) / (time.perf_counter() - t0)
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--tree", action="append", default=[], help="NAME=SRC: another tree's src/ to compare"
    )
    ap.add_argument("--live-seconds", type=float, default=30.0)
    ap.add_argument("--only", help="journal names containing this (e.g. v1_journald)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "serving_journal.md")
    args = ap.parse_args()
    trees: dict[str, Path | None] = {"this tree": ROOT / "src"}
    for spec in args.tree:
        name, _, src = spec.partition("=")
        trees[name] = Path(src)
    load0 = Path("/proc/loadavg").read_text().split()[:3]
    md = [
        "## Serving journals: `diagnose` beside `grep -c -E` (issue 28)",
        "",
        (
            f"{args.lines:,} lines each (a 2,000-line TP-4 startup, then serving lines), "
            f"median of {args.repeat} interleaved runs; ratios are to grep's time on the same file "
            f"in the same run; every process runs from its tree's compiled bytecode, as an "
            f"installed program does. Load average at start: {' '.join(load0)}."
        ),
        "",
        "| journal | MB | what | wall s | CPU s | x grep wall | x grep CPU | peak RSS MB | same verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    global PYCACHE
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        PYCACHE = tmp / "pycache"
        warm(trees, sj.write_journal(tmp / "warm.log", "v1", "raw", 3000, failure=False))
        for version in sj.VERSIONS:
            for wrap in sj.WRAPS:
                for failure in (False, True):
                    name = sj.name_of(version, wrap, failure)
                    if args.only and args.only not in name:
                        continue
                    path = sj.write_journal(tmp / name, version, wrap, args.lines, failure=failure)
                    mb = path.stat().st_size / 1e6
                    for row in bench_file(path, trees, args.repeat):
                        md.append(
                            f"| {name} | {mb:.0f} | {row['what']} | {row['wall']:.2f} | {row['cpu']:.2f} "
                            f"| {row['x_wall']:.1f} | {row['x_cpu']:.1f} | {row['rss'] / 1e6:.0f} | {row['same_verdict']} |"
                        )
                        print(md[-1], flush=True)
                    path.unlink()
        md += [
            "",
            "Live: `bringup watch --log FILE --follow` while 2,000 serving lines/s are appended:",
            "",
        ]
        md += ["| tree | CPU share of one core |", "|---|---|"]
        for tname, src in trees.items():
            share = live_share(src, args.live_seconds, 2000.0, tmp)
            md.append(f"| {tname} | {share * 100:.1f} % |")
            print(md[-1], flush=True)
    md += [
        "",
        f"Load average at the end: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}.",
        "",
    ]
    args.out.write_text("\n".join(md))


if __name__ == "__main__":
    main()
