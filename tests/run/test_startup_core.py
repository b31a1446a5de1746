"""The supervisor's pure decisions, driven by hand-made events and a fake clock (seconds)."""

from __future__ import annotations

from bringup.core.diagnosis import Failure, FailureEvent, PhaseEvent, ProgressEvent, TimelineEntry
from bringup.core.gpu import GpuReading
from bringup.core.probes import ProbeKind, ProbeObservation
from bringup.core.startup import StartupMachine, StartupPolicy, summary_json
from bringup.core.verdict import State
from bringup.core.vocab import FailureClass, Outcome, Phase

GiB = 1024**3
URL = "http://127.0.0.1:8000"


def machine(**policy: object) -> StartupMachine:
    return StartupMachine(StartupPolicy(**policy), start=100.0)  # type: ignore[arg-type]


def phase(p: Phase, line: int = 1) -> PhaseEvent:
    return PhaseEvent(TimelineEntry(p, line, None))


def failure(
    cls: FailureClass = FailureClass.CUDA_OOM, *, final: bool = True, line: str = "boom"
) -> FailureEvent:
    return FailureEvent(Failure(cls, Phase.WARMUP, line, 7, "it broke", is_final=final))


def obs(kind: ProbeKind, ok: bool, **kw: object) -> ProbeObservation:
    return ProbeObservation(kind, URL, ok, **kw)  # type: ignore[arg-type]


def gpu(used_gib: float) -> list[GpuReading]:
    return [GpuReading(0, "H100", "GPU-0", 80 * GiB, int(used_gib * GiB))]


def drive_to_ready(m: StartupMachine, now: float) -> list[str]:
    """Answer each probe the machine asks for with success; return the event names."""
    names: list[str] = []
    for _ in range(3):
        kind = m.next_probe(now)
        assert kind is not None
        m.probe_sent(kind)
        model = "m" if kind is ProbeKind.MODELS else None
        names += [e.event for e in m.on_probe(obs(kind, True, model=model, status=200), now)]
    return names


def test_ready_only_after_smoke_succeeds():
    """Health 200 and a listed model are not enough: ready comes with the smoke answer."""
    m = machine()
    m.on_event(phase(Phase.API_SERVER_STARTING), 101.0)
    assert m.next_probe(101.0) is ProbeKind.HEALTH
    m.probe_sent(ProbeKind.HEALTH)
    m.on_probe(obs(ProbeKind.HEALTH, True, status=200), 102.0)
    assert m.state is State.STARTING
    assert m.next_probe(102.0) is ProbeKind.MODELS
    m.probe_sent(ProbeKind.MODELS)
    m.on_probe(obs(ProbeKind.MODELS, True, model="llama", status=200), 102.1)
    assert m.next_probe(102.1) is ProbeKind.SMOKE
    assert m.probe_model() == "llama"
    m.probe_sent(ProbeKind.SMOKE)
    events = m.on_probe(obs(ProbeKind.SMOKE, True, status=200, model="llama"), 102.5)
    assert m.state is State.READY
    assert m.outcome is Outcome.READY
    assert [e.event for e in events][-1] == "ready"
    assert m.time_to_ready_seconds == 2.5


def test_failed_smoke_goes_back_to_health_later():
    """A failed smoke request is not ready; the sequence restarts after the retry delay."""
    m = machine(smoke_retry_seconds=1.0)
    for kind, ok in ((ProbeKind.HEALTH, True), (ProbeKind.MODELS, True)):
        m.probe_sent(kind)
        m.on_probe(obs(kind, ok, model="x"), 100.0)
    m.probe_sent(ProbeKind.SMOKE)
    m.on_probe(obs(ProbeKind.SMOKE, False, status=500, error="engine dead"), 100.0)
    assert m.state is State.STARTING
    assert m.next_probe(100.5) is None
    assert m.next_probe(101.0) is ProbeKind.HEALTH


def test_refused_health_repeats_at_interval_and_reports_once():
    """Connection refused is retried every probe interval, and reported only when it changes."""
    m = machine(probe_interval_seconds=0.25)
    reported = []
    for i in range(4):
        now = 100.0 + i * 0.25
        assert m.next_probe(now) is ProbeKind.HEALTH
        m.probe_sent(ProbeKind.HEALTH)
        assert m.next_probe(now) is None  # one in flight
        reported += m.on_probe(
            obs(ProbeKind.HEALTH, False, refused=True, error="connection refused"), now
        )
    assert len(reported) == 1
    assert reported[0].fields["refused"] is True


