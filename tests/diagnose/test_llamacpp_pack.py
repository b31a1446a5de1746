"""The llama.cpp pack's remedies and root causes: by where memory ran out, by server, never a source line."""

from __future__ import annotations

from pathlib import Path

import pytest

from bringup.core import packs, retry_policy
from bringup.core.analyzer import LogAnalyzer, diagnose_bytes
from bringup.core.diagnosis import Diagnosis
from bringup.core.vocab import Engine, FailureClass, Phase

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
REAL = LOGS / "llamacpp_real"
GPU_WORDS = ("-ngl", "n_gpu_layers", "GPU", "quant of the model", "cuda")


def _diagnose(path: Path) -> Diagnosis:
    return diagnose_bytes(path.read_bytes(), Engine.LLAMACPP)


def _flags(d: Diagnosis) -> list[tuple[str | None, str | None]]:
    assert d.failure is not None
    return [(r.flag, r.value) for r in d.failure.remedy]


@pytest.mark.parametrize("case", ["ctx_too_large", "ctx_compute_too_large", "ctx_bad_alloc"])
def test_host_ram_failures_on_cpu_get_host_remedies_with_llama_cpp_python_flags(case: str) -> None:
    """A real CPU context failure gets --n_ctx at the training context and --type_k 8, and no GPU advice."""
    d = _diagnose(REAL / f"{case}.log")
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.KV_CACHE_INSUFFICIENT
    assert _flags(d)[:2] == [("--n_ctx", "512"), ("--type_k", "8")]
    text = " ".join(r.text for r in d.failure.remedy)
    assert "host RAM" in text
    assert not [w for w in GPU_WORDS if w in text]


def test_context_remedy_states_the_cost_per_token_from_the_refused_allocation() -> None:
    """The refused allocation over n_ctx gives bytes per token and what the suggested context needs."""
    d = _diagnose(REAL / "ctx_too_large.log")
    assert d.failure is not None
    first = d.failure.remedy[0].text
    assert "24,414.06 MiB" in first
    assert "256 bytes per token" in first
    assert "0.12 MiB" in first
    assert d.facts["max_model_len"] == 100_000_000
    assert d.facts["n_ctx_train"] == 512
    assert d.facts["kv_device"] == "CPU"


def test_native_server_on_cpu_gets_native_flags_and_fewer_slots() -> None:
    """llama-server on CPU: -c scaled to the training context per slot, --cache-type-k q8_0, -np halved."""
    d = _diagnose(LOGS / "llamacpp_server_cpu_kv_host_ram.log")
    assert d.failure is not None
    assert d.failure.line_number == 18
    assert _flags(d)[:3] == [("-c", "131072"), ("--cache-type-k", "q8_0"), ("-np", "2")]
    assert not [w for w in GPU_WORDS if w in " ".join(r.text for r in d.failure.remedy)]


def test_native_server_vram_failure_gets_gpu_remedies() -> None:
    """llama-server out of VRAM for the KV cache: half the context, a quarter fewer layers, q8_0 K cache."""
    d = _diagnose(LOGS / "llamacpp_server_kv_vram_oom.log")
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.CUDA_OOM
    assert _flags(d)[:3] == [("-c", "65536"), ("-ngl", "61"), ("--cache-type-k", "q8_0")]
    assert "smaller quant" in d.failure.remedy[-1].text


def test_retry_applies_the_native_context_remedy() -> None:
    """The retry policy takes the pack's -c value for a native llama-server host-RAM failure."""
    d = _diagnose(LOGS / "llamacpp_server_cpu_kv_host_ram.log")
    assert d.failure is not None
    decision = retry_policy.decide(
        d.failure,
        ["llama-server", "-m", "m.gguf", "-c", "1048576", "-np", "4"],
        pack=packs.get(Engine.LLAMACPP),
    )
    assert decision.change is not None
    assert (decision.change.flag, decision.change.value) == ("-c", "131072")


def test_traceback_source_lines_are_never_the_root_cause() -> None:
    """`raise ValueError(...)` source lines are skipped; the ValueError line itself is the wrapper kept."""
    lines = [
        "llama_model_loader: loaded meta data with 20 key-value pairs and 21 tensors from m.gguf (version GGUF V3 (latest))",
        "Traceback (most recent call last):",
        '  File "/venv/lib/python3.11/site-packages/llama_cpp/_internals.py", line 266, in __init__',
        '    raise ValueError("Failed to create llama_context")',
        "ValueError: Failed to create llama_context",
    ]
    analyzer = LogAnalyzer(Engine.LLAMACPP)
    for line in lines:
        analyzer.feed(line)
    d = analyzer.finish(1)
    assert d.failure is not None
    assert (d.failure.failure_class, d.failure.line_number) == (FailureClass.ENGINE_CORE_DIED, 5)


@pytest.mark.parametrize(
    "line",
    [
        "gguf_init_from_reader: failed to read magic",
        "gguf_init_from_reader: invalid magic characters: 'GGXF', expected 'GGUF'",
        "gguf_init_from_reader: failed to read key-value pairs",
        "gguf_init_from_reader: this GGUF file is version 4 but this software only supports up to version 3",
        "gguf_init_from_file: failed to open GGUF file '/models/x.gguf'",
    ],
)
def test_gguf_reader_errors_are_the_root_cause_not_the_load_wrapper_after_them(line: str) -> None:
    """The GGUF reader's own line beats the `error loading model: ...failed to load model from` after it."""
    data = "\n".join(
        [
            line,
            "llama_model_load: error loading model: llama_model_loader: failed to load model from /models/x.gguf",
            "llama_model_load_from_file_impl: failed to load model",
        ]
    ).encode()
    d = diagnose_bytes(data)
    assert d.engine == "llamacpp"
    assert d.failure is not None
    assert (d.failure.failure_class, d.failure.line_number, d.failure.phase) == (
        FailureClass.MISSING_OR_CORRUPT_WEIGHTS,
        1,
        Phase.WEIGHTS_LOADING,
    )


def test_llama_cpp_python_readiness_is_models_then_smoke_and_native_keeps_health() -> None:
    """llama-cpp-python: /v1/models (its /health is 404), port refused until ready; native: /health, 503 while loading."""
    pack = packs.get(Engine.LLAMACPP)
    python = pack.http_variants["llama_cpp.server"]
    assert (python.health_path, python.refuses_until_ready, python.health_503_while_loading) == (
        "/v1/models",
        True,
        False,
    )
    assert (
        pack.http.health_path,
        pack.http.refuses_until_ready,
        pack.http.health_503_while_loading,
    ) == ("/health", False, True)


def test_uvicorn_startup_complete_is_not_ready_but_uvicorn_running_is() -> None:
    """'Application startup complete.' only reaches api_server_starting; 'Uvicorn running on' is ready."""
    text = (REAL / "ready_sigterm.log").read_text().splitlines()
    cut = text.index("INFO:     Application startup complete.") + 1
    assert _diagnose_lines(text[:cut]).phase is Phase.API_SERVER_STARTING
    assert _diagnose_lines(text[: cut + 1]).phase is Phase.READY


def _diagnose_lines(lines: list[str]) -> Diagnosis:
    return diagnose_bytes("\n".join(lines).encode(), Engine.LLAMACPP)
