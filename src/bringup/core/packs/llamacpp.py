"""llama.cpp: native ``llama-server`` and llama-cpp-python's server (its source as read for the
shared reference ``../shared/reference/engines.md`` section 4, not in this repository).

Checked against real llama-cpp-python 0.3.36 output (tests/fixtures/logs/llamacpp_real/).
The two servers print the same llama.cpp lines but differ around them: ``llama-server``
starts with ``build: N (hash)`` and its own ``main:``/``srv`` lines; llama-cpp-python prints
the llama.cpp lines, then a Python traceback on failure, or uvicorn's lines once loaded.
Flags differ too (``-c`` vs ``--n_ctx``), so memory remedies name the flag of the server
the log came from (``llama_server_build`` fact present: native).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from bringup.core.diagnosis import Remedy
from bringup.core.packs import remedies as r
from bringup.core.packs.types import (
    EngineFlags,
    EntryPoint,
    FactRule,
    HttpSpec,
    Pack,
    PhaseMarker,
    ProgressRule,
    RemedyContext,
    Signature,
    TokenizeSpec,
    mib_to_gib,
    rx,
    to_int,
)
from bringup.core.vocab import Engine, FailureClass, Phase
from bringup.units import MiB

F = FailureClass
P = Phase

# llama-cpp-python serves with uvicorn only after the model is loaded: the port refuses until
# then. It has no /health (404): readiness is GET /v1/models, then a smoke completion.
# uvicorn prints "Application startup complete." BEFORE it binds, so only "Uvicorn running on"
# is its ready line (a bind error can follow "Application startup complete.").
LLAMA_CPP_PYTHON_HTTP = HttpSpec(
    default_port=8000,
    health_path="/v1/models",
    refuses_until_ready=True,
    health_503_while_loading=False,
    tokenize=TokenizeSpec("/extras/tokenize/count", "llama-cpp-python"),
)

# Native llama-server: the port is open while loading, /health is 503 until the model is loaded.
LLAMA_SERVER_HTTP = HttpSpec(
    default_port=8080,
    health_path="/health",
    refuses_until_ready=False,
    health_503_while_loading=True,
    tokenize=TokenizeSpec("/tokenize", "llamacpp"),
)

ENTRY_POINTS = (
    EntryPoint(("--model", "-m"), program="llama-server"),
    EntryPoint(("--model", "-m"), module="llama_cpp.server"),
)

# Two servers, two spellings: llama-server (-c/--ctx-size, --cache-type-k, -ngl) and
# llama-cpp-python's python -m llama_cpp.server (--n_ctx, --type_k, --n_gpu_layers).
FLAGS = EngineFlags(
    retry_safe=frozenset({"-c", "--ctx-size", "--n_ctx"}),
    boolean=frozenset(
        {"--cont-batching", "--flash-attn", "--no-mmap", "--mlock", "--verbose", "--metrics"}
    ),
    others=frozenset(
        {
            "--model",
            "-m",
            "--host",
            "--port",
            "--n_ctx",
            "--type_k",
            "--type_v",
            "--n_gpu_layers",
            "-ngl",
            "--n-gpu-layers",
            "--cache-type-k",
            "--cache-type-v",
            "--parallel",
            "-np",
        }
    ),
)

_MIN_CTX = 512


@dataclass(frozen=True)
class _Flags:
    """One server's spelling of the memory flags."""

    ctx: str
    cache_k: str
    cache_k_q8: str
    ngl: str
    parallel: str | None  # llama-cpp-python serves one sequence: no slots flag


_NATIVE = _Flags("-c", "--cache-type-k", "q8_0", "-ngl", "-np")
_PYTHON = _Flags("--n_ctx", "--type_k", "8", "--n_gpu_layers", None)  # 8 = GGML_TYPE_Q8_0


def _flags(ctx: RemedyContext) -> _Flags:
    return _NATIVE if "llama_server_build" in ctx.facts else _PYTHON


