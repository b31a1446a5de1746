"""vLLM's log, read: the phase markers, progress bars, facts, lines that are not causes, and
the traceback frames that place a failure in a phase.

Strings are from the vLLM sources (PyPI sdists, 0.33.0 and older), as read for the shared
reference ``../shared/reference/engines.md`` section 1 (not in this repository). Patterns
are searched in the bare message (process prefixes and logging header already removed).
"""

from __future__ import annotations

from bringup.core.packs.types import (
    FactRule,
    FrameRule,
    PhaseMarker,
    ProgressRule,
    rx,
    to_float,
    to_int,
)
from bringup.core.vocab import Phase

P = Phase

PHASES = (
    PhaseMarker(rx(r"vLLM (?:API )?server version|non-default args:|args: Namespace\("), P.START),
    PhaseMarker(rx(r"[█▀▄]\s+version\s+\d+\.\d+\S*\s*$"), P.START),
    PhaseMarker(
        rx(r"Resolved architecture:|Using max model len|Chunked prefill is enabled"), P.CONFIG
    ),
    PhaseMarker(rx(r"Initializing an? (?:V\d )?LLM engine"), P.CONFIG),
    PhaseMarker(
        rx(r"world_size=\d+ rank=|vLLM is using nccl==|rank \d+ in world size \d+ is assigned as"),
        P.DISTRIBUTED_INIT,
    ),
    PhaseMarker(
        rx(
            r"Starting to load model|Loading model from scratch|Using \S.* backend(?: on V1 engine\.| out of potential)"
        ),
        P.WEIGHTS_LOADING,
    ),
    PhaseMarker(
        rx(r"Model loading took|Loading model weights took|Loading weights took"), P.WEIGHTS_LOADED
    ),
    PhaseMarker(
        rx(
            r"for vLLM's torch\.compile|torch\.compile cache is disabled|Starting torch\.compile|Dynamo bytecode transform time|Compiling a graph for|Directly load the compiled graph|Warming up model for the compilation"
        ),
        P.TORCH_COMPILE,
    ),
    PhaseMarker(
        rx(
            r"torch\.compile t(?:akes|ook) [\d.]+ s in total|Memory profiling takes|Profiling CUDA graph memory|Initial profiling/warmup run took"
        ),
        P.MEMORY_PROFILING,
    ),
    PhaseMarker(
        rx(
            r"Available KV cache memory|KV cache size: [\d,]+ tokens|# (?:GPU|cuda) blocks: \d+|GiB for KV cache on node \d+"
        ),
        P.KV_CACHE_ALLOC,
    ),
    PhaseMarker(rx(r"Capturing (?:CUDA graph|cudagraphs)"), P.CUDA_GRAPH_CAPTURE),
    PhaseMarker(rx(r"Graph capturing finished in"), P.WARMUP),
    PhaseMarker(
        rx(
            r"init engine \(profile, create kv cache, warmup model\) took|Core engine process \d+ ready|Supported[ _]tasks:|Starting vLLM (?:API )?server|Available routes are:"
            # entrypoints/launcher.py lists the app's routes before uvicorn serves it
            r"|^Route: /\S*, Methods: "
        ),
        P.API_SERVER_STARTING,
    ),
    PhaseMarker(rx(r"^Application startup complete\.$"), P.READY, requires=P.API_SERVER_STARTING),
    # a server answering requests is ready whatever the log shows of its start; so is an offline
    # LLM() processing prompts
    PhaseMarker(
        rx(r"Avg prompt throughput: |^Processed prompts: "),
        P.READY,
    ),
)

PROGRESS = (
    ProgressRule(
        rx(
            r"(?:Loading (?:safetensors|pt) checkpoint shards|Multi-thread loading pt checkpoint shards|Loading safetensors using Runai Model Streamer):.*?\|\s*(?P<done>\d+)/(?P<total>\d+)"
        ),
        P.WEIGHTS_LOADING,
        "shards",
        "shards_done",
        "shards_total",
    ),
    ProgressRule(
        rx(r"Capturing CUDA graph.*?\|\s*(?P<done>\d+)/(?P<total>\d+)"),
        P.CUDA_GRAPH_CAPTURE,
        "graphs",
        "graphs_done",
        "graphs_total",
    ),
)

