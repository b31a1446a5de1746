"""The streaming analyzer: events as lines arrive, wrappers settled at exit, the verdict so far."""

from __future__ import annotations

from pathlib import Path

from bringup.core import packs
from bringup.core.analyzer import LogAnalyzer, diagnose_bytes
from bringup.core.diagnosis import EngineEvent, FailureEvent, PhaseEvent, ProgressEvent
from bringup.core.vocab import Engine, FailureClass, Outcome, Phase

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
H = "(EngineCore pid=5) INFO 11-30 09:47:00 [core.py:1] "
E = "(EngineCore pid=5) ERROR 11-30 09:47:00 [core.py:948] "


def test_minimax_failure_event_arrives_at_the_cause_line_while_server_alive() -> None:
    """The sampler-warmup FailureEvent is emitted at its own line, before the log (and server) ends."""
    lines = (LOGS / "vllm_0.33_minimax_sampler_oom.log").read_text().split("\n")
    analyzer = LogAnalyzer()
    seen: list[tuple[int, FailureEvent]] = []
    for number, line in enumerate(lines, start=1):
        seen += [(number, e) for e in analyzer.feed(line) if isinstance(e, FailureEvent)]
    final = [
        (n, e) for n, e in seen if e.failure.is_final and "warming up sampler" in e.failure.line
    ]
    assert final
    assert final[0][0] == 85
    assert analyzer.diagnosis().failure is not None
    assert analyzer.diagnosis().failure.line_number == 85


def test_events_for_engine_phase_progress_and_facts() -> None:
    """Engine, phase, progress and fact events come out of the right lines."""
    analyzer = LogAnalyzer()
    events = analyzer.feed(
        "(APIServer pid=1) INFO 11-30 09:47:00 [startup.py:71] vLLM server version 0.33.0, serving model m"
    )
    assert EngineEvent("vllm", "0.33.0") in events
    assert any(isinstance(e, PhaseEvent) and e.entry.phase is Phase.START for e in events)
    events = analyzer.feed(
        "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:02<00:02,  1.0it/s]"
    )
    assert ProgressEvent(Phase.WEIGHTS_LOADING, 2, 4, "shards", 2) in events
    analyzer.feed(H + "Model loading took 57.50 GiB memory and 212.64 seconds")
    assert analyzer.diagnosis().facts["weights_gib_per_gpu"] == 57.5
    assert analyzer.diagnosis().outcome is Outcome.INCOMPLETE


def test_wrapper_is_replaced_by_a_later_cause() -> None:
    """A wrapper is provisional (is_final False) and a later specific line replaces it."""
    analyzer = LogAnalyzer(Engine.VLLM)
    analyzer.feed(E + "EngineCore failed to start.")
    first = analyzer.diagnosis().failure
    assert first is not None
    assert not first.is_final
    analyzer.feed(
        E
        + "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`."
    )
    d = analyzer.finish(1)
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.KV_CACHE_INSUFFICIENT
    assert d.failure.line_number == 2
    assert d.failure.is_final


def test_finish_settles_wrapper_only_evidence() -> None:
    """Wrapper only: exit -9 gives host_oom, any other exit engine_core_died, final either way."""
    for code, cls in (
        (-9, FailureClass.HOST_OOM),
        (1, FailureClass.ENGINE_CORE_DIED),
        (0, FailureClass.ENGINE_CORE_DIED),
    ):
        analyzer = LogAnalyzer(Engine.VLLM)
        analyzer.feed(H + "Starting to load model x...")
        analyzer.feed(
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"
        )
        d = analyzer.finish(code)
        assert d.outcome is Outcome.FAILED
        assert d.failure is not None
        assert (d.failure.failure_class, d.failure.is_final) == (cls, True)


def test_exit_without_any_cause_line() -> None:
    """A process that exits before ready with no cause in the log fails with no root-cause line
    (its last line is where it stopped, not why); exit 0 after ready is fine."""
    analyzer = LogAnalyzer(Engine.LLAMACPP)
    analyzer.feed("main: loading model")
    analyzer.feed(
        "llama_model_loader: loaded meta data with 3 key-value pairs and 9 tensors from /m.gguf"
    )
    d = analyzer.finish(1)
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.ENGINE_CORE_DIED
    assert (d.failure.line_number, d.failure.line) == (0, "")
    assert "line 2" in d.failure.summary
    ok = diagnose_bytes((LOGS / "vllm_0.33_ok_tp1.log").read_bytes())
    assert ok.outcome is Outcome.READY
    analyzer = LogAnalyzer()
    for line in (LOGS / "vllm_0.33_ok_tp1.log").read_text().splitlines():
        analyzer.feed(line)
    assert analyzer.finish(0).outcome is Outcome.READY


def test_not_causes_are_not_taken() -> None:
    """NCCL destroy warnings, shm broadcast waits and chat-template errors never become causes."""
    analyzer = LogAnalyzer(Engine.VLLM)
    analyzer.feed(
        "[rank0]:[W1130 ProcessGroupNCCL.cpp:1538] Warning: WARNING: destroy_process_group() was not called. NCCL error"
    )
    analyzer.feed(E + "No available shared memory broadcast block found in 60 second.")
    assert analyzer.diagnosis().failure is None
    llama = LogAnalyzer(Engine.LLAMACPP)
    llama.feed(
        "common_chat_templates_init: failed to parse chat template (defaulting to chatml): Expected value"
    )
    assert llama.diagnosis().failure is None


def test_uvicorn_startup_before_bind_error_is_not_ready() -> None:
    """uvicorn's 'Application startup complete' before a bind error is neither ready nor the cause."""
    d = diagnose_bytes((LOGS / "llamacpp_python_bind_after_startup.log").read_bytes())
    assert d.phase is Phase.API_SERVER_STARTING
    assert d.failure is not None
    assert "Errno 98" in d.failure.line


def test_packs_are_complete_and_http_specs_match_engines() -> None:
    """Every engine has a pack; HTTP readiness specs carry each launcher's default port and health path."""
    got = {
        p.engine: (
            p.http.default_port,
            p.http.health_path,
            p.http.refuses_until_ready,
            p.http.health_503_while_loading,
        )
        for p in packs.all_packs()
    }
    assert got == {
        Engine.VLLM: (8000, "/health", True, False),
        Engine.SGLANG: (30000, "/health_generate", False, True),
        Engine.TGI: (3000, "/health", True, False),
        Engine.LLAMACPP: (8080, "/health", False, True),
        Engine.OLLAMA: (11434, "/api/version", True, False),
    }
    assert packs.get(Engine.LLAMACPP).http_variants["llama_cpp.server"].default_port == 8000
