"""The one verdict function, live and offline: every branch, then both users of it."""

from __future__ import annotations

import pytest

from bringup.core import verdict
from bringup.core.analyzer import LogAnalyzer
from bringup.core.diagnosis import Failure
from bringup.core.startup import StartupMachine, StartupPolicy
from bringup.core.verdict import Facts, State
from bringup.core.vocab import FailureClass, Outcome, Phase

ROOT = Failure(FailureClass.CUDA_OOM, Phase.WARMUP, "oom", 9, "out of memory")
STALL = Failure(FailureClass.TIMEOUTS, Phase.WEIGHTS_LOADING, "", 0, "no progress")
HANG = Failure(FailureClass.NCCL_ERROR, Phase.DISTRIBUTED_INIT, "", 0, "hangs there")


@pytest.mark.parametrize(
    ("facts", "state", "outcome", "failure", "code"),
    [
        # live (run, watch, up)
        (Facts(failure=ROOT), State.FAILED, Outcome.FAILED, ROOT, 1),
        (Facts(failure=ROOT, ready=True), State.FAILED, Outcome.FAILED, ROOT, 1),
        (Facts(failure=ROOT, stalled=STALL), State.FAILED, Outcome.FAILED, ROOT, 1),
        (Facts(stalled=STALL), State.STALLED, Outcome.STALLED, STALL, 4),
        (Facts(ready=True), State.READY, Outcome.READY, None, 0),
        (Facts(ready=True, stopped=True, signal=15), State.STOPPED, Outcome.READY, None, 0),
        (Facts(), State.STARTING, Outcome.INCOMPLETE, None, 130),
        (Facts(signal=15), State.STARTING, Outcome.INCOMPLETE, None, 143),
        (Facts(signal=1), State.STARTING, Outcome.INCOMPLETE, None, 129),
        (Facts(stopped=True, signal=2), State.STARTING, Outcome.INCOMPLETE, None, 130),
        # offline (diagnose)
        (Facts(failure=ROOT, live=False), State.FAILED, Outcome.FAILED, ROOT, 1),
        (Facts(failure=ROOT, hang=HANG, live=False), State.FAILED, Outcome.FAILED, ROOT, 1),
        (Facts(ready=True, live=False), State.READY, Outcome.READY, None, 0),
        (Facts(ready=True, hang=HANG, live=False), State.READY, Outcome.READY, None, 0),
        (Facts(hang=HANG, live=False), State.STALLED, Outcome.HUNG, HANG, 1),
        (Facts(stalled=STALL, live=False), State.STALLED, Outcome.STALLED, STALL, 1),
        (Facts(live=False), State.STARTING, Outcome.INCOMPLETE, None, 3),
    ],
)
def test_every_branch(facts, state, outcome, failure, code):
    """Failure before stall before ready before hang before no verdict; exit codes by mode."""
    v = verdict.decide(facts)
    assert (v.state, v.outcome, v.failure, v.exit_code) == (state, outcome, failure, code)


def test_offline_exit_codes_are_diagnoses():
    """diagnose: 0 ready, 1 failed or hung (or stalled), 3 incomplete."""
    assert {o: verdict.offline_exit_code(o) for o in Outcome} == {
        Outcome.READY: 0,
        Outcome.FAILED: 1,
        Outcome.HUNG: 1,
        Outcome.STALLED: 1,
        Outcome.INCOMPLETE: 3,
    }


def test_the_live_machine_asks_the_verdict():
    """The follower's state machine holds facts; its state and outcome are the verdict's."""
    m = StartupMachine(StartupPolicy(stall_seconds=10.0), start=0.0)
    assert (m.state, m.outcome, m.verdict(15).exit_code) == (
        State.STARTING,
        Outcome.INCOMPLETE,
        143,
    )
    m.tick(11.0)
    v = m.verdict()
    assert (v.state, v.outcome, v.exit_code) == (State.STALLED, Outcome.STALLED, 4)
    assert m.failure is v.failure
    assert v.failure is not None
    assert v.failure.failure_class is FailureClass.TIMEOUTS


def test_the_analyzer_asks_the_verdict():
    """diagnose's outcome comes from the same function: a root cause fails the log."""
    a = LogAnalyzer(None)
    a.feed("(APIServer pid=6) INFO 11-30 09:47:00 [api_server.py:1] vLLM server version 0.33.0")
    assert a.finish().outcome is Outcome.INCOMPLETE
    a.feed(
        "(EngineCore pid=7) ERROR 11-30 09:47:02 [core.py:700] torch.OutOfMemoryError: CUDA out of memory."
    )
    d = a.finish(1)
    assert d.outcome is Outcome.FAILED
    assert verdict.offline_exit_code(d.outcome) == 1
