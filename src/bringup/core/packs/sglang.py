"""SGLang (``python -m sglang.launch_server``), 0.4.x and 0.5.x (its source as read for the
shared reference ``../shared/reference/engines.md`` section 2, not in this repository)."""

from __future__ import annotations

import math
from types import MappingProxyType

from bringup.core.diagnosis import Remedy
from bringup.core.packs import memory_remedies as mem
from bringup.core.packs import remedies as r
from bringup.core.packs.torch import TORCH_OOM
from bringup.core.packs.types import (
    EngineFlags,
    EntryPoint,
    FactRule,
    FrameRule,
    HttpSpec,
    Pack,
    PhaseMarker,
    ProgressRule,
    RemedyContext,
    Signature,
    TokenizeSpec,
    rx,
    to_float,
    to_int,
)
from bringup.core.vocab import Engine, FailureClass, Phase

F = FailureClass
P = Phase


def mem_fraction_lower(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """SGLang: OOM or graph-capture failure: less static memory, smaller graphs."""
    frac = r.number(ctx, "mem_fraction_static")
    value = f"{round(frac - 0.05, 2):g}" if frac else "0.8"
    return (
        Remedy(f"Lower --mem-fraction-static to {value}.", "--mem-fraction-static", value),
        Remedy("Capture fewer CUDA graphs: --cuda-graph-max-bs 64.", "--cuda-graph-max-bs", "64"),
        Remedy(
            "Shrink prefill chunks: --chunked-prefill-size 4096.", "--chunked-prefill-size", "4096"
        ),
    )


def mem_fraction_raise(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """SGLang: the weights left nothing for the KV pool."""
    low = r.number(ctx, "minimum")
    frac = r.number(ctx, "mem_fraction_static")
    if low is not None:
        value = f"{math.ceil((low + 0.02) * 100) / 100:g}"
    else:
        value = f"{min(0.95, round(frac + 0.05, 2)):g}" if frac else "0.9"
    return (
        Remedy(
            f"Raise --mem-fraction-static to {value} so the KV pool gets memory.",
            "--mem-fraction-static",
            value,
        ),
        mem.more_tp(ctx),
    )


_OOM = TORCH_OOM

ENTRY_POINTS = (
    EntryPoint(("--model-path", "--model"), module="sglang.launch_server"),
    EntryPoint(("--model-path", "--model"), program="sglang", subcommand="serve"),
)

MEM_FRACTION = "--mem-fraction-static"
CUDA_GRAPH_MAX_BS = "--cuda-graph-max-bs"

# SGLang's own names (python -m sglang.launch_server --help); its memory default depends on
# the GPU, so none is assumed here.
FLAGS = EngineFlags(
    memory_share=MEM_FRACTION,
    max_sequences="--max-running-requests",
    eager="--disable-cuda-graph",
    context_length="--context-length",
    graph_batch=CUDA_GRAPH_MAX_BS,
    facts=MappingProxyType({MEM_FRACTION: "mem_fraction_static"}),
    retry_safe=frozenset(
        {
            MEM_FRACTION,
            CUDA_GRAPH_MAX_BS,
            "--chunked-prefill-size",
            "--disable-cuda-graph",
            "--context-length",
            "--max-running-requests",
        }
    ),
    boolean=frozenset(
        {
            "--enable-dp-attention",
            "--enable-ep-moe",
            "--skip-server-warmup",
            "--disable-cuda-graph",
            "--trust-remote-code",
            "--disable-custom-all-reduce",
        }
    ),
    others=frozenset(
        {
            "--model-path",
            "--model",
            "--served-model-name",
            "--host",
            "--port",
            "--tensor-parallel-size",
            "--tp-size",
            "--dp-size",
        }
    ),
)

PACK = Pack(
    engine=Engine.SGLANG,
    detect=(
        "server_args=ServerArgs",
        "sglang",
        "SGLang",
        # model_runner's and the scheduler's own messages, and the warmup's request to its
        # own /get_model_info route (http_server.py)
        "Load weight end. type=",
        "KV Cache is allocated. #tokens",
        "Capture cuda graph begin",
        "max_total_num_tokens=",
        "/get_model_info",
    ),
    # its logger's prefix names the ranks: "[2025-01-02 03:04:05 DP0 TP0] " or "[TP0] "
    detect_lines=(
        rx(
            r"\[(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d )?(?:(?:DP|PP|EP|CP)\d+ )*TP\d+(?: (?:EP|CP)\d+)*\] "
        ),
    ),
    version=(rx(r"sglang(?:==| version:? v?)(?P<version>\d+\.\d+\.\d+\S*)"),),
    phases=(
        PhaseMarker(rx(r"server_args=ServerArgs\("), P.START),
        PhaseMarker(rx(r"Init torch distributed begin"), P.DISTRIBUTED_INIT),
        PhaseMarker(rx(r"Load weight begin"), P.WEIGHTS_LOADING),
        PhaseMarker(rx(r"Load weight end"), P.WEIGHTS_LOADED),
        PhaseMarker(rx(r"KV Cache is allocated|Memory pool end"), P.KV_CACHE_ALLOC),
        PhaseMarker(
            rx(r"Capture (?:decode |prefill )?(?:cuda|CUDA) graph begin"), P.CUDA_GRAPH_CAPTURE
        ),
        PhaseMarker(
            rx(r"Capture (?:decode |prefill )?(?:cuda|CUDA) graph end|max_total_num_tokens="),
            P.WARMUP,
        ),
        PhaseMarker(
            rx(
                r"Started server process|Waiting for application startup|Application startup complete|Uvicorn running on"
            ),
            P.WARMUP,  # SGLang binds first, then sends itself a warmup request (/health 503)
        ),
        PhaseMarker(rx(r"The server is fired up and ready to roll!"), P.READY),
    ),
    progress=(
        ProgressRule(
            rx(
                r"Loading (?:safetensors|pt) checkpoint shards:.*?\|\s*(?P<done>\d+)/(?P<total>\d+)"
            ),
            P.WEIGHTS_LOADING,
            "shards",
            "shards_done",
            "shards_total",
        ),
        ProgressRule(
            rx(r"Capturing batches \(.*?\|\s*(?P<done>\d+)/(?P<total>\d+)"),
            P.CUDA_GRAPH_CAPTURE,
            "graphs",
            "graphs_done",
            "graphs_total",
        ),
    ),
    facts=(
        FactRule(rx(r"model_path='(?P<model>[^']+)'")),
        FactRule(rx(r"\btp_size=(?P<tensor_parallel_size>\d+)"), {"tensor_parallel_size": to_int}),
        FactRule(
            rx(r"\bmem_fraction_static=(?P<mem_fraction_static>[\d.]+)"),
            {"mem_fraction_static": to_float},
        ),
        FactRule(
            rx(
                r"Load weight end\..*?(?:elapsed=(?P<load_seconds>[\d.]+) s.*?)?mem usage=(?P<weights_gib_per_gpu>[\d.]+) GB"
            ),
            {"load_seconds": to_float, "weights_gib_per_gpu": to_float},
        ),
        FactRule(
            rx(r"KV Cache is allocated\..*?#tokens: (?P<kv_cache_tokens>\d+)"),
            {"kv_cache_tokens": to_int},
        ),
        FactRule(
            rx(r"(?:cuda|CUDA) graph end\..*?mem usage=(?P<cuda_graph_gib>[\d.]+) GB"),
            {"cuda_graph_gib": to_float},
        ),
        FactRule(
            rx(
                r"max_total_num_tokens=(?P<kv_cache_tokens>\d+), chunked_prefill_size=(?P<chunked_prefill_size>-?\d+), max_prefill_tokens=(?P<max_num_batched_tokens>\d+), max_running_requests=(?P<max_num_seqs>\d+), context_len=(?P<max_model_len>\d+)"
            ),
            {
                "kv_cache_tokens": to_int,
                "chunked_prefill_size": to_int,
                "max_num_batched_tokens": to_int,
                "max_num_seqs": to_int,
                "max_model_len": to_int,
            },
        ),
        # model_runner: the token budget it profiled (below zero: nothing left for the KV cache)
        FactRule(
            rx(r"is larger than the profiled value (?P<profiled_max_tokens>-?\d+)"),
            {"profiled_max_tokens": to_int},
        ),
        FactRule(
            rx(r"available_gpu_mem=(?P<available_gpu_gib>[\d.]+) GB"),
            {"available_gpu_gib": to_float},
        ),
    ),
    signatures=(
        Signature(
            "address_in_use",
            rx(
                r"\[Errno 98\] (?:error while attempting to bind on address \('?(?P<host>[^',]*)'?, (?P<port>\d+)\): )?[Aa]ddress already in use|[Pp]ort (?P<port__2>\d+) is (?:already )?in use"
            ),
            F.PORT_IN_USE,
            "The HTTP port is already in use.",
            r.port_in_use,
            P.API_SERVER_STARTING,
        ),
        Signature(
            "graph_capture_failed",
            rx(r"Capture cuda graph failed: .*out of memory"),
            F.CUDA_OOM,
            "CUDA graph capture ran out of memory.",
            mem_fraction_lower,
            P.CUDA_GRAPH_CAPTURE,
            priority=2,
            refines=("cuda_oom", "accelerator_oom"),  # the torch OOM capture() raised
        ),
        Signature(
            "no_kv_left",
            rx(
                r"Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=(?P<mem_fraction_static>[\d.]+)\. Raise --mem-fraction-static above (?P<minimum>[\d.]+)"
            ),
            F.KV_CACHE_INSUFFICIENT,
            "The weights leave no memory for the KV cache at --mem-fraction-static {mem_fraction_static}.",
            mem_fraction_raise,
            P.KV_CACHE_ALLOC,
            priority=2,
        ),
        Signature(
            "not_enough_memory",
            rx(r"Not enough memory\. Please try to increase --mem-fraction-static"),
            F.KV_CACHE_INSUFFICIENT,
            "The static memory fraction leaves no room for the KV cache.",
            mem_fraction_raise,
            P.KV_CACHE_ALLOC,
            priority=2,
        ),
        Signature(
            "unbalanced",
            rx(r"The memory capacity is unbalanced"),
            F.GPU_MEMORY_UTILIZATION,
            "GPUs have different free memory: another process holds memory on some of them.",
            mem.free_memory,
            P.DISTRIBUTED_INIT,
            priority=2,
        ),
        Signature(
            "runtime_oom",
            rx(r"(?:Prefill|Decode) out of memory"),
            F.CUDA_OOM,
            "The GPU ran out of memory running a batch.",
            mem_fraction_lower,
        ),
        Signature(
            "cuda_oom", rx(_OOM), F.CUDA_OOM, "The GPU ran out of memory.", mem_fraction_lower
        ),
        Signature(
            "nccl_error",
            rx(
                r"DistBackendError: NCCL error|NCCL error in: |NCCL WARN (?:Cuda failure|Call to|NET/|Error)|ncclInternalError|ncclSystemError|Watchdog caught collective operation timeout"
            ),
            F.NCCL_ERROR,
            "NCCL (GPU-to-GPU communication) failed.",
            r.nccl,
            priority=2,
        ),
        Signature(
            "no_kernel_image",
            rx(
                r"no kernel image is available for execution on the device|Bfloat16 is only supported|is not compatible with the current PyTorch installation"
            ),
            F.UNSUPPORTED_HARDWARE,
            "This build has no kernels for this GPU (architecture or dtype).",
            r.wrong_build,
            priority=2,
        ),
        Signature(
            "weights",
            rx(
                r"Cannot find any model weights|SafetensorError|does not appear to have a file named|RepositoryNotFoundError|is not a local folder and is not a valid model identifier|No such file or directory: '[^']*\.(?:safetensors|bin|json)'"
            ),
            F.MISSING_OR_CORRUPT_WEIGHTS,
            "Model files are missing or unreadable.",
            r.redownload,
            P.WEIGHTS_LOADING,
        ),
        Signature(
            "old_gpu",
            rx(r"SGLang only supports sm(?P<sm>\d+) and above"),
            F.UNSUPPORTED_HARDWARE,
            "This GPU is older than SGLang supports (sm{sm} and above).",
            r.wrong_build,
            P.WEIGHTS_LOADING,
        ),
        Signature(
            "remote_code",
            # the message, not the flag: an args dump containing the flag is no failure
            rx(
                r"contains custom code which must be executed|pass the argument .trust_remote_code=True|consider setting .trust_remote_code"
            ),
            F.CONFIG_ERROR,
            "The model needs its own code; pass --trust-remote-code.",
            r.trust_remote_code,
            P.CONFIG,
        ),
        Signature(
            "config",
            rx(
                r"error: argument |error: unrecognized arguments|must be divisible by|is not supported for now|Unsupported architectures?|ValueError: Invalid"
            ),
            F.CONFIG_ERROR,
            "The flags or the model configuration are invalid.",
            r.fix_flags,
            P.CONFIG,
        ),
        Signature(
            "warmup_timeout",
            rx(r"ReadTimeout|Read timed out"),
            F.TIMEOUTS,
            "The warmup request timed out (SGLANG_WARMUP_TIMEOUT).",
            r.stalled,
            P.WARMUP,
        ),
        # a scheduler's exit code (-9: SIGKILL) is read by the general rule on summaries
        Signature(
            "wrapper",
            rx(
                r"Scheduler hit an exception|Received sigquit from a child process|scheduler died during initialization|Rank \d+ scheduler is dead|Initialization failed\.|Exit code: -\d+"
            ),
            F.ENGINE_CORE_DIED,
            "A scheduler process died; no more specific cause is in the log.",
            r.engine_died,
            is_wrapper=True,
        ),
    ),
    exclusions=(rx(r"destroy_process_group"), rx(r"Health check failed")),
    frames=(
        FrameRule(
            frozenset(
                {
                    "capture",
                    "init_cuda_graphs",
                    "init_device_graphs",
                    "capture_one_batch_size",
                    "init_forward_metadata_capture_cuda_graph",
                }
            ),
            P.CUDA_GRAPH_CAPTURE,
        ),
        FrameRule(frozenset({"init_memory_pool", "profile_max_num_token"}), P.KV_CACHE_ALLOC),
        FrameRule(frozenset({"load_model", "load_weights"}), P.WEIGHTS_LOADING),
        FrameRule(
            frozenset(
                {
                    "init_torch_distributed",
                    "init_distributed_environment",
                    "initialize_model_parallel",
                }
            ),
            P.DISTRIBUTED_INIT,
        ),
    ),
    http=HttpSpec(
        default_port=30000,
        health_path="/health_generate",
        refuses_until_ready=False,
        health_503_while_loading=True,
        tokenize=TokenizeSpec("/tokenize", "vllm"),
    ),
    phase_after=MappingProxyType({P.WEIGHTS_LOADED: P.KV_CACHE_ALLOC}),
    restart=(rx(r"server_args=ServerArgs\("),),
    exit_summary="SGLang exited before it was ready, without a cause in the log.",
    entry_points=ENTRY_POINTS,
    flags=FLAGS,
)
