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

from bringup.core.diagnosis import Remedy
from bringup.core.packs import llamacpp
from bringup.core.packs import remedies as r
from bringup.core.packs.types import (
    EntryPoint,
    FactRule,
    HttpSpec,
    Pack,
    PhaseMarker,
    ProgressRule,
    RemedyContext,
    Signature,
    rx,
    to_float,
    to_int,
)
from bringup.core.vocab import Engine, FailureClass, Phase

F = FailureClass
P = Phase


def ollama_gpu_layers(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """Ollama put more layers on the GPU than fit."""
    layers = r.number(ctx, "layers_offloaded")
    fewer = f" (it offloaded {int(layers)})" if layers else ""
    return (
        Remedy(
            f"Put fewer layers on the GPU{fewer}: set the model's num_gpu parameter lower "
            "(a Modelfile `PARAMETER num_gpu N`, or options.num_gpu in the request)."
        ),
        Remedy(
            "Or free the GPU (another process may hold its memory), use a smaller quant, or "
            "a smaller context (OLLAMA_CONTEXT_LENGTH).",
        ),
    )


def ollama_pull(_: RemedyContext) -> tuple[Remedy, ...]:
    """The model is not in Ollama's store."""
    return (Remedy("Pull the model first: `ollama pull <model>`."),)


def ollama_port(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """Ollama's port is taken, most often by an Ollama server already running."""
    port = ctx.groups.get("port") or "11434"
    host = ctx.groups.get("host") or "127.0.0.1"
    nxt = str(int(port) + 1) if port.isdigit() else "11435"
    return (
        Remedy(
            f"An Ollama server is probably running already (`systemctl status ollama`, "
            f"`ss -ltnp | grep :{port}`): use it, or stop it before starting another."
        ),
        Remedy(
            f"Or serve on another address: OLLAMA_HOST={host or '127.0.0.1'}:{nxt}.",
            env=f"OLLAMA_HOST={host or '127.0.0.1'}:{nxt}",
        ),
    )


_RUNNER_START = r"starting llama server|msg=\"?starting (?:go )?runner|^starting (?:go )?runner"

SIGNATURES = (
    # the server's own port: "Error: listen tcp 127.0.0.1:11434: bind: address already in use"
    Signature(
        "bind",
        rx(r"listen tcp (?P<host>[^\s:]*):(?P<port>\d+): bind: address already in use"),
        F.PORT_IN_USE,
        "Port {port} is already in use: another Ollama server (or another program) holds it.",
        ollama_port,
        P.START,
    ),
    Signature(
        "runner_oom",
        rx(r"unable to allocate (?P<device>CUDA\d*|ROCm\d*|Metal|Vulkan\d*) buffer"),
        F.CUDA_OOM,
        "The runner could not allocate its {device} buffer: the layers Ollama put on the GPU do not fit.",
        ollama_gpu_layers,
        P.WEIGHTS_LOADING,
    ),
    Signature(
        "model_missing",
        rx(r"pull model manifest: file does not exist|model \S+ not found, try pulling it first"),
        F.MISSING_OR_CORRUPT_WEIGHTS,
        "The model is not in Ollama's store; pull it first.",
        ollama_pull,
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
