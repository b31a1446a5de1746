"""The follower loop in-process: a scripted source, a fake server, fake GPUs and a fake clock.

Each test runs in milliseconds whatever the fake seconds; the real-process tests in
tests/run are the end-to-end layer of the same loop.
"""

from __future__ import annotations

import itertools
import signal
import threading
from typing import Any

import pytest

from bringup.core.live import StartupResult
from bringup.core.vocab import Engine
from bringup.follow.loop import run_startup
from bringup.follow.types import StartupConfig
from follower.fakes import (
    FakeClock,
    FakeGpus,
    FakeNotify,
    FakeServer,
    RecordingObserver,
    ScriptedSource,
    exit_at,
    lines,
)

P = "(APIServer pid=6) INFO 11-30 09:47:00 [api_server.py:1] "
E = "(EngineCore pid=7) INFO 11-30 09:47:01 [core.py:139] "
EE = "(EngineCore pid=7) ERROR 11-30 09:47:02 [core.py:700] "
BANNER = P + "vLLM server version 0.33.0, serving model fake/model"
INIT = E + "Initializing a V1 LLM engine (v0.33.0) with config: model='fake/model'"
NCCL = E + "vLLM is using nccl==2.21.5"
LOAD = E + "Starting to load model fake/model..."
LOADED = E + "Model loading took 1.50 GiB memory and 0.100000 seconds"
KV = (
    E
    + "GPU KV cache size: 123,456 tokens, Maximum concurrency for 4,096 tokens per request: 30.14x"
)
OOM = (
    EE + "torch.OutOfMemoryError: CUDA out of memory occurred when warming up sampler with 1024 "
    "dummy requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when "
    "initializing the engine."
)
DIED = (
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"
)
COMMAND = ["vllm", "serve", "fake/model", "--port", "8123"]


def shard(i: int, n: int) -> str:
    return f"Loading safetensors checkpoint shards: {int(100 * i / n):3d}% Completed | {i}/{n} [00:01<00:00,  1.00it/s]"


def startup(t0: float = 0.0, step: float = 0.5, shards: int = 3) -> list[tuple[float, Any]]:
    """The fake vLLM's lines up to a loaded model with its KV cache."""
    texts = [BANNER, INIT, NCCL, LOAD, *(shard(i, shards) for i in range(1, shards + 1))]
    timed = [(t0 + step * i, text) for i, text in enumerate(texts)]
    end = t0 + step * len(texts)
    return lines(*timed, (end, LOADED), (end, KV))


class World:
    """One followed startup with fakes; ``run`` returns the result."""

    def __init__(
        self,
        script: list[tuple[float, Any]],
        *,
        ready_at: float | None = None,
        down_at: float | None = None,
        command: list[str] | None = COMMAND,
        gpus_error: str | None = None,
        notify: FakeNotify | None = None,
        **config: Any,
    ) -> None:
        self.clock = FakeClock()
        self.source = ScriptedSource(self.clock, script, command=command)
        self.server = FakeServer(self.clock, ready_at=ready_at, down_at=down_at)
        self.gpus = FakeGpus(self.clock, error=gpus_error)
        self.notify = notify
        self.observer = RecordingObserver()
        self.config = StartupConfig(**config)

    def run(self, *, follow: bool = False, stop: Any = None) -> StartupResult:
        return run_startup(
            self.config,
            source=self.source,
            prober=self.server.prober,
            gpus=self.gpus,
            clock=self.clock,
            notify=self.notify,
            observer=self.observer,
            follow=follow,
            threads=False,
            stop=stop,
        )


def test_ready_only_after_the_smoke_answer():
    """Health, models, then the smoke request: ready, exit 0, the probes in that order."""
    w = World(startup(), ready_at=6.0)
    result = w.run()
    assert (result.outcome.value, result.exit_code) == ("ready", 0)
    assert result.url == "http://127.0.0.1:8123"
    assert result.model == "fake/model"
    assert 6.0 <= (result.time_to_ready_seconds or 0) < 7.0
    kinds = [k.value for _, k, t in w.server.probes if t >= 6.0]
    assert kinds == ["health", "models", "smoke"]
    assert w.observer.names().count("ready") == 1
    assert result.summary["timeline"][-1]["phase"] == "ready"
    assert "weights_loading" in [t["phase"] for t in result.summary["timeline"]]
    assert w.observer.closed == [result]
    assert w.server.urls == ["http://127.0.0.1:8123"]


