"""The fixed durations of a vLLM startup, each with where it comes from.

Every figure is a median with its quartiles over many public startups, never one log: the
timestamped vLLM startups of the corpus (``../shared/corpus/logs/vllm``, read by
``bench/bench_startup_time.py --derive``, which prints these numbers again),. ``corpus logs/batch2`` was
kept out of the derivation, so its score is the unseen one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Band:
    """A duration: the typical value (a median) and its spread (quartiles), with its source."""

    seconds: float
    low: float
    high: float
    source: str

    def scaled(self, factor: float) -> Band:
        """The same band for ``factor`` times the work (graph counts, bytes)."""
        return Band(self.seconds * factor, self.low * factor, self.high * factor, self.source)


_CORPUS = "corpus logs/vllm"

# process start to "Starting to load model": imports, config, tokenizer, device and NCCL init
# (the first INFO/WARNING timestamp to that line; 50 startups)
START = Band(19.5, 12.8, 39.5, f"{_CORPUS}: first line to 'Starting to load model', 50 startups")

# "Model loading took ... Y seconds" minus "Loading weights took X seconds": building the model's
# modules and post-processing the weights, outside the shard reads (33 startups)
MODEL_INIT = Band(
    1.9, 0.7, 34.5, f"{_CORPUS}: 'Model loading took' minus 'Loading weights took', 33 startups"
)

# "torch.compile takes N s in total", without and with "Directly load the compiled graph"
COMPILE_COLD = Band(26.0, 13.6, 54.5, f"{_CORPUS}: 'torch.compile takes', cold cache, 10 startups")
COMPILE_WARM = Band(14.0, 6.3, 15.7, f"{_CORPUS}: 'torch.compile takes', warm cache, 13 startups")

# a warm compile is Dynamo's trace of the model's forward (those logs' "Dynamo bytecode
# transform time" is most of "torch.compile takes") plus loading the cached pieces: both go
# through every decoder layer once, so per layer (9 warm startups whose model's layer count
# bench/bench_plan_memory.py maps; leave-one-out 56 % within +-30 % against 33 % for one
# constant on the same logs, bench/results/startup_time.md). A cold compile is not scaled:
# Inductor compiles each *distinct* piece once (vLLM's piecewise backend; identical layers
# hit the FX graph cache), and per layer did not beat one constant on the 7 cold logs.
COMPILE_WARM_PER_LAYER = Band(
    0.29, 0.22, 0.44, f"{_CORPUS}: 'torch.compile takes' per layer, warm cache, 9 startups"
)

# one Inductor compile of every piece, cold: the cold logs' own "Compiling a graph for dynamic
# shape / general shape / compile range (...) takes N s" (``CompilerManager.compile`` logs it
# after the last piece, ``vllm/compilation/backends.py``); each compile range or size beyond
# the first costs this again (``core.vllm_compile``)
INDUCTOR_PER_COMPILE = Band(
    29.91, 6.54, 48.39, f"{_CORPUS}: 'Compiling a graph for ... takes', cold cache, 10 startups"
)
# loading one compile's graphs from vLLM's cache, warm: "Directly load the compiled graph(s)
# for ... from the cache, took N s" (``CompilerManager.compile``, logged per range or size)
LOAD_PER_COMPILE = Band(
    4.05, 1.55, 7.05, f"{_CORPUS}: 'Directly load the compiled graph ... took', 11 startups"
)

# "Graph capturing finished in N secs" / the captured sizes (cudagraph_capture_sizes, or the
# "Capturing CUDA graphs n/N" bar): seconds per captured size, one GPU and several (TP > 1:
# the capture waits on the collective of every rank)
GRAPH_ONE_GPU = Band(0.20, 0.11, 0.43, f"{_CORPUS}: capture seconds per size, TP 1, 14 startups")
GRAPH_MANY_GPUS = Band(0.55, 0.22, 1.12, f"{_CORPUS}: capture seconds per size, TP > 1, 6 startups")

# capture seconds per (captured size x decoder layer), 16 startups, TP 1 and > 1 pooled: each
# captured size runs ``cudagraph_num_of_warmups`` forwards and the capture through every layer
# (``GPUModelRunner._warmup_and_capture``; PIECEWISE captures one graph per layer's piece).
# Leave-one-out over the 21 corpus startups with a known layer count: 29 % within +-30 %
# against 10 % per size (per layer alone 33 %, but blind to --max-num-seqs), median abs.
# error 60 % against 59 %; bench/results/startup_time.md
GRAPH_PER_LAYER = Band(
    0.0072, 0.0032, 0.0117, f"{_CORPUS}: capture seconds per size x layer, 16 startups"
)

# "init engine (profile, create kv cache, warmup model) took X seconds" minus its compile and
# capture: the profile run, the KV cache allocation and the sampler warmup (18 startups)
PROFILE = Band(9.8, 5.2, 20.9, f"{_CORPUS}: 'init engine' minus compile and capture, 18 startups")

# "init engine ... took" to "Application startup complete": the API server's start (29)
API = Band(
    2.0, 0.5, 6.5, f"{_CORPUS}: 'init engine' to 'Application startup complete', 29 startups"
)

# when no shard is on this machine to measure: a local NVMe SSD read through the page cache
# (the order of a datacenter NVMe drive's sequential read, 2-7 GB/s) -- an assumption, said so
ASSUMED_STORAGE_BYTES_PER_S = 2.0e9
ASSUMED_STORAGE_SPREAD = (0.3e9, 7.0e9)