def test_the_logs_ready_line_sends_the_waiting_health_probe_at_once():
    """Refused, the next health probe waits its interval; the engine's own "listening" line
    (phase ready) makes it due now, and ``probe_due_in`` says when the follower must wake."""
    m = machine(probe_interval_seconds=0.25, liveness_interval_seconds=0.0)
    assert m.probe_due_in(100.0) == 0.0
    m.probe_sent(ProbeKind.HEALTH)
    assert m.probe_due_in(100.0) is None  # one in flight: its answer wakes the follower
    m.on_probe(obs(ProbeKind.HEALTH, False, refused=True, error="connection refused"), 100.0)
    due = m.probe_due_in(100.1)
    assert due is not None
    assert abs(due - 0.15) < 1e-9
    assert m.next_probe(100.1) is None
    m.on_event(phase(Phase.API_SERVER_STARTING), 100.1)
    assert m.next_probe(100.1) is None  # not yet listening
    m.on_event(phase(Phase.READY), 100.12)
    assert m.probe_due_in(100.12) == 0.0
    assert m.next_probe(100.12) is ProbeKind.HEALTH
    assert drive_to_ready(m, 100.12)[-1] == "ready"
    assert m.probe_due_in(100.2) is None  # ready, no liveness probes asked for


def test_an_answer_before_the_logs_ready_line_still_reaches_the_ready_phase():
    """The smoke answer can come before the follower reads "Application startup complete."
    (a loaded machine): the phase ready is reached with the answer, as it is when the line
    comes first, and the late line adds nothing. Consumers that follow phases (the metrics'
    ``bringup_startup_phase``, the timeline) see one sequence whichever comes first."""
    m = machine()
    m.on_event(phase(Phase.API_SERVER_STARTING), 101.0)
    events = [e for e in drive_to_ready(m, 102.0) if e != "probe"]
    assert events == ["phase", "ready"]
    assert m.phase is Phase.READY
    assert [s.phase for s in m.spans][-1] is Phase.READY
    assert m.on_event(phase(Phase.READY, line=40), 102.5) == []
    assert [s.phase for s in m.spans].count(Phase.READY) == 1
    # the line first: the answer adds no second phase event
    m = machine()
    m.on_event(phase(Phase.API_SERVER_STARTING), 101.0)
    assert [e.event for e in m.on_event(phase(Phase.READY, line=40), 101.5)] == ["phase"]
    assert [e for e in drive_to_ready(m, 102.0) if e != "probe"] == ["ready"]


def test_final_failure_fails_immediately():
    """A final root cause ends the startup at once, with its class and line."""
    m = machine()
    events = m.on_event(failure(line="CUDA out of memory"), 105.0)
    assert m.state is State.FAILED
    assert m.outcome is Outcome.FAILED
    assert events[0].event == "failure"
    assert events[0].fields["class"] == "cuda_oom"
    assert events[0].fields["line"] == "CUDA out of memory"
    assert m.next_probe(106.0) is None


def test_wrapper_failure_waits_for_grace():
    """Wrapper-only evidence is held for the grace period before it becomes the verdict."""
    m = machine(wrapper_grace_seconds=2.0)
    assert m.on_event(failure(FailureClass.ENGINE_CORE_DIED, final=False), 100.0) == []
    assert m.tick(101.9) == []
    assert m.state is State.STARTING
    events = m.tick(102.0)
    assert m.state is State.FAILED
    assert events[0].fields["class"] == "engine_core_died"


def test_final_failure_replaces_pending_wrapper():
    """A root cause arriving inside the grace wins over the wrapper before it."""
    m = machine(wrapper_grace_seconds=2.0)
    m.on_event(failure(FailureClass.ENGINE_CORE_DIED, final=False), 100.0)
    m.on_event(failure(FailureClass.CUDA_OOM), 101.0)
    assert m.failure is not None
    assert m.failure.failure_class is FailureClass.CUDA_OOM


def test_wrapper_failure_settled_at_exit():
    """At process exit a pending wrapper failure becomes the verdict without waiting."""
    m = machine(wrapper_grace_seconds=60.0)
    m.on_event(failure(FailureClass.ENGINE_CORE_DIED, final=False, line="wrapper"), 100.0)
    m.on_exit(1, None, 100.5)
    assert m.state is State.FAILED
    assert m.failure is not None
    assert m.failure.line == "wrapper"