def test_refused_probes_go_at_their_interval_and_the_ready_line_sends_one_at_once():
    """The loop waits for its inbox no longer than the next probe is due: refused health
    probes go every 0.25 s exactly (not at the next 0.1 s tick after), and the engine's own
    "Application startup complete." line sends the health probe at once."""
    listening = "INFO:     Application startup complete."
    w = World(
        [
            *startup(),
            *lines((6.0, E + "Starting vLLM API server on http://0.0.0.0:8123"), (6.33, listening)),
        ],
        ready_at=6.3,
        probe_interval_seconds=0.25,
    )
    result = w.run()
    assert result.outcome.value == "ready"
    health = [t for _, k, t in w.server.probes if k.value == "health"]
    gaps = {round(b - a, 6) for a, b in itertools.pairwise(health[:-1])}
    assert gaps == {0.25}
    assert health[-1] == pytest.approx(6.33)  # at the line, not at the next interval
    assert result.time_to_ready_seconds == pytest.approx(6.33)


def test_root_cause_fails_while_the_server_still_lives():
    """The root-cause line is the verdict; the source (not a server bringup owns) is let go."""
    w = World([*startup(), *lines((4.0, OOM))], stall_seconds=300.0)
    result = w.run()
    assert (result.outcome.value, result.exit_code) == ("failed", 1)
    assert result.failure is not None
    assert result.failure.failure_class.value == "cuda_oom"
    assert "CUDA out of memory" in result.summary["failure"]["line"]
    assert result.summary["failure"]["remedy"]
    assert w.source.stopped == 0.0
    assert w.clock.elapsed() < 5.0


def test_exit_zero_after_the_engine_died_is_a_failure():
    """A server that exits 0 after its engine died fails (engine_core_died)."""
    w = World([*startup(), *lines((4.0, DIED)), exit_at(4.1, 0)])
    result = w.run()
    assert (result.outcome.value, result.exit_code) == ("failed", 1)
    assert result.server_exit_code == 0
    assert result.failure is not None
    assert result.failure.failure_class.value == "engine_core_died"


def test_stall_after_300_fake_seconds_is_timeouts_in_the_last_phase():
    """Nothing new for --stall: stalled, class timeouts, the phase reached, exit 4."""
    script = lines((0.0, BANNER), (0.5, INIT), (1.0, NCCL))
    w = World(script, stall_seconds=300.0)
    result = w.run()
    assert (result.outcome.value, result.exit_code) == ("stalled", 4)
    assert result.summary["failure"]["class"] == "timeouts"
    assert result.summary["phase"] == "distributed_init"
    assert 300.0 <= w.clock.elapsed() < 302.0


def test_a_slow_load_that_keeps_progressing_is_never_cut_off():
    """Shards 200 s apart with a 300 s stall: ready after 1000 fake seconds."""
    w = World(startup(step=200.0, shards=5), ready_at=2000.0, stall_seconds=300.0)
    result = w.run()
    assert result.outcome.value == "ready"
    assert len([e for e in w.observer.events if e.event == "progress"]) == 5


def test_the_deadline_bounds_even_a_progressing_startup():
    """--deadline ends a startup that keeps progressing but never answers: stalled, exit 4."""
    script = startup(step=50.0, shards=30)
    w = World(script, stall_seconds=None, deadline_seconds=600.0)
    result = w.run()
    assert result.exit_code == 4
    failures = [e for e in w.observer.events if e.event == "failure"]
    assert "deadline" in failures[0].fields["summary"]
    assert 600.0 <= w.clock.elapsed() < 602.0


def test_death_after_ready_is_a_failure_when_following_on():
    """Ready, supervised on; the server then exits: failed, exit 1, the ready time kept."""
    script = [*startup(), exit_at(50.0, 0)]
    w = World(script, ready_at=4.0)
    result = w.run(follow=True)
    assert (result.outcome.value, result.exit_code) == ("failed", 1)
    assert "ready" in w.observer.names()
    assert result.time_to_ready_seconds is not None


def test_liveness_failures_after_ready_fail_the_server():
    """After ready the health probe goes on; three failures in a row are a dead server."""
    w = World(startup(), ready_at=4.0, down_at=30.0)
    result = w.run(follow=True)
    assert (result.outcome.value, result.exit_code) == ("failed", 1)
    assert 30.0 < w.clock.elapsed() < 60.0


