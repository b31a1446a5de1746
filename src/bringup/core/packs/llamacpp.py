"""llama.cpp: native ``llama-server`` and llama-cpp-python's server (engines.md section 4)."""

from __future__ import annotations

from types import MappingProxyType

from bringup.core.packs import remedies as r
from bringup.core.packs.types import (
    FactRule,
    HttpSpec,
    Pack,
    PhaseMarker,
    ProgressRule,
    Signature,
    mib_to_gib,
    rx,
    to_int,
)
from bringup.core.vocab import Engine, FailureClass, Phase

F = FailureClass
P = Phase

# llama-cpp-python serves with uvicorn only after the model is loaded: the port refuses until
# then, and it has no /health (the supervisor asks /v1/models, then a completion).
LLAMA_CPP_PYTHON_HTTP = HttpSpec(default_port=8000, health_path="/v1/models", refuses_until_ready=True, health_503_while_loading=False)

PACK = Pack(
    engine=Engine.LLAMACPP,
    detect=("llama_model_loader", "llama_model_load", "llama_context", "llama_new_context", "main: loading model",
            "llama-server", "llama_cpp", "ggml_cuda_init", "system info: n_threads", "load_backend: loaded"),
    version=(rx(r"^build: (?P<version>\d+ \(\w+\))"), rx(r"llama_cpp(?:_python)?[ =]+v?(?P<version>\d+\.\d+\.\d+)")),
    phases=(
        PhaseMarker(rx(r"^build: \d+|system info: n_threads|binding port with default address family"), P.CONFIG),
        PhaseMarker(rx(r"ggml_cuda_init: found \d+"), P.DISTRIBUTED_INIT),
        PhaseMarker(rx(r"main: loading model|load_model: loading model|llama_model_loader: loaded meta data"), P.WEIGHTS_LOADING),
        PhaseMarker(rx(r"(?:llm_)?load_tensors: .*model buffer size"), P.WEIGHTS_LOADED),
        PhaseMarker(rx(r"(?:llama_kv_cache\w*|llama_new_context_with_model|llama_context): +\S+ KV buffer size|llama_context: constructing llama_context|llama_new_context_with_model: n_ctx"), P.KV_CACHE_ALLOC),
        PhaseMarker(rx(r"warming up the model|initializing slots, n_slots"), P.WARMUP),
        PhaseMarker(rx(r"^INFO:\s+Application startup complete|Application startup complete\."), P.API_SERVER_STARTING, requires=P.WEIGHTS_LOADING),
        PhaseMarker(rx(r"main: model loaded|server is listening on|Uvicorn running on"), P.READY, requires=P.WEIGHTS_LOADING),
    ),
    progress=(
        ProgressRule(rx(r"offloaded (?P<done>\d+)/(?P<total>\d+) layers to GPU"), P.WEIGHTS_LOADING, "layers", "layers_offloaded", "layers_total"),
    ),
    facts=(
        FactRule(rx(r"loading model '(?P<model>[^']+)'|loaded meta data with .* from (?P<model__2>\S+)")),
        FactRule(rx(r"load_tensors: +CUDA0 model buffer size = +(?P<weights_gib_per_gpu>[\d.]+) MiB"), {"weights_gib_per_gpu": mib_to_gib}),
        FactRule(rx(r"CUDA0 KV buffer size = +(?P<available_kv_gib>[\d.]+) MiB"), {"available_kv_gib": mib_to_gib}),
        FactRule(rx(r"\bn_ctx\s+= (?P<max_model_len>\d+)"), {"max_model_len": to_int}),
        FactRule(rx(r"n_slots = (?P<max_num_seqs>\d+)"), {"max_num_seqs": to_int}),
    ),
    signatures=(
        Signature("bind", rx(r"couldn't bind HTTP server socket, hostname: (?P<host>\S+), port: (?P<port>\d+)|\[Errno 98\] (?:error while attempting to bind on address \('?(?P<host__2>[^',]*)'?, (?P<port__2>\d+)\): )?[Aa]ddress already in use"),
                  F.PORT_IN_USE, "Port {port} is already in use.", r.port_in_use, P.API_SERVER_STARTING),
        Signature("kv_oom", rx(r"failed to allocate buffer for kv cache|failed to initialize the context: failed to allocate"), F.CUDA_OOM,
                  "The KV cache for this context size does not fit in GPU memory.", r.llama_ctx, P.KV_CACHE_ALLOC, priority=2),
        Signature("vram", rx(r"cudaMalloc failed: out of memory|failed to allocate CUDA\d* buffer|CUDA error: out of memory|ErrorOutOfDeviceMemory"), F.CUDA_OOM,
                  "GPU memory ran out while allocating model or context buffers.", r.llama_ctx),
        Signature("arch", rx(r"unknown model architecture: '(?P<arch>[^']+)'"), F.CONFIG_ERROR,
                  "This llama.cpp build does not know the model architecture '{arch}'; upgrade llama.cpp.", r.fix_flags, P.WEIGHTS_LOADING, priority=2),
        Signature("hardware", rx(r"no kernel image is available|the provided PTX was compiled with an unsupported toolchain|unsupported GPU architecture"), F.UNSUPPORTED_HARDWARE,
                  "This build has no kernels for this GPU.", r.wrong_build),
        Signature("weights", rx(r"error loading model: (?P<reason>.*)|failed to open (?P<path>\S+?): No such file|invalid magic characters|GGUF file version \d+ is (?:too high|extremely large)|tensor '[^']+' data is not within the file bounds|Model path does not exist"),
                  F.MISSING_OR_CORRUPT_WEIGHTS, "The GGUF file is missing, truncated or not GGUF.", r.redownload, P.WEIGHTS_LOADING),
        Signature("config", rx(r"error: invalid argument|error: unknown argument|invalid value for|error: unrecognized arguments"), F.CONFIG_ERROR,
                  "A flag is invalid.", r.fix_flags, P.CONFIG),
        Signature("wrapper", rx(r"exiting due to model loading error|failed to load model|failed to create_context|Failed to load model from file|exiting due to HTTP server error|Failed to create llama_context"),
                  F.ENGINE_CORE_DIED, "The server could not load the model; no more specific cause is in the log.", r.engine_died, is_wrapper=True),
    ),
    exclusions=(rx(r"chat template|chat_template"),),
    frames=(),
    http=HttpSpec(default_port=8080, health_path="/health", refuses_until_ready=False, health_503_while_loading=True),
    http_variants=MappingProxyType({"llama-cpp-python": LLAMA_CPP_PYTHON_HTTP}),
    restart=(rx(r"^build: \d+"),),
    exit_summary="llama.cpp exited before the model was loaded without printing why (some builds stay silent at default verbosity: rerun with -v).",
)