def test_stall_without_progress_is_timeouts_in_last_phase():
    """No phase, progress or GPU change for --stall is a stall, class timeouts, last phase kept."""
    m = machine(stall_seconds=10.0, deadline_seconds=None)
    m.on_event(phase(Phase.DISTRIBUTED_INIT), 101.0)
    m.on_line("vLLM is using nccl==2.21.5", 101.0)
    m.on_gpu(gpu(1), 101.0)
    m.on_gpu(gpu(1), 105.0)  # no change
    assert m.tick(110.9) == []
    events = m.tick(111.0)
    assert m.state is State.STALLED
    assert m.outcome is Outcome.STALLED
    assert events[0].fields["class"] == "timeouts"
    assert events[0].fields["phase"] == "distributed_init"
    assert events[0].fields["line"] == ""  # a stall has no cause line; where it stopped is not why
    assert "last line was line 1" in events[0].fields["summary"]


def test_deadline_while_progressing_is_a_deadline_not_a_stall():
    """--deadline passing while progress still arrives says so, and asks for a longer deadline."""
    m = machine(stall_seconds=300.0, deadline_seconds=60.0)
    m.on_event(phase(Phase.WEIGHTS_LOADING), 101.0)
    for i in range(1, 8):
        m.on_event(ProgressEvent(Phase.WEIGHTS_LOADING, i, 20, "shards", i), 100.0 + i * 8.0)
    events = m.tick(160.0)
    assert m.state is State.STALLED
    assert events[0].fields["class"] == "timeouts"
    assert "a deadline, not a stall" in events[0].fields["summary"]
    assert "--deadline 120" in events[0].fields["remedy"][0]["text"]
    assert events[0].fields["line"] == ""


def test_slow_progress_is_never_cut_off():
    """A load that keeps reporting progress runs far past --stall without a verdict."""
    m = machine(stall_seconds=10.0, deadline_seconds=None)
    m.on_event(phase(Phase.WEIGHTS_LOADING), 100.0)
    for i in range(1, 100):
        now = 100.0 + i * 9.0
        m.on_event(ProgressEvent(Phase.WEIGHTS_LOADING, i, 125, "shards", i), now)
        assert m.tick(now + 8.9) == []
    assert m.state is State.STARTING


def test_gpu_memory_change_counts_as_progress():
    """GPU memory moving keeps a silent phase alive; jitter below the threshold does not."""
    m = machine(stall_seconds=10.0, deadline_seconds=None)
    m.on_gpu(gpu(1), 100.0)
    assert m.on_gpu(gpu(5), 108.0)[0].event == "gpu"
    assert m.tick(117.0) == []
    m.on_gpu(gpu(5.001), 117.5)  # jitter
    assert m.tick(118.0)[0].fields["class"] == "timeouts"


def test_deadline_bounds_even_a_progressing_startup():
    """--deadline stops a startup that keeps progressing but never gets ready."""
    m = machine(stall_seconds=10.0, deadline_seconds=30.0)
    for i in range(6):
        m.on_event(ProgressEvent(Phase.WEIGHTS_LOADING, i, 125, "shards", i), 100.0 + i * 5)
        m.tick(100.0 + i * 5)
    events = m.tick(130.0)
    assert m.state is State.STALLED
    assert "deadline" in (m.failure.summary if m.failure else "")
    assert events[0].fields["class"] == "timeouts"


def test_exit_zero_before_ready_is_failure():
    """A process that exits 0 before ready failed (vLLM exits 0 after its engine died)."""
    m = machine()
    m.on_event(phase(Phase.WARMUP), 101.0)
    m.on_exit(0, None, 102.0)
    assert m.state is State.FAILED
    assert m.failure is not None
    assert m.failure.failure_class is FailureClass.ENGINE_CORE_DIED
    assert m.failure.phase is Phase.WARMUP


def test_exit_killed_is_host_oom():
    """Exit by SIGKILL without a recognised line points at the kernel OOM killer."""
    m = machine()
    m.on_exit(-9, None, 102.0)
    assert m.failure is not None
    assert m.failure.failure_class is FailureClass.HOST_OOM


def test_analyzer_verdict_at_exit_wins():
    """At exit the analyzer's final verdict on the whole log is preferred to a bare exit."""
    m = machine()
    m.on_exit(
        1, Failure(FailureClass.CONFIG_ERROR, Phase.CONFIG, "ValueError: bad", 3, "bad flag"), 101.0
    )
    assert m.failure is not None
    assert m.failure.failure_class is FailureClass.CONFIG_ERROR


def test_death_after_ready_is_failure():
    """After ready, the process exiting (any status) is a failure reported as such."""
    m = machine()
    drive_to_ready(m, 101.0)
    m.on_exit(0, None, 200.0)
    assert m.state is State.FAILED
    assert m.outcome is Outcome.FAILED
    assert m.failure is not None
    assert "after it was ready" in m.failure.summary
    assert m.time_to_ready_seconds == 1.0