def test_sigterm_after_ready_stops_cleanly():
    """A SIGTERM while supervising after ready: stopped on request, exit 0, interrupted."""
    w = World([*startup(), (40.0, lambda: signal.raise_signal(signal.SIGTERM))], ready_at=4.0)
    result = w.run(follow=True)
    assert (result.outcome.value, result.exit_code, result.interrupted) == ("ready", 0, True)
    assert result.summary["outcome"] == "ready"


def test_sigint_before_a_verdict_is_128_plus_the_signal():
    """Interrupted before a verdict: exit 130, outcome incomplete."""
    w = World([*startup(), (3.0, lambda: signal.raise_signal(signal.SIGINT))])
    result = w.run()
    assert (result.outcome.value, result.exit_code) == ("incomplete", 130)
    assert result.summary["outcome"] == "interrupted"  # not "failed" with "failure": null
    assert result.summary["failure"] is None


def test_sigterm_before_a_verdict_is_an_interrupted_outcome():
    """SIGTERM (systemctl stop) while starting: exit 143, the summary says interrupted."""
    w = World([*startup(), (3.0, lambda: signal.raise_signal(signal.SIGTERM))])
    result = w.run()
    assert result.exit_code == 143
    assert result.summary["outcome"] == "interrupted"


def test_notify_says_ready_only_after_the_smoke_answer():
    """STATUS lines while starting, EXTEND_TIMEOUT, READY=1 once, after the model answered."""
    notify = FakeNotify()
    w = World(startup(), ready_at=6.0, notify=notify)
    w.run()
    kinds = notify.kinds()
    assert kinds.count("ready") == 1
    assert "extend" in kinds[: kinds.index("ready")]
    statuses = [text for kind, text in notify.sent if kind == "status"]
    assert "loading weights 3/3" in statuses
    ready_text = next(text for kind, text in notify.sent if kind == "ready")
    assert "the model answered at http://127.0.0.1:8123" in ready_text


def test_notify_never_says_ready_on_a_failure():
    """A failure is a STATUS line, never READY=1."""
    notify = FakeNotify()
    w = World([*startup(), *lines((4.0, OOM))], notify=notify)
    w.run()
    assert "ready" not in notify.kinds()
    assert notify.sent[-1] == ("status", "failed: cuda_oom during kv_cache_alloc")


def test_watchdog_pings_only_after_ready():
    """With WATCHDOG_USEC the follower pings every interval once ready."""
    notify = FakeNotify(interval=10.0)
    w = World([*startup(), exit_at(45.0, 0)], ready_at=4.0, notify=notify)
    w.run(follow=True)
    kinds = notify.kinds()
    assert kinds.index("watchdog") > kinds.index("ready")
    assert 3 <= kinds.count("watchdog") <= 5


def test_no_nvml_turns_gpu_sampling_off_once():
    """Without a readings file, a GPU error is said once and sampling stops."""
    w = World([*startup(), *lines((4.0, OOM))], gpus_error="NVML not found")
    w.run()
    assert [n for n in w.observer.notes if "GPU" in n] == ["GPU sampling off: NVML not found"]
    assert w.gpus.reads == 1


def test_a_missing_readings_file_is_said_once_and_tried_again():
    """With --gpus-from, a readings file not there yet is tried every interval."""
    w = World(
        [*startup(), *lines((10.0, OOM))], gpus_error="no readings file", gpus_from="gpus.json"
    )
    w.run()
    notes = [n for n in w.observer.notes if "GPU" in n]
    assert notes == ["GPU readings not available yet (no readings file); trying every 1s"]
    assert w.gpus.reads >= 9


def test_gpu_samples_become_gpu_events():
    """GPU memory is sampled every interval and reported."""
    w = World([*startup(), *lines((5.0, OOM))])
    w.run()
    assert [e for e in w.observer.events if e.event == "gpu"]
    assert w.gpus.reads >= 4


def test_a_probe_that_raises_is_an_observation_not_a_crash():
    """An exception inside the prober becomes a failed probe; the verdict still comes."""
    w = World([*startup(), *lines((5.0, OOM))])
    w.server.fail_with = RuntimeError("socket exploded")
    result = w.run()
    assert result.exit_code == 1
    assert any(
        e.event == "probe" and "socket exploded" in (e.fields.get("error") or "")
        for e in w.observer.events
    )


