"""The prediction in a followed startup, with a fake clock (seconds): the weights' ETA and
rate in progress events, each phase's predicted time, the slow-phase line, and the stall by
expectation (several expected gaps, --stall as the floor, a moving load never cut off)."""

from __future__ import annotations

import pytest

from bringup.core.diagnosis import PhaseEvent, ProgressEvent, TimelineEntry
from bringup.core.live import PhaseReached, Progress, SlowPhase
from bringup.core.startup import StartupMachine, StartupPolicy
from bringup.core.startup_time import PhaseEstimate, StartupPrediction
from bringup.core.startup_time.eta import WeightsEta
from bringup.core.verdict import State
from bringup.core.vocab import FailureClass, Phase

T0 = 100.0
GB = 10**9


def prediction(weights: float = 40.0, weights_high: float = 60.0) -> StartupPrediction:
    phases = (
        PhaseEstimate(Phase.START, 10.0, 5.0, 20.0, "b"),
        PhaseEstimate(Phase.WEIGHTS_LOADING, weights, 20.0, weights_high, "b", "a cold page cache"),
        PhaseEstimate(Phase.TORCH_COMPILE, 30.0, 10.0, 50.0, "b", "a cold compile cache"),
        PhaseEstimate(Phase.MEMORY_PROFILING, 10.0, 5.0, 20.0, "b"),
    )
    return StartupPrediction(phases, 90.0, Phase.WEIGHTS_LOADING)


def machine(stall: float | None = 30.0, **kw: object) -> StartupMachine:
    policy = StartupPolicy(
        stall_seconds=stall,
        prediction=prediction(**kw),
        checkpoint_bytes=8 * GB,  # type: ignore[arg-type]
    )
    return StartupMachine(policy, start=T0)


def phase(m: StartupMachine, p: Phase, t: float) -> list[object]:
    return list(m.on_event(PhaseEvent(TimelineEntry(p, 1, None)), T0 + t))


def shards(m: StartupMachine, done: int, t: float, total: int = 8) -> Progress:
    (event,) = m.on_event(ProgressEvent(Phase.WEIGHTS_LOADING, done, total, "shards", 2), T0 + t)
    assert isinstance(event, Progress)
    return event


def test_eta_starts_from_the_prediction_and_follows_the_real_pace() -> None:
    eta = WeightsEta(total_units=8, predicted_seconds=40.0, start=0.0)
    assert eta.estimate(10.0).eta_seconds == 30.0  # nothing done: the prediction's rest
    half = eta.update(20.0, 4)  # the real pace: 4 shards in 20 s, 20 s left
    assert half.eta_seconds == pytest.approx(0.5 * 20.0 + 0.5 * 20.0)
    slow = WeightsEta(8, 40.0, 0.0).update(60.0, 4)  # 60 s for half: 60 s left at that pace
    assert slow.eta_seconds == pytest.approx(0.5 * 60.0 + 0.5 * 0.0)


def test_the_work_after_the_last_shard_stays_in_the_eta() -> None:
    """A phase predicted at 40 s of which 10 s come after the last shard (the CPU build's
    repack): the shards' pace says nothing of those 10 s, so every shard read leaves 10 s,
    not zero, and half read at the predicted pace leaves what the prediction does."""
    eta = WeightsEta(total_units=8, predicted_seconds=40.0, start=0.0, tail_seconds=10.0)
    assert eta.update(15.0, 4).eta_seconds == pytest.approx(0.5 * (15.0 + 10.0) + 0.5 * 25.0)
    assert eta.update(30.0, 8).eta_seconds == pytest.approx(10.0)
    plain = WeightsEta(total_units=8, predicted_seconds=40.0, start=0.0)
    assert plain.update(30.0, 8).eta_seconds == pytest.approx(0.0)


def test_a_phase_tail_reaches_the_followers_eta() -> None:
    phases = (
        PhaseEstimate(Phase.START, 10.0, 5.0, 20.0, "b"),
        PhaseEstimate(Phase.WEIGHTS_LOADING, 40.0, 20.0, 60.0, "b", "", 10.0),
    )
    policy = StartupPolicy(
        stall_seconds=30.0, prediction=StartupPrediction(phases, 50.0, Phase.WEIGHTS_LOADING)
    )
    m = StartupMachine(policy, start=T0)
    phase(m, Phase.WEIGHTS_LOADING, 10.0)
    assert shards(m, 8, 40.0).eta_seconds == pytest.approx(10.0)


def test_progress_events_carry_eta_and_rate_and_phases_their_prediction() -> None:
    m = machine()
    (reached,) = phase(m, Phase.WEIGHTS_LOADING, 10.0)
    assert isinstance(reached, PhaseReached)
    assert reached.to_json()["predicted_seconds"] == 40.0
    assert reached.to_json()["predicted_high_seconds"] == 60.0
    event = shards(m, 2, 20.0)  # 2 of 8 shards in 10 s: 1 GB of 8 GB per 5 s
    assert event.bytes_per_second == pytest.approx(0.2 * GB)
    assert event.eta_seconds is not None
    assert event.to_json()["eta_seconds"] == round(event.eta_seconds, 1)
    assert phase(m, Phase.WEIGHTS_LOADED, 50.0)[0].to_json().get("predicted_seconds") is None


