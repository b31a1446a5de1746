"""The closing line of run/up/watch takes its phase and outcome from the verdict's result,
the one the FAILED line above it was made from."""

from __future__ import annotations

from bringup.core.diagnosis import Failure, FailureEvent, PhaseEvent, TimelineEntry
from bringup.core.live import StartupResult
from bringup.core.startup import StartupMachine, StartupPolicy, summary_json
from bringup.core.vocab import FailureClass, Outcome, Phase
from bringup.render.live import format_ending


def _ended(failure_phase: Phase, reached: Phase, outcome: Outcome) -> list[str]:
    m = StartupMachine(StartupPolicy(), start=100.0)
    m.on_event(PhaseEvent(TimelineEntry(reached, 3, None)), 101.0)
    cause = Failure(
        FailureClass.KV_CACHE_INSUFFICIENT, failure_phase, "ValueError: ...", 9, "too small"
    )
    m.on_event(FailureEvent(cause), 102.0)
    result = StartupResult(
        outcome=outcome,
        exit_code=1,
        failure=cause,
        argv=("vllm", "serve", "m"),
        time_to_ready_seconds=None,
        summary=summary_json(m, 103.0),
        url="http://127.0.0.1:8000",
    )
    return format_ending(result, m.snapshot(103.0))


def test_failed_in_the_failures_phase() -> None:
    """`FAILED: kv_cache_insufficient during kv_cache_alloc` ends `failed in kv_cache_alloc`,
    not in the memory_profiling the log had reached."""
    lines = _ended(Phase.KV_CACHE_ALLOC, Phase.MEMORY_PROFILING, Outcome.FAILED)
    assert lines[0] == "failed in kv_cache_alloc"