def test_a_broken_observer_never_stops_the_follower():
    """An observer whose output pipe is closed is dropped; the verdict still comes."""

    class Broken(RecordingObserver):
        def line(self, stream: str, text: str) -> None:
            raise BrokenPipeError

    w = World([*startup(), *lines((4.0, OOM))])
    w.observer = Broken()
    result = w.run()
    assert result.exit_code == 1
    assert w.observer.lines == []
    assert w.observer.closed == []


def test_the_prober_is_closed_at_the_end():
    """The probe lane closes the prober it used."""
    w = World([*startup(), *lines((4.0, OOM))])
    w.run()
    assert w.server.closed == 1


def test_engine_and_port_come_from_the_log_when_nothing_else_names_them():
    """No command and no --url: probes go to the engine's default port once the log names it."""
    w = World(lines((0.0, BANNER), (0.5, OOM)), command=None)
    result = w.run()
    assert result.exit_code == 1
    assert w.server.urls[0] == "http://127.0.0.1:8000"
    assert w.server.urls == ["http://127.0.0.1:8000"]  # the prober is built once


def test_the_first_line_that_names_the_engine_decides_it_and_the_probes_target():
    """llama.cpp named by its log, not its command: the prober is built once, for llama-server's
    default port, and nothing was probed before the log said where."""
    load = "llama_model_loader: loaded meta data with 34 key-value pairs and 339 tensors"
    w = World(
        lines((0.0, "starting the server"), (2.0, load), (30.0, "done")),
        ready_at=3.0,
        command=None,
    )
    result = w.run()
    assert result.engine is Engine.LLAMACPP
    assert w.server.urls == ["http://127.0.0.1:8080"]
    assert min(t for _, _, t in w.server.probes) >= 2.0
    assert result.outcome.value == "ready"


def test_nothing_is_probed_while_nothing_names_the_target():
    """No command, no --url, no --engine and a log that never names the engine: no prober, no
    probe to a guessed port; the note says how to give one; the stall still ends it."""
    w = World(lines((0.0, "starting the server")), command=None, stall_seconds=10.0)
    result = w.run()
    assert (result.outcome.value, result.exit_code) == ("stalled", 4)
    assert w.server.urls == []
    assert w.server.probes == []
    assert any("give --url or --engine" in n for n in w.observer.notes)


def test_a_command_that_names_no_engine_keeps_its_url_the_log_names_the_engine():
    """A wrapper command: the URL is the command's (decided at the start, the prober built
    once); the engine, named by the log, is the result's."""
    w = World(startup(), ready_at=5.0, command=["./serve.sh", "--port", "8123"])
    result = w.run()
    assert result.engine is Engine.VLLM
    assert w.server.urls == ["http://127.0.0.1:8123"]
    assert result.outcome.value == "ready"


def test_url_and_engine_from_the_config_win():
    """--url and --engine given: probes go there; the command is not needed."""
    w = World(startup(), ready_at=5.0, command=None, url="10.0.0.5:9000", engine=Engine.VLLM)
    result = w.run()
    assert result.url == "http://10.0.0.5:9000"
    assert result.outcome.value == "ready"


def test_an_unknown_exception_waits_for_the_line_that_explains_it():
    """vLLM 0.32 prints pydantic's ValidationError, then the line that states the cause: live
    takes the cause (as `diagnose` does on the whole log), not the unknown exception above it."""
    validation = "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig"
    cause = (
        "  Value error, User-specified max_model_len (4096) is greater than the derived "
        "max_model_len (max_position_embeddings=2048.0 or model_max_length=None in model's "
        "config.json). To allow overriding this maximum, set the env var "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."
    )
    w = World([*lines((0.0, BANNER), (0.5, validation), (0.6, cause)), exit_at(3.0, 1)])
    result = w.run()
    assert result.failure is not None
    assert result.failure.failure_class.value == "config_error"
    assert "User-specified max_model_len (4096)" in result.failure.line


def test_a_stop_request_after_ready_stops_like_sigterm():
    """``stop`` set by another part of bringup (run --bench when done): stopped, exit 0."""
    stop = threading.Event()
    w = World([*startup(), (40.0, stop.set)], ready_at=4.0)
    result = w.run(follow=True, stop=stop)
    assert (result.outcome.value, result.exit_code, result.interrupted) == ("ready", 0, True)
    assert 40.0 <= w.clock.elapsed() < 41.0