def test_without_a_prediction_the_json_is_as_before() -> None:
    m = StartupMachine(StartupPolicy(), start=T0)
    (reached,) = m.on_event(PhaseEvent(TimelineEntry(Phase.WEIGHTS_LOADING, 1, None)), T0 + 1)
    assert set(reached.to_json()) == {"event", "t", "phase", "line_number"}
    (progress,) = m.on_event(ProgressEvent(Phase.WEIGHTS_LOADING, 1, 2, "shards", 2), T0 + 2)
    assert set(progress.to_json()) == {"event", "t", "phase", "done", "total", "unit"}


def test_a_phase_past_its_high_end_is_said_once_with_its_reason() -> None:
    m = machine(stall=None)
    phase(m, Phase.WEIGHTS_LOADING, 10.0)
    assert m.tick(T0 + 69.0) == []  # 59 s in: within the high end of 60 s
    (slow,) = m.tick(T0 + 71.0)
    assert isinstance(slow, SlowPhase)
    assert slow.phase is Phase.WEIGHTS_LOADING
    assert slow.reason == "a cold page cache"
    assert slow.to_json()["predicted_high_seconds"] == 60.0
    assert m.tick(T0 + 90.0) == []  # said once
    phase(m, Phase.TORCH_COMPILE, 100.0)
    (compile_slow,) = m.tick(T0 + 151.0)
    assert isinstance(compile_slow, SlowPhase)
    assert compile_slow.reason == "a cold compile cache"


def test_stall_waits_several_expected_gaps_not_just_the_floor() -> None:
    """Weights of 8 shards with a high end of 400 s: a gap of 50 s is expected, so 30 s of
    --stall would cut a healthy load; the stall comes at 4 gaps (200 s) of silence."""
    m = machine(stall=30.0, weights=300.0, weights_high=400.0)
    phase(m, Phase.WEIGHTS_LOADING, 10.0)
    shards(m, 1, 50.0)
    assert m.stall_due(T0 + 50.0 + 31.0)  # past the floor: the follower looks for stopped ones
    m.tick(T0 + 50.0 + 199.0)  # none is stopped: the phase may take its expected gaps
    assert m.state is not State.STALLED
    events = m.tick(T0 + 50.0 + 201.0)
    assert m.state is State.STALLED
    assert m.failure is not None
    assert m.failure.failure_class is FailureClass.TIMEOUTS
    assert events


def test_a_stopped_process_is_a_stall_at_the_floor_whatever_the_prediction() -> None:
    """The same load with its EngineCore stopped (SIGSTOP): it cannot progress, so the
    expected gaps do not apply and --stall (30 s) is the limit; the failure names it."""
    m = machine(stall=30.0, weights=300.0, weights_high=400.0)
    phase(m, Phase.WEIGHTS_LOADING, 10.0)
    shards(m, 1, 50.0)
    stopped = ((4242, "VLLM::EngineCore"),)
    m.tick(T0 + 50.0 + 29.0, stopped)
    assert m.state is not State.STALLED
    m.tick(T0 + 50.0 + 31.0, stopped)
    assert m.state is State.STALLED
    assert m.failure is not None
    assert "4242 (VLLM::EngineCore)" in m.failure.summary
    assert "kill -CONT 4242" in m.failure.remedy[0].text


def test_stall_floor_holds_when_the_expected_gap_is_short() -> None:
    """Expected gaps of 60 s / 8 shards = 7.5 s (x4 = 30 s) under a --stall of 120 s: the
    floor wins, and with --stall 0 (None) there is no stall at all."""
    m = machine(stall=120.0)
    phase(m, Phase.WEIGHTS_LOADING, 10.0)
    shards(m, 1, 12.0)
    assert not m.stall_due(T0 + 12.0 + 119.0)
    assert m.stall_due(T0 + 12.0 + 121.0)
    never = machine(stall=None)
    phase(never, Phase.WEIGHTS_LOADING, 10.0)
    assert not never.stall_due(T0 + 10_000.0)


def test_a_slow_load_that_keeps_moving_is_never_cut_off() -> None:
    """A shard every 25 s, far slower than predicted: each one restarts the count."""
    m = machine(stall=30.0, weights=40.0, weights_high=60.0)  # expected gap 7.5 s, floor 30
    phase(m, Phase.WEIGHTS_LOADING, 0.0)
    for i in range(1, 9):
        shards(m, i, 25.0 * i)
        assert not m.stall_due(T0 + 25.0 * i + 29.0)
        m.tick(T0 + 25.0 * i + 29.0)
    assert m.state is not State.STALLED
