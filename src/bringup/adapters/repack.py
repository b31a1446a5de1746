"""How fast vLLM's CPU build repacks a weight for its GEMM, measured in the engine's own python.

After the shards are read, vLLM 0.32's ``process_weights_after_loading`` hands every 2-D
linear weight to ``dispatch_cpu_unquantized_gemm`` (``vllm/model_executor/layers/utils.py``),
which on an x86 host without AMX builds a oneDNN matmul handler from it:
``ops.create_onednn_mm(weight.t(), 32)`` (``vllm/_custom_ops.py``) calls the CPU kernel
library's ``torch.ops._C.create_onednn_mm_handler``, whose
``DNNLMatMulPrimitiveHandler::prepack_weight`` (vllm-project/vllm
``csrc/cpu/dnnl_helper.cpp``) runs ``dnnl::reorder`` from the plain weight into a new
``dnnl::memory`` in the blocked layout the matmul wants: every byte read and written, with
a strided pattern, into memory nothing has touched. It is timed itself rather than taken as a
plain copy into fresh pages (on this project's machine it ran at 1.0-1.3 times the fresh-copy
rate; bench/RESULTS.md, fourth round):

- the probe (:data:`REPACK_PROBE`, a few seconds at most) runs in the engine's interpreter,
  loads the CPU kernel library vLLM's ``CpuPlatform.import_kernels`` would pick (``_C``,
  ``_C_AVX512`` or ``_C_AVX2``, by the CPU's AVX-512 and AVX-512-BF16 support) straight from
  the installed package, without importing vLLM itself (which takes seconds), and calls that
  same op on layer-sized float32 weights (together four times the last-level cache at least,
  so the cache cannot serve them) with the engine's OpenMP thread count, the best of a few
  passes, each into new memory;
- the thread count is vLLM's: ``VLLM_CPU_OMP_THREADS_BIND`` as a core list (the first
  rank's, before any ``|``), else every usable core.

    measure_repack("/venv/bin/python", rows=8192, cols=1024, threads=1)  # bytes/s, e.g. 1.1e9

``OSError`` when the interpreter cannot run it (no torch, no vLLM CPU kernels, no oneDNN).
:class:`FakeRepack` stands in for it in tests.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from bringup.adapters import membw

PROBE_BYTES = 32 * 1024 * 1024  # one layer-sized weight at most: a fraction of a second
PASSES = 3
TIMEOUT_S = 60

REPACK_PROBE = """
import importlib.util, os, sys, time, torch
rows, cols, threads, passes, count = (int(a) for a in sys.argv[1:6])
torch.set_num_threads(threads)
lib = "_C_AVX2"
if torch.cpu._is_avx512_supported():
    lib = "_C" if torch.cpu._is_avx512_bf16_supported() else "_C_AVX512"
spec = importlib.util.find_spec("vllm")
if spec is None or not spec.submodule_search_locations:
    sys.exit("no vllm package in this interpreter")
folder = list(spec.submodule_search_locations)[0]
found = [n for n in os.listdir(folder) if n.startswith(lib + ".") and n.endswith(".so")]
if not found:
    sys.exit(f"no vLLM CPU kernel library {lib} in {folder}")
torch.ops.load_library(os.path.join(folder, found[0]))
if not hasattr(torch.ops._C, "create_onednn_mm_handler"):
    sys.exit("this vLLM's CPU kernels have no oneDNN matmul")
weights = [torch.ones(rows, cols) for _ in range(count)]
best = 0.0
for _ in range(passes):
    start = time.perf_counter()
    handlers = [torch.ops._C.create_onednn_mm_handler(w.t(), 32) for w in weights]
    best = max(best, count * weights[0].nbytes / (time.perf_counter() - start))
print(best)
"""


class RepackMeter(Protocol):
    """Measures the repack rate (bytes per second) in one interpreter."""

    def __call__(
        self, python: str, rows: int, cols: int, threads: int, cache_bytes: int = 0
    ) -> float: ...


def measure_repack(
    python: str, rows: int, cols: int, threads: int, passes: int = PASSES, cache_bytes: int = 0
) -> float:
    """Bytes per second vLLM's CPU GEMM repack (oneDNN's reorder of ``rows`` x ``cols``
    float32 weights) runs at in ``python`` with ``threads`` threads, the best of ``passes``.
    Each pass reorders as many such weights as make :data:`PROBE_BYTES` or four times the
    last-level cache (``cache_bytes``), whichever is larger, so the cache cannot serve them
    (the engine's weights are far larger than any cache), as ``adapters.membw`` sizes its
    buffer. ``subprocess.run`` kills the probe if it outlives ``TIMEOUT_S``: nothing is left
    behind."""
    total = max(PROBE_BYTES, 4 * cache_bytes)
    count = max(1, -(-total // max(1, rows * cols * 4)))
    argv = [python, "-c", REPACK_PROBE, str(rows), str(cols), str(threads), str(max(1, passes))]
    argv.append(str(count))
    return membw.run_probe(argv, "the repack probe", timeout=TIMEOUT_S)


def probe_shape(
    hidden_size: int, intermediate_size: int = 0, cache_bytes: int = 0
) -> tuple[int, int]:
    """One layer's largest linear weight: the gated MLP's stacked ``gate_up_proj``, 2 x
    ``intermediate`` x ``hidden`` (vLLM's ``MergedColumnParallelLinear``; an intermediate of
    four times the hidden size when unknown), in float32, cut to :data:`PROBE_BYTES` or four
    times the last-level cache (``cache_bytes``), whichever is larger, so the probe stays
    short."""
    cols = max(1, hidden_size)
    rows = 2 * (intermediate_size or 4 * cols)
    limit = max(PROBE_BYTES, 4 * cache_bytes)
    return max(1, min(rows, limit // (4 * cols))), cols


def omp_threads(environ: Mapping[str, str]) -> int:
    """The OpenMP threads one vLLM CPU worker runs: the cores ``VLLM_CPU_OMP_THREADS_BIND``
    lists for the first rank (``0-3,8``; ranks are separated by ``|``), else every usable core
    (``auto``, ``nobind`` or unset)."""
    usable = len(os.sched_getaffinity(0))
    text = environ.get("VLLM_CPU_OMP_THREADS_BIND", "").split("|")[0].strip()
    cores: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return usable
        cores.update(range(int(lo), int(hi or lo) + 1))
    return len(cores) or usable


@dataclass
class FakeRepack:
    """A stand-in for :func:`measure_repack`: the given rate (or OSError), and the calls."""

    rate: float | None = 1e9
    calls: list[tuple[str, int, int, int]] = field(default_factory=list)

    def __call__(
        self, python: str, rows: int, cols: int, threads: int, cache_bytes: int = 0
    ) -> float:
        self.calls.append((python, rows, cols, threads))
        if self.rate is None:
            raise OSError(f"{python}: the repack probe failed: fake")
        return self.rate
