"""Hugging Face TGI (``text-generation-launcher``; its source as read for the shared reference
``../shared/reference/engines.md`` section 3, not in this repository)."""

from __future__ import annotations

from types import MappingProxyType

from bringup.core.diagnosis import Remedy
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
    RemedyContext,
    Signature,
    rx,
    to_float,
    to_int,
)
from bringup.core.vocab import Engine, FailureClass, Phase

F = FailureClass
P = Phase


def tgi_prefill(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """TGI: the warmup prefill batch did not fit."""
    tokens = r.number(ctx, "tokens")
    value = str(max(256, int(tokens) // 2)) if tokens else "2048"
    return (
        Remedy(
            f"Lower --max-batch-prefill-tokens to {value}.", "--max-batch-prefill-tokens", value
        ),
        Remedy(
            "Or lower --max-total-tokens / --max-input-tokens, or use more shards (--num-shard)."
        ),
    )


_OOM = TORCH_OOM

ENTRY_POINTS = (EntryPoint(("--model-id",), program="text-generation-launcher"),)

# text-generation-launcher --help; TGI has no switch for CUDA graphs alone (--cuda-graphs 0).
FLAGS = EngineFlags(
    memory_share="--cuda-memory-fraction",
    max_sequences="--max-concurrent-requests",
    context_length="--max-total-tokens",
    retry_safe=frozenset({"--max-batch-prefill-tokens"}),
    boolean=frozenset({"--sharded", "--trust-remote-code"}),
    others=frozenset(
        {
            "--model-id",
            "--hostname",
            "--port",
            "--num-shard",
            "--max-input-tokens",
            "--max-batch-prefill-tokens",
            "--trust-remote-code",
        }
    ),
)

PACK = Pack(
    engine=Engine.TGI,
    detect=(
        "text_generation_launcher",
        "text_generation_router",
        "text_generation_server",
        "text-generation-launcher",
        "text-generation-server",
    ),
    version=(
        rx(r"text-generation-(?:launcher|router) (?P<version>\d+\.\d+\.\d+\S*)"),
        rx(r"version: \"?(?P<version>\d+\.\d+\.\d+)"),
    ),
    phases=(
        PhaseMarker(rx(r"^Args \{"), P.START),
        PhaseMarker(
            rx(r"Using attention|Default .max_batch_prefill_tokens."),
            P.CONFIG,
        ),
        # downloading, then each shard loading its part (NCCL init is inside the shard's load)
        PhaseMarker(
            rx(
                r"Starting check and download process|Successfully downloaded weights|Starting shard"
            ),
            P.WEIGHTS_LOADING,
        ),
        PhaseMarker(rx(r"Server started at unix://|Shard ready in"), P.WEIGHTS_LOADED),
        PhaseMarker(rx(r"Starting Webserver"), P.MEMORY_PROFILING),
        PhaseMarker(rx(r"Warming up model|Method Warmup|Warmup\("), P.WARMUP),
        PhaseMarker(
            rx(
                r"KV-cache blocks: \d+|Setting max batch total tokens to|Inferred max batch total tokens"
            ),
            P.KV_CACHE_ALLOC,
        ),
        PhaseMarker(rx(r"Cuda Graphs are enabled for sizes"), P.CUDA_GRAPH_CAPTURE),
        PhaseMarker(rx(r"Using backend V\d"), P.API_SERVER_STARTING),
        PhaseMarker(rx(r"(?:^|: )Connected\s*$"), P.READY),
    ),
    progress=(),
    facts=(
        FactRule(rx(r"model_id: \"(?P<model>[^\"]+)\"")),
        FactRule(
            rx(r"num_shard: Some\((?P<tensor_parallel_size>\d+)\)"),
            {"tensor_parallel_size": to_int},
        ),
        FactRule(
            rx(
                r"max_batch_prefill_tokens: Some\((?P<max_num_batched_tokens>\d+)\)|Default .max_batch_prefill_tokens. to (?P<max_num_batched_tokens__2>\d+)"
            ),
            {"max_num_batched_tokens": to_int},
        ),
        FactRule(
            rx(r"cuda_memory_fraction: (?P<gpu_memory_utilization>[\d.]+)"),
            {"gpu_memory_utilization": to_float},
        ),
        FactRule(rx(r"Shard ready in (?P<load_seconds>[\d.]+)s"), {"load_seconds": to_float}),
        FactRule(
            rx(r"KV-cache blocks: (?P<kv_cache_blocks>\d+), size: (?P<block_size>\d+)"),
            {"kv_cache_blocks": to_int, "block_size": to_int},
        ),
        FactRule(
            rx(
                r"(?:Setting max batch total tokens to|Inferred max batch total tokens:) (?P<kv_cache_tokens>\d+)"
            ),
            {"kv_cache_tokens": to_int},
        ),
        FactRule(rx(r"max_concurrent_requests: (?P<max_num_seqs>\d+)"), {"max_num_seqs": to_int}),
    ),
    signatures=(
        Signature(
            "prefill_oom",
            rx(r"Not enough memory to handle (?P<tokens>\d+) prefill tokens"),
            F.CUDA_OOM,
            "The warmup batch of {tokens} prefill tokens did not fit in GPU memory.",
            tgi_prefill,
            P.WARMUP,  # TGI's warmup is this prefill
            priority=2,
            refines=("cuda_oom", "accelerator_oom"),  # the shard's torch OOM it catches
        ),
        Signature(
            "total_tokens",
            rx(r"Not enough memory to handle .max_total_tokens=(?P<tokens>\d+)"),
            F.KV_CACHE_INSUFFICIENT,
            "The KV cache cannot hold max_total_tokens={tokens}.",
            tgi_prefill,
            P.KV_CACHE_ALLOC,
            priority=2,
        ),
        Signature("cuda_oom", rx(_OOM), F.CUDA_OOM, "The GPU ran out of memory.", tgi_prefill),
        Signature(
            "bind",
            rx(
                r"Failed to bind to (?P<host>\S+?):(?P<port>\d+)|Address already in use \(os error 98\)"
            ),
            F.PORT_IN_USE,
            "The HTTP port is already in use.",
            r.port_in_use,
            P.API_SERVER_STARTING,
        ),
        Signature(
            "devices",
            rx(r"not enough cuda devices|--num-shard .* is larger than"),
            F.CONFIG_ERROR,
            "More shards were asked for than there are visible GPUs.",
            r.fix_flags,
            P.CONFIG,
        ),
        Signature(
            "nccl_error",
            rx(
                r"DistBackendError: NCCL error|NCCL error in: |NCCL WARN (?:Cuda failure|Call to|NET/|Error)|ncclInternalError|ncclSystemError"
            ),
            F.NCCL_ERROR,
            "NCCL (GPU-to-GPU communication) failed.",
            r.nccl,
            priority=2,
        ),
        Signature(
            "hardware",
            rx(
                r"no kernel image is available|Bfloat16 is only supported|FlashAttention only supports Ampere GPUs or newer|is not compatible with the current PyTorch installation"
            ),
            F.UNSUPPORTED_HARDWARE,
            "This build has no kernels for this GPU.",
            r.wrong_build,
            priority=2,
        ),
        Signature(
            "weights",
            rx(
                # "No safetensors weights found ... Downloading PyTorch weights." is a WARN, not this
                r"RepositoryNotFoundError|Repository Not Found|SafetensorError|does not appear to have a file named|No such file or directory: .*\.safetensors|EntryNotFoundError: No \S+ weights found"
            ),
            F.MISSING_OR_CORRUPT_WEIGHTS,
            "Model files are missing or could not be downloaded.",
            r.redownload,
            P.WEIGHTS_LOADING,  # the download is part of getting the weights
        ),
        Signature(
            "cpu_quantize",
            rx(r"quantization is not available on CPU"),
            F.CONFIG_ERROR,
            "Quantization was asked for on a machine without a GPU.",
            r.fix_flags,
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
                r"error: invalid value|error: unexpected argument|Unsupported model type|is not supported for this model|ValueError: Unsupported"
            ),
            F.CONFIG_ERROR,
            "The flags or the model configuration are invalid.",
            r.fix_flags,
            P.CONFIG,
        ),
        # a shard's signal (9, 4, 7) is read by the general rule on summaries (core.causes)
        Signature(
            "wrapper",
            rx(
                r"Download encountered an error|Shard \d+ failed to start|Error: ShardCannotStart|Shard \d+ crashed|Error: ShardFailed|Webserver Crashed|Error: WebserverFailed|Error when initializing model|Method Warmup encountered an error|signaled to shutdown with signal"
            ),
            F.ENGINE_CORE_DIED,
            "A shard died; no more specific cause is in the log.",
            r.engine_died,
            is_wrapper=True,
        ),
    ),
    exclusions=(rx(r"destroy_process_group"),),
    frames=(
        FrameRule(frozenset({"warmup"}), P.MEMORY_PROFILING),
        FrameRule(
            frozenset({"get_model", "load_weights", "get_weights", "get_tensor"}), P.WEIGHTS_LOADING
        ),
    ),
    http=HttpSpec(
        default_port=3000,
        health_path="/health",
        refuses_until_ready=True,
        health_503_while_loading=False,
    ),
    heartbeats=(rx(r"Waiting for shard to be ready"),),
    stall_heartbeats=90,
    phase_after=MappingProxyType({P.WEIGHTS_LOADED: P.MEMORY_PROFILING}),
    restart=(rx(r"^Args \{"),),
    exit_summary="The TGI launcher exited before it was ready, without a cause in the log.",
    entry_points=ENTRY_POINTS,
    flags=FLAGS,
)