def test_failure_line_after_ready_fails():
    """A root-cause line after ready ends supervision with a failure."""
    m = machine()
    drive_to_ready(m, 101.0)
    m.on_event(failure(FailureClass.ENGINE_CORE_DIED), 150.0)
    assert m.state is State.FAILED


def test_no_stall_after_ready():
    """Silence after ready is normal serving, not a stall."""
    m = machine(stall_seconds=10.0, deadline_seconds=20.0)
    drive_to_ready(m, 101.0)
    assert m.tick(1000.0) == []
    assert m.state is State.READY


def test_liveness_failures_after_ready():
    """Repeated failed health checks after ready mean the engine died."""
    m = machine(liveness_interval_seconds=5.0, liveness_failures=3)
    drive_to_ready(m, 101.0)
    now = 101.0
    for _ in range(3):
        assert m.next_probe(now) is None
        now += 5.0
        assert m.next_probe(now) is ProbeKind.HEALTH
        m.probe_sent(ProbeKind.HEALTH)
        m.on_probe(obs(ProbeKind.HEALTH, False, status=503), now)
    assert m.state is State.FAILED
    assert m.failure is not None
    assert m.failure.failure_class is FailureClass.ENGINE_CORE_DIED


def test_stop_after_ready_is_not_a_failure():
    """Stopping on request after ready keeps the outcome ready, and a later exit is ignored."""
    m = machine()
    drive_to_ready(m, 101.0)
    m.stop(150.0)
    m.on_exit(-15, None, 151.0)
    assert m.state is State.STOPPED
    assert m.outcome is Outcome.READY
    assert m.failure is None


def test_phases_only_move_forward_and_form_the_timeline():
    """Phases are recorded once, in order; the summary carries them with durations."""
    m = machine()
    m.on_event(phase(Phase.CONFIG, 2), 101.0)
    m.on_event(phase(Phase.WEIGHTS_LOADING, 5), 103.0)
    assert m.on_event(phase(Phase.CONFIG, 9), 104.0) == []
    drive_to_ready(m, 110.0)
    summary = summary_json(m, 111.0)
    assert [t["phase"] for t in summary["timeline"]] == [
        "start",
        "config",
        "weights_loading",
        "ready",
    ]
    assert summary["timeline"][1] == {
        "phase": "config",
        "t": 1.0,
        "duration_seconds": 2.0,
        "line_number": 2,
    }
    assert summary["outcome"] == "ready"
    assert summary["failure"] is None
    assert summary["time_to_ready_seconds"] == 10.0


def test_summary_of_failure_has_exact_fields():
    """The summary names outcome, phase, failure {class, phase, line, remedy}, time and timeline."""
    m = machine()
    m.on_event(failure(), 101.0)
    summary = summary_json(m, 101.0)
    assert set(summary) == {
        "event",
        "outcome",
        "phase",
        "failure",
        "time_to_ready_seconds",
        "timeline",
    }
    assert set(summary["failure"]) == {"class", "phase", "line", "remedy"}
    assert summary["outcome"] == "failed"
    assert summary["time_to_ready_seconds"] is None


def test_without_health_endpoint_probing_starts_at_models():
    """An engine with no health path is judged by /v1/models and the smoke request alone."""
    m = machine(has_health=False)
    assert m.next_probe(100.0) is ProbeKind.MODELS


def test_after_ready_probe_results_are_reported_only_when_they_change():
    """Liveness probes every 5 s would be ~17,000 journal lines a day: an ok answer as fast
    as usual is not reported again; a far slower one, a failure and the recovery are."""
    m = machine()
    drive_to_ready(m, 101.0)
    reported: list[tuple[bool, float]] = []
    answers = [(True, 0.002)] * 10 + [(True, 0.9), (True, 0.002), (False, 0.0), (True, 0.002)]
    now = 101.0
    for ok, latency in answers:
        now += 5.0
        kind = m.next_probe(now)
        assert kind is ProbeKind.HEALTH
        m.probe_sent(kind)
        events = m.on_probe(obs(kind, ok, status=200 if ok else 503, latency_seconds=latency), now)
        reported += [
            (e.fields["ok"], e.fields["latency_seconds"]) for e in events if e.event == "probe"
        ]
    assert reported == [(True, 0.9), (False, 0.0), (True, 0.002)]  # slow, down, back
    assert m.state is State.READY
