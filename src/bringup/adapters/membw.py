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
