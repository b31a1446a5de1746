"""This machine's memory bandwidth as a CPU decode step sees it: what it can stream per second.

The probe is the inner loop of a float32 decode step, a dot product of a weight row with the
activations: ``numpy.dot`` of a float32 buffer with itself, one slice per thread (numpy
releases the GIL), over a buffer of at least 1 GiB and four times the last-level cache, the
best of several passes. It reads and barely writes, as decode does (a read-only kernel is
the right denominator: ggml-org/llama.cpp#26484).

It measures what float32 dot products stream with ``threads`` threads, which is not always
what the memory could deliver to another kernel: on this project's machine one thread streams
about 22 GB/s of float64 but only 12-13 GB/s of float32 dot products (one core's float32 loop is
the limit, as it is for llama.cpp's and PyTorch's float32 matrix-vector products), while two
threads reach 20-22 GB/s either way. Measure with as many threads as the engine decodes with.

    measure_read_bandwidth(threads=2)        # bytes per second, e.g. 2.1e10

An engine whose kernel is not that loop is measured with its own: vLLM's CPU build runs every
linear through PyTorch's ``F.linear``, which on an AVX-512 host here streamed 13-14 GB/s on one
thread where float32 dot products streamed 27-28, so :func:`measure_torch_linear_bandwidth` times
``F.linear`` of one token in the engine's own interpreter (``bringup bench --engine-python``).
"""

from __future__ import annotations

import functools
import os
import threading
import time
from pathlib import Path

from bringup.units import MiB

DEFAULT_BUFFER_BYTES = 1024 * MiB
PASSES = 10


def last_level_cache_bytes() -> int:
    """Size of the largest CPU cache (sysfs), 0 when unknown."""
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = path.read_text(encoding="ascii").strip()
        except OSError:
            continue
        unit = {"K": 1024, "M": MiB, "G": 1024 * MiB}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * unit)
    return max(sizes, default=0)


def usable_cores() -> int:
    """Cores this process may run on."""
    return len(os.sched_getaffinity(0))


@functools.lru_cache(maxsize=8)
def cached_read_bandwidth(threads: int) -> float:
    """:func:`measure_read_bandwidth` once per process and thread count."""
    return measure_read_bandwidth(threads=threads)


def measure_read_bandwidth(
    buffer_bytes: int | None = None, passes: int = PASSES, threads: int | None = None
) -> float:
    """Read bandwidth in bytes per second with ``threads`` readers (default: every usable
    core), the best of ``passes`` reads of a buffer of at least 1 GiB and four times the
    last-level cache, so the cache cannot serve it. One core alone reads much less than
    all of them: measure with as many threads as the engine decodes with."""
    import numpy as np

    size = buffer_bytes or max(DEFAULT_BUFFER_BYTES, 4 * last_level_cache_bytes())
    data = np.ones(size // 4, dtype=np.float32)
    parts = np.array_split(data, max(1, threads or usable_cores()))
    best = 0.0
    for _ in range(max(1, passes) + 1):  # the first pass also faults the pages in (slower)
        readers = [threading.Thread(target=np.dot, args=(p, p)) for p in parts]
        start = time.perf_counter()
        for t in readers:
            t.start()
        for t in readers:
            t.join()
        elapsed = time.perf_counter() - start
        best = max(best, data.nbytes / elapsed)
    return best


# --- the engine's own kernel: PyTorch's matrix-vector product, run by the engine's python ----

TORCH_PROBE = """
import sys, time, torch
threads, size, passes = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
rows, cols = 4096, 1024
mats = [torch.ones(rows, cols) for _ in range(max(1, size // (rows * cols * 4)))]
x = torch.ones(1, cols)
best = 0.0
for _ in range(passes + 1):
    start = time.perf_counter()
    for m in mats:
        torch.nn.functional.linear(x, m)
    best = max(best, len(mats) * rows * cols * 4 / (time.perf_counter() - start))
print(best)
"""


@functools.lru_cache(maxsize=8)
def cached_torch_linear_bandwidth(python: str, threads: int) -> float:
    """:func:`measure_torch_linear_bandwidth` once per process, interpreter and thread count."""
    return measure_torch_linear_bandwidth(python, threads=threads)


def measure_torch_linear_bandwidth(
    python: str, threads: int, buffer_bytes: int | None = None, passes: int = PASSES
) -> float:
    """Bytes per second that PyTorch's float32 matrix-vector product (``F.linear`` of one
    token, the call vLLM's CPU build makes for every linear layer) streams with ``threads``
    threads, in the interpreter ``python`` (the engine's own, with its torch): over float32
    matrices of 4096 x 1024 totalling at least 1 GiB and four times the last-level cache, the
    best of ``passes``. OSError when that interpreter cannot run it (no torch, not found)."""
    size = buffer_bytes or max(DEFAULT_BUFFER_BYTES, 4 * last_level_cache_bytes())
    argv = [python, "-c", TORCH_PROBE, str(threads), str(size), str(max(1, passes))]
    return run_probe(argv, "the PyTorch probe", timeout=600)


def run_probe(argv: list[str], what: str, timeout: float) -> float:
    """The positive number a probe in an engine's interpreter (``argv[0]``) prints last;
    OSError naming ``what`` when it cannot run, fails (its last error line), prints no number
    or measures nothing. ``subprocess.run`` kills a probe that outlives ``timeout``: nothing
    is left behind."""
    import subprocess

    python = argv[0]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OSError(f"{python}: {what} did not run ({exc})") from exc
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise OSError(f"{python}: {what} failed: {last[:200]}")
    try:
        rate = float(lines[-1])
    except ValueError as exc:
        raise OSError(f"{python}: {what} printed {lines[-1][:80]!r}") from exc
    if rate <= 0:
        raise OSError(f"{python}: {what} measured nothing")
    return rate