def _smaller_context(ctx: RemedyContext, flags: _Flags, memory: str) -> Remedy:
    """A context that needs less: the model's training context when n_ctx is above it, else half."""
    n_ctx, train = r.number(ctx, "max_model_len"), r.number(ctx, "n_ctx_train")
    per_seq = r.number(ctx, "n_ctx_seq") or n_ctx  # n_ctx is split over the slots unless kv_unified
    if n_ctx and per_seq and train and per_seq > train >= _MIN_CTX // 2:
        seqs = max(1, round(n_ctx / per_seq))
        value = int(train) * seqs
        each = f" for each of {seqs} slots" if seqs > 1 else ""
        why = f"the model's training context {int(train)}{each}; n_ctx {int(n_ctx)} is above it"
    elif n_ctx:
        value, why = max(_MIN_CTX, int(n_ctx) // 2), f"half of n_ctx {int(n_ctx)}"
    else:
        value, why = 4096, "n_ctx is not in the log"
    cost = f" The context's buffers did not fit in {memory}."
    attempted = r.number(ctx, "attempted_mib")
    if attempted and n_ctx:
        per_token = attempted * MiB / n_ctx
        cost = (
            f" n_ctx {int(n_ctx)} asked for {attempted:,.2f} MiB of {memory} ({per_token:,.0f} "
            f"bytes per token); {value} needs about {value * per_token / MiB:,.2f} MiB."
        )
    other = "--n_ctx on llama-cpp-python" if flags is _NATIVE else "-c on llama-server"
    return Remedy(
        f"Use a smaller context: {flags.ctx} {value} ({why}).{cost} ({other})",
        flags.ctx,
        str(value),
    )


def _fewer_slots(ctx: RemedyContext, flags: _Flags) -> tuple[Remedy, ...]:
    slots = r.number(ctx, "max_num_seqs")
    if flags.parallel is None or not slots or slots <= 1:
        return ()
    value = str(max(1, int(slots) // 2))
    return (
        Remedy(
            f"Serve fewer parallel slots: {flags.parallel} {value} (from {int(slots)}).",
            flags.parallel,
            value,
        ),
    )


def _quantized_kv(flags: _Flags) -> Remedy:
    note = "" if flags.cache_k_q8 == "q8_0" else " (GGML type 8 is q8_0)"
    return Remedy(
        f"Quantize the KV cache to halve its K part: {flags.cache_k} {flags.cache_k_q8}{note}.",
        flags.cache_k,
        flags.cache_k_q8,
    )


def host_memory(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """Host RAM ran out (a CPU buffer, ggml_aligned_malloc, std::bad_alloc): no GPU advice."""
    flags = _flags(ctx)
    return (
        _smaller_context(ctx, flags, "host RAM"),
        _quantized_kv(flags),
        *_fewer_slots(ctx, flags),
        Remedy("Or give the machine (or container) more RAM; check `free -g`."),
    )


def gpu_memory(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """GPU memory ran out (a CUDA buffer, cudaMalloc): context, offload, quant."""
    flags = _flags(ctx)
    out = [_smaller_context(ctx, flags, "GPU memory")]
    layers = r.number(ctx, "layers_offloaded")
    if layers and layers > 1:
        value = str(int(layers) - max(1, int(layers) // 4))
        out.append(
            Remedy(
                f"Offload fewer layers: {flags.ngl} {value} (from {int(layers)}); the rest "
                "run from host RAM, slower.",
                flags.ngl,
                value,
            )
        )
    else:
        out.append(Remedy(f"Offload fewer layers (lower {flags.ngl}); the rest run from host RAM."))
    out.append(_quantized_kv(flags))
    out.append(Remedy("Or use a smaller quant of the model (e.g. Q4_K_M instead of Q8_0)."))
    return tuple(out)


def memory(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """A context allocation failed where the line does not say: the KV cache's device decides."""
    device = ctx.groups.get("device") or str(ctx.facts.get("kv_device", ""))
    on_host = device.startswith("CPU") if device else not ctx.facts.get("layers_offloaded")
    return host_memory(ctx) if on_host else gpu_memory(ctx)


def missing_path(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """The model path does not exist."""
    path = ctx.groups.get("path", "the model path")
    return (
        Remedy(f"Check the model path (--model; -m on llama-server): {path} does not exist."),
        *r.redownload(ctx),
    )


_KV = "The KV cache or compute buffer for this context size"
_NATIVE_MARK = r"^build: (?P<llama_server_build>\d+) \("

PACK = Pack(
    engine=Engine.LLAMACPP,
    detect=(
        "llama_model_loader",
        "llama_model_load",
        "llama_context",
        "llama_new_context",
        "main: loading model",
        "llama-server",
        "llama_cpp",
        "ggml_cuda_init",
        "system info: n_threads",
        "load_backend: loaded",
        "gguf_init_from_",
    ),
    version=(
        rx(r"^build: (?P<version>\d+ \(\w+\))"),
        rx(r"llama_cpp(?:_python)?[ =]+v?(?P<version>\d+\.\d+\.\d+)"),
    ),
    phases=(
        PhaseMarker(
            rx(r"^build: \d+|system info: n_threads|binding port with default address family"),
            P.CONFIG,
        ),
        PhaseMarker(rx(r"ggml_cuda_init: found \d+"), P.DISTRIBUTED_INIT),
        PhaseMarker(
            rx(
                r"main: loading model|load_model: loading model|llama_model_loader: loaded meta data"
            ),
            P.WEIGHTS_LOADING,
        ),
        PhaseMarker(rx(r"(?:llm_)?load_tensors: .*model buffer size"), P.WEIGHTS_LOADED),
        # any loader line, even an error, shows the weights were being loaded
        PhaseMarker(rx(r"^(?:llm_)?load_tensors: |^llama_model_load: "), P.WEIGHTS_LOADING),
        PhaseMarker(
            rx(
                r"(?:llama_kv_cache\w*|llama_new_context_with_model|llama_context): +\S+ KV buffer size|llama_context: constructing llama_context|llama_new_context_with_model: n_ctx"
            ),
            P.KV_CACHE_ALLOC,
        ),
        PhaseMarker(rx(r"warming up the model|initializing slots, n_slots"), P.WARMUP),
        # uvicorn (llama-cpp-python): printed before the bind, so not ready yet
        PhaseMarker(
            rx(r"^INFO:\s+Application startup complete|Application startup complete\."),
            P.API_SERVER_STARTING,
            requires=P.WEIGHTS_LOADING,
        ),
        PhaseMarker(
            rx(r"main: model loaded|server is listening on|Uvicorn running on"),
            P.READY,
            requires=P.WEIGHTS_LOADING,
        ),
        # printed only once the model is loaded and the server's loop runs (server.cpp's
        # load_model returned; update_slots with nothing to do), whatever was logged before
        PhaseMarker(rx(r"(?:^|: )model loaded$|all slots are idle"), P.READY),
    ),
    progress=(
        ProgressRule(
            rx(r"offloaded (?P<done>\d+)/(?P<total>\d+) layers to GPU"),
            P.WEIGHTS_LOADING,
            "layers",
            "layers_offloaded",
            "layers_total",
        ),
    ),
    facts=(
        FactRule(rx(_NATIVE_MARK), {"llama_server_build": to_int}),
        FactRule(
            rx(r"loading model '(?P<model>[^']+)'|loaded meta data with .* from (?P<model__2>\S+)")
        ),
        FactRule(
            rx(r"load_tensors: +CUDA0 model buffer size = +(?P<weights_gib_per_gpu>[\d.]+) MiB"),
            {"weights_gib_per_gpu": mib_to_gib},
        ),
        FactRule(
            rx(r"CUDA0 KV buffer size = +(?P<available_kv_gib>[\d.]+) MiB"),
            {"available_kv_gib": mib_to_gib},
        ),
        FactRule(rx(r"\bn_ctx\s+= (?P<max_model_len>\d+)"), {"max_model_len": to_int}),
        FactRule(
            rx(r"\bn_ctx_train\s+= (?P<n_ctx_train>\d+)|n_ctx_train \((?P<n_ctx_train__2>\d+)\)"),
            {"n_ctx_train": to_int},
        ),
        FactRule(rx(r"\bn_ctx_(?:seq|per_seq)\s+= (?P<n_ctx_seq>\d+)"), {"n_ctx_seq": to_int}),
        FactRule(
            rx(r"n_slots = (?P<max_num_seqs>\d+)|\bn_seq_max\s+= (?P<max_num_seqs__2>\d+)"),
            {"max_num_seqs": to_int},
        ),
        FactRule(rx(r"llama_kv_cache\w*: +layer +\d+: dev = (?P<kv_device>\S+)")),
    ),
    signatures=(
        Signature(
            "bind",
            rx(
                r"couldn't bind HTTP server socket, hostname: (?P<host>\S+), port: (?P<port>\d+)|\[Errno 98\] (?:error while attempting to bind on address \('?(?P<host__2>[^',]*)'?, (?P<port__2>\d+)\): )?[Aa]ddress already in use"
            ),
            F.PORT_IN_USE,
            "Port {port} is already in use.",
            r.port_in_use,
            P.API_SERVER_STARTING,
        ),
        # a CPU buffer refused while the weights load (no mmap): host RAM, not the context
        Signature(
            "weights_host_ram",
            rx(r"ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size"),
            F.HOST_OOM,
            "Host RAM (or the commit limit) ran out while loading the weights.",
            r.host_oom,
            P.WEIGHTS_LOADING,
            until=P.WEIGHTS_LOADED,
        ),
        # host RAM (CPU runs): the first refused allocation is the cause; the lines after wrap it
        Signature(
            "host_malloc",
            rx(
                r"ggml_aligned_malloc: insufficient memory \(attempted to allocate (?P<attempted_mib>[\d.]+) MB\)"
            ),
            F.KV_CACHE_INSUFFICIENT,
            "Host RAM refused {attempted_mib} MiB for context n_ctx {max_model_len}: "
            + _KV[0].lower()
            + _KV[1:]
            + " does not fit.",
            host_memory,
            priority=2,
        ),
        Signature(
            "host_bad_alloc",
            rx(r"failed to initialize the context: std::bad_alloc"),
            F.KV_CACHE_INSUFFICIENT,
            "Host memory ran out (std::bad_alloc) setting up the context for n_ctx {max_model_len}.",
            host_memory,
            priority=2,
        ),
        Signature(
            "cpu_buffer",
            rx(r"failed to allocate (?P<device>CPU) buffer of size (?P<bytes>\d+)"),
            F.KV_CACHE_INSUFFICIENT,
            "Host RAM refused a {bytes}-byte CPU buffer for context n_ctx {max_model_len}.",
            host_memory,
            priority=2,
        ),
        Signature(
            "kv_oom",
            rx(
                r"failed to allocate buffer for kv cache|failed to initialize the context: failed to allocate"
            ),
            F.CUDA_OOM,
            f"{_KV} does not fit in GPU memory.",
            memory,
            P.KV_CACHE_ALLOC,
            priority=2,
            refines=("vram", "accelerator_oom"),  # the cudaMalloc that failed for the cache
        ),
        Signature(
            "vram",
            rx(
                r"(?:allocating (?P<attempted_mib>[\d.]+) MiB on device \d+: )?cudaMalloc failed: out of memory|failed to allocate (?P<device>CUDA\d*) buffer|CUDA error: out of memory|ErrorOutOfDeviceMemory"
            ),
            F.CUDA_OOM,
            "GPU memory ran out while allocating model or context buffers.",
            gpu_memory,
        ),
        Signature(
            "arch",
            rx(r"unknown model architecture: '(?P<arch>[^']+)'"),
            F.CONFIG_ERROR,
            "This llama.cpp build does not know the model architecture '{arch}'; upgrade llama.cpp.",
            r.fix_flags,
            P.WEIGHTS_LOADING,
            priority=2,
        ),
        Signature(
            "hardware",
            rx(
                r"no kernel image is available|the provided PTX was compiled with an unsupported toolchain|unsupported GPU architecture"
            ),
            F.UNSUPPORTED_HARDWARE,
            "This build has no kernels for this GPU.",
            r.wrong_build,
        ),
        # llama-cpp-python checks the path in Python: only "ValueError: ..." (never the `raise` source line)
        Signature(
            "model_path",
            rx(r"^ValueError: Model path does not exist: (?P<path>.+)"),
            F.MISSING_OR_CORRUPT_WEIGHTS,
            "The model file {path} does not exist.",
            missing_path,
            P.WEIGHTS_LOADING,
        ),
        # the GGUF reader names what is wrong with the file; "error loading model: ..." follows it
        Signature(
            "gguf",
            rx(
                r"gguf_init_from_\w+: (?P<reason>(?:failed|invalid|duplicate|unsupported|this GGUF file|tensor ).*)"
            ),
            F.MISSING_OR_CORRUPT_WEIGHTS,
            "The GGUF file is truncated, damaged or not GGUF: {reason}.",
            r.redownload,
            P.WEIGHTS_LOADING,
        ),
        Signature(
            "weights",
            rx(
                r"failed to open (?P<path>\S+?): No such file|invalid magic characters|GGUF file version \d+ is (?:too high|extremely large)|tensor '[^']+' data is not within the file bounds"
            ),
            F.MISSING_OR_CORRUPT_WEIGHTS,
            "The GGUF file is missing, truncated or not GGUF.",
            r.redownload,
            P.WEIGHTS_LOADING,
        ),
        # what the loader threw follows the colon: the message tables read it (packs.messages);
        # a reason they do not know is the file's
        Signature(
            "load_failed",
            rx(r"error loading model: (?P<reason>.*)"),
            F.MISSING_OR_CORRUPT_WEIGHTS,
            "The GGUF file is missing, truncated or not GGUF.",
            r.redownload,
            P.WEIGHTS_LOADING,
            fallback=True,
        ),
        Signature(
            "config",
            rx(
                r"error: invalid argument|error: unknown argument|invalid value for|error: unrecognized arguments"
            ),
            F.CONFIG_ERROR,
            "A flag is invalid.",
            r.fix_flags,
            P.CONFIG,
        ),
        Signature(
            "wrapper",
            rx(
                r"exiting due to model loading error|failed to load model|failed to create_context|^ValueError: Failed to load model from file|exiting due to HTTP server error|^ValueError: Failed to create llama_context"
            ),
            F.ENGINE_CORE_DIED,
            "The server could not load the model; no more specific cause is in the log.",
            r.engine_died,
            is_wrapper=True,
        ),
    ),
    # a chat template the server cannot use is replaced (chatml) and printed at start; the
    # argument parser's "the supplied chat template is not supported" is fatal (its message table)
    exclusions=(rx(r"chat template.*falling back|falling back to chatml|init: chat template"),),
    frames=(),
    http=LLAMA_SERVER_HTTP,
    http_variants=MappingProxyType(
        {"llama_cpp.server": LLAMA_CPP_PYTHON_HTTP}
    ),  # keyed by what the command line says
    restart=(rx(r"^build: \d+"),),
    exit_summary="llama.cpp exited before the model was loaded without printing why (some builds stay silent at default verbosity: rerun with -v).",
    entry_points=ENTRY_POINTS,
    flags=FLAGS,
)
