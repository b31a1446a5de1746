"""Ollama (``ollama serve``): its Go server's log, with llama.cpp's runner inside it.

Ollama's server logs logfmt records (``time=... level=INFO source=routes.go:1384
msg="Listening on 127.0.0.1:11434 (version 0.11.10)"``; 0.1-0.3 also print Go's
``2025/11/25 20:40:55 routes.go:1225: INFO ...`` form and GIN's request lines). The server is
up when it prints ``Listening on``; a model is loaded lazily, on the first request that names
it: the server starts a runner (``starting llama server`` / ``starting runner``), the runner
prints llama.cpp's own lines (``llama_model_loader``, ``load_tensors``, ``llama_context``, or
JSON records in 0.1.x), and the server says ``llama runner started in N seconds``. Each
runner start is a new attempt in the same log: the last one decides the verdict, and a
runner that dies is a failure of that load, not of the server.

Written from Ollama's log formats as real logs show them; Ollama itself cannot be installed
on the machines bringup is tested on, so the tests use logs written in these formats.
"""

from __future__ import annotations

from types import MappingProxyType

from bringup.core.packs import llamacpp
from bringup.core.packs import remedies as r
from bringup.core.packs.types import (
    EntryPoint,
    FactRule,
    HttpSpec,
    Pack,
    PhaseMarker,
    ProgressRule,
    Signature,
    rx,
    to_float,
    to_int,
)
from bringup.core.vocab import Engine, FailureClass, Phase

F = FailureClass
P = Phase

_RUNNER_START = r"starting llama server|msg=\"?starting (?:go )?runner|^starting (?:go )?runner"

SIGNATURES = (
    # the server's own port: "Error: listen tcp 127.0.0.1:11434: bind: address already in use"
    Signature(
        "bind",
        rx(r"listen tcp (?P<host>[^\s:]*):(?P<port>\d+): bind: address already in use"),
        F.PORT_IN_USE,
        "Port {port} is already in use: another Ollama server (or another program) holds it.",
        r.ollama_port,
        P.START,
    ),
    Signature(
        "runner_oom",
        rx(r"unable to allocate (?P<device>CUDA\d*|ROCm\d*|Metal|Vulkan\d*) buffer"),
        F.CUDA_OOM,
        "The runner could not allocate its {device} buffer: the layers Ollama put on the GPU do not fit.",
        r.ollama_gpu_layers,
        P.WEIGHTS_LOADING,
    ),
    Signature(
        "model_missing",
        rx(r"pull model manifest: file does not exist|model \S+ not found, try pulling it first"),
        F.MISSING_OR_CORRUPT_WEIGHTS,
        "The model is not in Ollama's store; pull it first.",
        r.ollama_pull,
        P.CONFIG,
    ),
    # consequences: the runner died; the line above it says why, when one does
    Signature(
        "runner_died",
        rx(
            r"llama runner process has terminated|llama runner terminated|error loading llama server|panic: unable to load model"
        ),
        F.ENGINE_CORE_DIED,
        "The model runner died while loading; no more specific cause is in the log.",
        r.engine_died,
        P.WEIGHTS_LOADING,  # a runner only starts to load a model
        is_wrapper=True,
    ),
)

PACK = Pack(
    engine=Engine.OLLAMA,
    detect=(
        "ollama",
        "Ollama",
        "OLLAMA_",
        "source=routes.go",
        "source=sched.go",
        "source=server.go",
        "source=images.go",
        "[GIN]",
    ),
    # Go's log/slog text handler with source locations, as the server configures it
    detect_lines=(rx(r"\blevel=(?:DEBUG|INFO|WARN|ERROR) source=[\w./-]+\.go:\d+ "),),
    version=(rx(r"Listening on \S+ \(version (?P<version>[^)\s]+)\)"),),
    phases=(
        PhaseMarker(rx(r"^server config|msg=\"?server config"), P.START),
        PhaseMarker(rx(_RUNNER_START), P.WEIGHTS_LOADING),
        PhaseMarker(rx(r"waiting for llama runner to start responding"), P.WEIGHTS_LOADING),
        PhaseMarker(rx(r"(?:llm_)?load_tensors: .*(?:model )?buffer size"), P.WEIGHTS_LOADED),
        PhaseMarker(
            rx(
                r"^(?:llm_)?load_tensors: |^llama_model_load: |ggml_backend_cuda_buffer_type_alloc_buffer"
            ),
            P.WEIGHTS_LOADING,
        ),
        PhaseMarker(
            rx(
                r"llama_kv_cache\w*: +\S+ KV buffer size|llama_new_context_with_model: n_ctx|^kv cache"
            ),
            P.KV_CACHE_ALLOC,
        ),
        # the server is up; a model loads later, at the first request that needs it
        PhaseMarker(rx(r"^Listening on \S+"), P.READY),
        PhaseMarker(rx(r"llama runner started in [\d.]+ seconds|^model loaded$"), P.READY),
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
        FactRule(rx(r"^Listening on (?:\S*):(?P<port>\d+) "), {"port": to_int}),
        FactRule(
            rx(r"llama runner started in (?P<load_seconds>[\d.]+) seconds"),
            {"load_seconds": to_float},
        ),
        FactRule(rx(r"layers\.offload=(?P<layers_offloaded>\d+)"), {"layers_offloaded": to_int}),
        *llamacpp.PACK.facts,
    ),
    signatures=SIGNATURES + tuple(s for s in llamacpp.PACK.signatures if s.name != "bind"),
    exclusions=(
        # transient scheduler states while a runner starts, and Windows' console note
        rx(
            r"waiting for server to become available|llm server not responding|llm server loading model"
        ),
        rx(r"failed to get console mode"),
        *llamacpp.PACK.exclusions,
    ),
    frames=(),
    # `ollama serve` names no model: one is loaded by the first request that asks for it
    entry_points=(EntryPoint((), program="ollama", subcommand="serve"),),
    http=HttpSpec(
        default_port=11434,
        health_path="/api/version",
        refuses_until_ready=True,
        health_503_while_loading=False,
        model_on_request=True,
        host_variable="OLLAMA_HOST",
        missing_model="Pull it first (`ollama pull {model}`), or name one `ollama list` shows.",
    ),
    restart=(rx(_RUNNER_START),),
    exit_summary="Ollama exited without printing why.",
    hang_classes=MappingProxyType({}),
)