_FLOAT = to_float
FACTS = (
    FactRule(
        rx(
            r"Model loading took (?P<weights_gib_per_gpu>[\d.]+) GiB(?: memory)? and (?P<load_seconds>[\d.]+) seconds"
        ),
        {"weights_gib_per_gpu": _FLOAT, "load_seconds": _FLOAT},
    ),
    FactRule(
        rx(r"Loading model weights took (?P<weights_gib_per_gpu>[\d.]+) GB"),
        {"weights_gib_per_gpu": _FLOAT},
    ),
    FactRule(rx(r"KV cache size: (?P<kv_cache_tokens>[\d,]+) tokens"), {"kv_cache_tokens": to_int}),
    FactRule(
        rx(r"torch\.compile t(?:akes|ook) (?P<compile_seconds>[\d.]+) s in total"),
        {"compile_seconds": _FLOAT},
    ),
    FactRule(
        rx(
            r"Maximum concurrency for (?P<max_model_len>[\d,]+) tokens per request: (?P<max_concurrency>[\d.]+)x"
        ),
        {"max_model_len": to_int, "max_concurrency": _FLOAT},
    ),
    FactRule(rx(r"# (?:GPU|cuda) blocks: (?P<gpu_blocks>\d+)"), {"gpu_blocks": to_int}),
    FactRule(
        rx(r"Available KV cache memory: (?P<available_kv_gib>-?[\d.]+) GiB"),
        {"available_kv_gib": _FLOAT},
    ),
    FactRule(
        rx(r"Estimated CUDA graph memory: (?P<cuda_graph_estimate_gib>[\d.]+) GiB"),
        {"cuda_graph_estimate_gib": _FLOAT},
    ),
    FactRule(
        rx(
            r"Graph capturing finished in (?P<graph_capture_seconds>[\d.]+) secs?, took (?P<cuda_graph_gib>[\d.]+) GiB"
        ),
        {"graph_capture_seconds": _FLOAT, "cuda_graph_gib": _FLOAT},
    ),
    FactRule(
        rx(
            r"init engine \(profile, create kv cache, warmup model\) took (?P<init_engine_seconds>[\d.]+)"
        ),
        {"init_engine_seconds": _FLOAT},
    ),
    FactRule(rx(r"Using max model len (?P<max_model_len>\d+)"), {"max_model_len": to_int}),
    FactRule(
        rx(r"max_num_batched_tokens=(?P<max_num_batched_tokens>\d+)"),
        {"max_num_batched_tokens": to_int},
    ),
    FactRule(rx(r"serving model (?P<model>\S+)$|[█▀▄]\s+model\s+(?P<model__2>\S+)\s*$")),
    FactRule(rx(r"(?:with config: |^)model='(?P<model>[^']+)'")),
    FactRule(rx(r"Resolved architecture: (?P<architecture>\w+)")),
    FactRule(
        rx(r"[\s,(]tensor_parallel_size=(?P<tensor_parallel_size>\d+)"),
        {"tensor_parallel_size": to_int},
    ),
    FactRule(rx(r"[\s,(]max_seq_len=(?P<max_model_len>\d+)"), {"max_model_len": to_int}),
    FactRule(rx(r"'model': '(?P<model>[^']+)'|\bmodel='(?P<model__2>[^']+)'")),
    FactRule(
        rx(r"\W(?:gpu_memory_utilization)'?[:=] ?(?P<gpu_memory_utilization>[\d.]+)"),
        {"gpu_memory_utilization": _FLOAT},
    ),
    FactRule(rx(r"\Wmax_num_seqs'?[:=] ?(?P<max_num_seqs>\d+)"), {"max_num_seqs": to_int}),
    FactRule(
        rx(r"\Wmax_num_batched_tokens'?[:=] ?(?P<max_num_batched_tokens>\d+)"),
        {"max_num_batched_tokens": to_int},
    ),
    FactRule(rx(r"\Wmax_model_len'?[:=] ?(?P<max_model_len>\d+)"), {"max_model_len": to_int}),
    FactRule(
        rx(r"\W(?:tensor_parallel_size)'?[:=] ?(?P<tensor_parallel_size>\d+)"),
        {"tensor_parallel_size": to_int},
    ),
    FactRule(rx(r"\W(?:port)'?[:=] ?(?P<port>\d+)"), {"port": to_int}),
    FactRule(
        rx(r"Starting vLLM (?:API )?server(?: \d+)? on https?://\S*:(?P<port>\d+)"),
        {"port": to_int},
    ),
    FactRule(rx(r"vLLM is using nccl==(?P<nccl_version>\S+)")),
    # Ray warns at the top when the container's /dev/shm is small (NCCL needs it)
    FactRule(rx(r"/dev/shm has only (?P<shm_bytes>\d+) bytes"), {"shm_bytes": to_int}),
    FactRule(rx(r"\bdevice_config=(?P<device>[a-z]+)")),
    FactRule(
        rx(r"warming up sampler with (?P<sampler_warmup_requests>\d+) dummy requests"),
        {"sampler_warmup_requests": to_int},
    ),
    FactRule(
        rx(
            r"Free memory on device(?: \S+)? \((?P<free_gib_at_start>[\d.]+)/(?P<total_gib>[\d.]+) GiB\)"
        ),
        {"free_gib_at_start": _FLOAT, "total_gib": _FLOAT},
    ),
)


EXCLUSIONS = (
    rx(r"destroy_process_group"),
    rx(r"No available shared memory broadcast block found"),
    rx(r"Retrying with a new port"),
    rx(r"^\s*File \""),
)

FRAMES = (
    FrameRule(
        frozenset(
            {
                "profile_run",
                "determine_available_memory",
                "determine_num_available_blocks",
                "profile_cudagraph_memory",
            }
        ),
        P.MEMORY_PROFILING,
    ),
    FrameRule(frozenset({"_dummy_sampler_run"}), P.WARMUP),
    FrameRule(frozenset({"capture_model", "_capture_cudagraphs", "capture"}), P.CUDA_GRAPH_CAPTURE),
    FrameRule(
        frozenset(
            {
                "_allocate_kv_cache",
                "_allocate_kv_cache_tensors",
                "initialize_kv_cache",
                "initialize_kv_cache_tensors",
                "_init_cache",
                "initialize_cache",
                "_reshape_kv_cache_tensors",
            }
        ),
        P.KV_CACHE_ALLOC,
    ),
    FrameRule(frozenset({"load_model", "load_weights"}), P.WEIGHTS_LOADING),
    FrameRule(
        frozenset(
            {"init_device", "init_distributed_environment", "init_worker_distributed_environment"}
        ),
        P.DISTRIBUTED_INIT,
    ),
)
