"""Benchmarks of `bringup verify` (a script, not a test): run it, paste the figures.

    .venv/bin/python bench/bench_verify.py [--out bench/results/verify.md] [--hash-gb 2]

1. Headers-only verify of a synthetic 125-shard checkpoint (sparse shards, Llama-70B-like
   tensors in BF16): in-process scan and the whole CLI as a process. Goal: under 1 s.
2. `--hash` throughput against `openssl dgst -sha256` on the same file, same run, page
   cache warm for both. Goal: at least 0.9 of openssl.
3. Several files at once: one thread vs one per CPU, with the CPU utilisation measured.
   Goal: uses every core.

Writes real random-ish data to /tmp for 2 and 3, and deletes it afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from bringup.adapters.checkpoint import scan_checkpoint  # noqa: E402
from bringup.adapters.hashing import hash_file, hash_files  # noqa: E402

from builders.safetensors import write_checkpoint  # noqa: E402

MiB = 1024 * 1024


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    """Wall seconds of ``repeat`` calls."""
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def bench_headers(tmp: Path) -> list[str]:
    """Scan a 125-shard sparse checkpoint, in-process and as `python -m bringup verify --json`."""
    folder = tmp / "llama70b"
    write_checkpoint(
        folder,
        n_shards=125,
        hidden=8192,
        layers=80,
        heads=64,
        kv_heads=8,
        intermediate=28672,
        vocab=128256,
    )
    ckpt = scan_checkpoint(folder)
    assert not ckpt.problems, ckpt.problems[:3]
    total = sum(ckpt.file_sizes.values())
    scan = timed(lambda: scan_checkpoint(folder), 7)
    argv = [sys.executable, "-m", "bringup", "verify", str(folder), "--json"]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    cli = timed(lambda: subprocess.run(argv, check=True, capture_output=True, env=env), 5)
    py = timed(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True, env=env), 5)
    return [
        "## Headers-only verify, 125 shards",
        "",
        (
            f"Synthetic Llama-70B-like checkpoint: 125 sparse shards, {len(ckpt.tensors)} tensors, "
            f"{total / 1e9:.1f} GB apparent size (sparse: no data on disk), index + config + tokenizer."
        ),
        "",
        "| what | median | min |",
        "|---|---|---|",
        f"| `scan_checkpoint()` in-process (all checks but hashing) | {_ms(statistics.median(scan))} | {_ms(min(scan))} |",
        f"| `python -m bringup verify DIR --json` as a process | {_ms(statistics.median(cli))} | {_ms(min(cli))} |",
        f"| bare `python -c pass` (interpreter start, for scale) | {_ms(statistics.median(py))} | {_ms(min(py))} |",
        "",
        "Goal: under 1 s. Only the first 1 KiB and the JSON header of each shard are read.",
        "",
    ]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def write_random(path: Path, n_bytes: int) -> Path:
    """A valid one-tensor safetensors file whose data is random-ish bytes (a 64 MiB urandom block repeated)."""
    header = {"w": {"dtype": "U8", "shape": [n_bytes], "data_offsets": [0, n_bytes]}}
    block = os.urandom(64 * MiB)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        left = n_bytes
        while left > 0:
            chunk = block[: min(left, len(block))]
            f.write(chunk)
            left -= len(chunk)
    return path


def bench_hash_one(tmp: Path, gb: float) -> list[str]:
    """sha256 of one file: openssl dgst vs hash_file vs the CLI, interleaved, cache warm."""
    path = write_random(tmp / "big.safetensors", int(gb * 1e9))
    size = path.stat().st_size
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), NO_COLOR="1")
    runs: dict[str, list[float]] = {"openssl": [], "hash_file": [], "cli": []}
    for _ in range(3):
        runs["openssl"] += timed(
            lambda: subprocess.run(
                ["openssl", "dgst", "-sha256", str(path)], check=True, capture_output=True
            ),
            1,
        )
        runs["hash_file"] += timed(lambda: hash_file(path), 1)
        runs["cli"] += timed(
            # exit 3: a hash with nothing to compare it with (bringup.exit_codes.EXIT_INCOMPLETE)
            lambda: _process([sys.executable, "-m", "bringup", "verify", str(path), "--hash"], env),
            1,
        )
    best = {k: size / min(v) / 1e6 for k, v in runs.items()}
    med = {k: size / statistics.median(v) / 1e6 for k, v in runs.items()}
    path.unlink()
    return [
        f"## `--hash` on one {size / 1e9:.2f} GB file vs `openssl dgst -sha256`",
        "",
        "Same file, same run, page cache warm, runs interleaved (3 each).",
        "",
        "| tool | best MB/s | median MB/s | ratio to openssl (median) |",
        "|---|---|---|---|",
        f"| `openssl dgst -sha256` | {best['openssl']:.0f} | {med['openssl']:.0f} | 1.00 |",
        (
            f"| `hash_file()` (mmap, 16 MiB steps, hashlib) | {best['hash_file']:.0f} | {med['hash_file']:.0f} | "
            f"{med['hash_file'] / med['openssl']:.2f} |"
        ),
        (
            f"| `bringup verify FILE --hash` (process, incl. start) | {best['cli']:.0f} | {med['cli']:.0f} | "
            f"{med['cli'] / med['openssl']:.2f} |"
        ),
        "",
        "Goal: at least 0.9 of openssl.",
        "",
    ]


def bench_hash_many(tmp: Path, gb: float) -> list[str]:
    """Several files: one thread vs one thread per CPU; wall time, speedup, CPU utilisation."""
    cpus = os.cpu_count() or 1
    n_files = max(2, cpus)
    each = int(gb * 1e9 / n_files)
    paths = {
        f"f{i}.safetensors": write_random(tmp / f"f{i}.safetensors", each) for i in range(n_files)
    }
    for p in paths.values():
        subprocess.run(["cat", str(p)], stdout=subprocess.DEVNULL, check=True)
    total = sum(p.stat().st_size for p in paths.values())
    samples: dict[int, list[tuple[float, float]]] = {1: [], cpus: []}
    for _ in range(4):  # interleaved, so both settings see the same neighbours on a shared machine
        for jobs in samples:
            before, start = os.times(), time.perf_counter()
            hash_files(paths, jobs=jobs)
            wall = time.perf_counter() - start
            after = os.times()
            samples[jobs].append(
                (wall, (after.user - before.user + after.system - before.system) / wall)
            )
    rows = [
        (jobs, statistics.median(w for w, _ in s), statistics.median(u for _, u in s))
        for jobs, s in samples.items()
    ]
    for p in paths.values():
        p.unlink()
    one = rows[0][1]
    lines = [
        f"## `--hash` on {n_files} files at once ({total / 1e9:.2f} GB total), {cpus} CPUs",
        "",
        "| threads | wall (median of 4, interleaved) | MB/s | speedup | CPU utilisation (cpu-s / wall-s) |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {j} | {w:.2f} s | {total / w / 1e6:.0f} | {one / w:.2f}x | {u:.2f} of {cpus} cores |"
        for j, w, u in rows
    ]
    lines += ["", f"Goal: uses every core. Load average after: {os.getloadavg()[0]:.2f}.", ""]
    return lines


def _process(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, user+sys CPU seconds) of one whole process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1, 3):  # 1: findings (no config.json), 3: nothing to compare
        raise SystemExit(f"{argv} exited {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def bench_hash_process(
    tmp: Path, gib: float = 1.0, runs: int = 5, trees: dict[str, Path] | None = None
) -> list[str]:
    """Whole processes, same run, interleaved: `bringup verify --hash` against `openssl dgst
    -sha256` on one file of ``gib`` GiB, and on ``gib`` GiB of shards (openssl on them in one
    process, and one process per core), for this tree and every other ``trees`` entry."""
    cpus = os.cpu_count() or 1
    trees = {"this tree": ROOT / "src", **(trees or {})}
    for src in trees.values():  # as installed: a pip install compiles bytecode
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(src / "bringup")],
            capture_output=True,
            check=False,
        )
    one = write_random(tmp / "one.safetensors", int(gib * 2**30))
    folder = tmp / "several"
    folder.mkdir()
    n_shards = max(2, cpus)
    several = [
        write_random(
            folder / f"model-{i + 1:05d}-of-{n_shards:05d}.safetensors",
            int(gib * 2**30 / n_shards),
        )
        for i in range(n_shards)
    ]
    for path in [one, *several]:
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # page cache warm
    cases: dict[str, tuple[list[str], dict[str, str]]] = {
        "one: openssl dgst -sha256": (["openssl", "dgst", "-sha256", str(one)], {}),
        "several: openssl dgst -sha256 (all shards, one process)": (
            ["openssl", "dgst", "-sha256", *map(str, several)],
            {},
        ),
        "several: openssl dgst, one process per core (xargs -P)": (
            [
                "sh",
                "-c",
                f'ls "$0"/*.safetensors | xargs -P {cpus} -n 1 openssl dgst -sha256',
                str(folder),
            ],
            {},
        ),
        "largest shard alone: openssl dgst -sha256": (
            ["openssl", "dgst", "-sha256", str(several[0])],
            {},
        ),
    }
    for name, src in trees.items():
        env = {"PYTHONPATH": str(src), "NO_COLOR": "1"}
        argv = [sys.executable, "-m", "bringup", "verify"]
        cases[f"one: bringup verify FILE --hash ({name})"] = ([*argv, str(one), "--hash"], env)
        cases[f"several: bringup verify DIR --hash ({name})"] = (
            [*argv, str(folder), "--hash"],
            env,
        )
    samples: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
    load_start = os.getloadavg()[0]
    for _ in range(runs):  # interleaved: every case sees the same neighbours
        for name, (argv, extra) in cases.items():
            samples[name].append(_process(argv, dict(os.environ, **extra)))
    load_end = os.getloadavg()[0]
    med = {
        k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
        for k, v in samples.items()
    }
    sizes = {
        "one": one.stat().st_size,
        "several": sum(p.stat().st_size for p in several),
        "largest shard alone": several[0].stat().st_size,
    }
    lines = [
        f"## `--hash` as a whole process vs `openssl dgst -sha256`, {gib:g} GiB (median of {runs}, interleaved)",
        "",
        (
            f"One {sizes['one'] / 2**30:.2f} GiB file, and {len(several)} shards of "
            f"{sizes['several'] / len(several) / 2**20:.0f} MiB ({cpus} CPUs), page cache warm; "
            "wall clock and CPU (user+sys) of each whole process, bringup's start-up included "
            "(bytecode compiled, as an install does). "
            f"Load average {load_start:.1f} at the start, {load_end:.1f} at the end (shared machine)."
        ),
        "",
        "| case | wall (median) | MB/s | CPU s (median) | speed vs openssl (wall) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, (wall, cpu) in med.items():
        kind = name.split(":")[0]
        ref = med[next(k for k in med if k.startswith(kind) and "openssl" in k)][0]
        lines.append(
            f"| {name} | {wall:.2f} s | {sizes[kind] / wall / 1e6:,.0f} | {cpu:.2f} | {ref / wall:.2f}x |"
        )
    lines += [
        "",
        (
            "Goal: at least 0.95x openssl on one file and on several; on several shards, about the "
            "wall time of the largest shard alone when there are cores enough."
        ),
        "",
    ]
    for path in [one, *several]:
        path.unlink()
    folder.rmdir()  # the next size makes its own
    return lines


def main() -> int:
    """Run all three benchmarks and write the markdown figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "verify.md"))
    parser.add_argument("--hash-gb", type=float, default=2.0)
    parser.add_argument(
        "--only-process", action="store_true", help="only the whole-process --hash comparison"
    )
    parser.add_argument(
        "--process-gib", default="1,10", help="sizes (GiB) of the whole-process comparison"
    )
    parser.add_argument(
        "--tree", action="append", default=[], help="NAME=SRC: another tree's src/ beside this one"
    )
    args = parser.parse_args()
    trees = {n: Path(s) for n, _, s in (t.partition("=") for t in args.tree)}
    by_size = [
        (lambda t, g=float(g): bench_hash_process(t, g, trees=trees))
        for g in args.process_gib.split(",")
    ]
    if shutil.which("openssl") is None:
        print("openssl is not installed; the comparison needs it", file=sys.stderr)
        return 2
    load = os.getloadavg()[0]
    lines = [
        "# bringup verify: measured figures",
        "",
        (
            f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"{subprocess.run(['openssl', 'version'], capture_output=True, text=True).stdout.strip()}; "
            f"load average {load:.2f} at start (the machine is shared). "
            f"Command: `.venv/bin/python bench/bench_verify.py`."
        ),
        "",
    ]
    with tempfile.TemporaryDirectory(prefix="bench-verify-", dir="/tmp") as tmp:
        benches: list[Callable[[Path], list[str]]] = list(by_size)
        if not args.only_process:
            benches = [
                bench_headers,
                lambda t: bench_hash_one(t, args.hash_gb),
                lambda t: bench_hash_many(t, args.hash_gb),
                *by_size,
            ]
        for bench in benches:
            section = bench(Path(tmp))
            print("\n".join(section), flush=True)
            lines += section
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
