"""The one verdict of a startup, live (``run``, ``watch``, ``up``) or from its log (``diagnose``).

Facts in, verdict out; the same rules for both, in this order:

1. a root cause (or a death of the server) is a failure, also after ready;
2. no progress for --stall, or past --deadline (live only), is a stall;
3. ready: live, the smoke request was answered (stopped on request afterwards still counts);
   from a log, the engine said it is ready;
4. a log that stops where startups hang (offline only) is a hang;
5. otherwise there is no verdict yet: live, bringup was interrupted before one (128+signal);
   from a log, the log ends mid-startup.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from bringup import exit_codes
from bringup.core.diagnosis import Failure
from bringup.core.vocab import Outcome


class State(StrEnum):
    """Where a followed startup stands."""

    STARTING = "starting"  # no verdict yet
    READY = "ready"  # the smoke request succeeded; still supervised
    FAILED = "failed"  # terminal: a root cause, a death, or a dead engine after ready
    STALLED = "stalled"  # terminal: no progress for --stall, past --deadline, or a hang
    STOPPED = "stopped"  # terminal: stopped on request after ready


@dataclass(frozen=True, slots=True)
class Facts:
    """What is known about one startup."""

    failure: Failure | None = None  # the root cause (final), or the death of the server
    stalled: Failure | None = None  # live: no progress for --stall, or past --deadline
    hang: Failure | None = None  # offline: the log stops at a step known to hang
    ready: bool = False  # live: the model answered; offline: the engine said it is ready
    stopped: bool = False  # live: stopped on request
    signal: int | None = None  # live: bringup was interrupted by this signal
    live: bool = True  # False: a log read afterwards (diagnose's exit codes)


@dataclass(frozen=True, slots=True)
class Verdict:
    """State, outcome, the failure behind it, and bringup's exit code."""

    state: State
    outcome: Outcome
    failure: Failure | None
    exit_code: int


# diagnose: a stall or a hang fails the log; a log without a verdict is incomplete (3)
_OFFLINE_EXIT: dict[Outcome, int] = {
    Outcome.READY: exit_codes.EXIT_READY,
    Outcome.FAILED: exit_codes.EXIT_FAILED,
    Outcome.HUNG: exit_codes.EXIT_FAILED,
    Outcome.STALLED: exit_codes.EXIT_FAILED,
    Outcome.INCOMPLETE: exit_codes.EXIT_INCOMPLETE,
}


def offline_exit_code(outcome: Outcome) -> int:
    """``bringup diagnose``'s exit code for the outcome of a log."""
    return _OFFLINE_EXIT[outcome]


def decide(facts: Facts) -> Verdict:
    """The verdict the facts support (see the module docstring for the order)."""
    if facts.failure is not None:
        return _verdict(facts, State.FAILED, Outcome.FAILED, facts.failure, exit_codes.EXIT_FAILED)
    if facts.stalled is not None:
        return _verdict(
            facts, State.STALLED, Outcome.STALLED, facts.stalled, exit_codes.EXIT_STALLED
        )
    if facts.ready:
        state = State.STOPPED if facts.stopped else State.READY
        return _verdict(facts, state, Outcome.READY, None, exit_codes.EXIT_READY)
    if facts.hang is not None:
        return _verdict(facts, State.STALLED, Outcome.HUNG, facts.hang, exit_codes.EXIT_FAILED)
    interrupted = exit_codes.SIGNAL_BASE + (facts.signal or exit_codes.SIGINT)
    return _verdict(facts, State.STARTING, Outcome.INCOMPLETE, None, interrupted)


def _verdict(
    facts: Facts, state: State, outcome: Outcome, failure: Failure | None, live_code: int
) -> Verdict:
    code = live_code if facts.live else offline_exit_code(outcome)
    return Verdict(state, outcome, failure, code)
