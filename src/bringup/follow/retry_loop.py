"""The one retry loop behind every ``--retry N``: ``bringup run`` and ``bringup up`` (one
server, ``follow.retry``) and ``bringup run --nodes`` (every node, ``follow.nodes_retry``)::

    result, records = retry_loop(attempts, argv, retries=2, on_retry=print)

Each attempt is followed to a verdict; on a failure before ready the pure policy
(``bringup.core.retry_policy.decide``) names the change, the ``Attempts`` object makes it,
and the next attempt starts with the changed command, at most ``retries`` times. A failure
after ready, an interrupt, or a failure no remedy changes ends the loop. Every change is
reported to ``on_retry`` as a ``RetryEvent`` before the next attempt; every attempt is kept
as an ``AttemptRecord`` (the final summary's ``"attempts"``).

What differs between the kinds of start lives in the ``Attempts`` object (the strategy): how
an attempt is started and followed, how a change is made (a new command line, a systemd
drop-in, a wait for the GPUs), whether a wait for the GPUs is possible, which engine's pack
decides, how an attempt's outcome reads, and a last check of a decided change (``vet``: over
several nodes, the changed command must still spread over them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from bringup.core import retry_policy
from bringup.core.attempts import AttemptRecord, RetryEvent
from bringup.core.diagnosis import Failure
from bringup.core.packs.types import Pack
from bringup.core.plan.result import Plan
from bringup.core.retry_policy import Change, Decision
from bringup.core.vocab import Outcome


class AttemptResult(Protocol):
    """What the loop reads of an attempt's result (``StartupResult``, ``NodesResult``)."""

    @property
    def exit_code(self) -> int: ...
    @property
    def failure(self) -> Failure | None: ...
    @property
    def time_to_ready_seconds(self) -> float | None: ...
    @property
    def interrupted(self) -> bool: ...
    @property
    def facts(self) -> Mapping[str, float | int | str]: ...


R = TypeVar("R", bound=AttemptResult)


class Attempts(Protocol[R]):
    """How one kind of start is attempted, changed, decided on and closed."""

    def attempt(self, number: int, argv: tuple[str, ...]) -> R:
        """Start (or restart) with ``argv`` and follow to a verdict."""
        ...

    def change(self, change: Change, argv: tuple[str, ...]) -> bool:
        """Make ``change`` before the next attempt (``argv`` is the new command line).

        False when it could not be made (a wait for the GPUs that timed out).
        """
        ...

    def can_wait(self) -> bool:
        """Whether waiting for the GPUs is possible here (GPU readings are available)."""
        ...

    def pack(self, result: R) -> Pack | None:
        """The knowledge pack of the engine the attempt ran; None: not known."""
        ...

    def outcome(self, result: R) -> Outcome:
        """The attempt's outcome, for its record."""
        ...

    def vet(self, argv: tuple[str, ...], decision: Decision) -> Decision:
        """The policy's decision on a failure of ``argv``, checked before the change is made:
        the decision itself, or one without a change that says why not."""
        ...

    def close(self, result: R, attempts: Sequence[AttemptRecord], *, final: bool) -> None:
        """Report the end of an attempt (the final one gets the attempts in its summary)."""
        ...


def retry_loop(
    attempts: Attempts[R],
    argv: Sequence[str],
    retries: int,
    *,
    on_retry: Callable[[RetryEvent], None] | None = None,
    on_stop: Callable[[Decision], None] | None = None,
    plan: Plan | None = None,
) -> tuple[R, tuple[AttemptRecord, ...]]:
    """Attempt, and on a failure before ready change what the policy says and attempt again;
    the last attempt's result and every attempt's record."""
    current = tuple(argv)
    history: list[Change] = []
    records: list[AttemptRecord] = []
    number = 1
    while True:
        result = attempts.attempt(number, current)
        decision = _decide(result, current, history, retries - (number - 1), attempts, plan)
        change = decision.change if decision is not None else None
        while change is not None:
            history.append(change)
            following = tuple(retry_policy.apply(current, change))
            if attempts.change(change, following):
                break
            # a wait that timed out: ask again, knowing the wait was tried
            pack = attempts.pack(result)
            decision = (
                _policy(attempts, result, result.failure, current, history, pack, plan, False)
                if result.failure and pack is not None
                else None
            )
            change = decision.change if decision is not None else None
        stopped = None if change is not None or decision is None else decision.reason
        records.append(_record(number, current, result, attempts.outcome(result), change, stopped))
        if change is None:
            attempts.close(result, records, final=True)
            if decision is not None and on_stop is not None:
                on_stop(decision)
            return result, tuple(records)
        attempts.close(result, records, final=False)
        number += 1
        current = tuple(retry_policy.apply(current, change))
        if on_retry is not None:
            on_retry(RetryEvent(number, change))


def _decide(
    result: R,
    argv: tuple[str, ...],
    history: list[Change],
    retries_left: int,
    attempts: Attempts[R],
    plan: Plan | None,
) -> Decision | None:
    """None when there is nothing to decide (ready, interrupted, no failure)."""
    if result.failure is None or result.interrupted or result.time_to_ready_seconds is not None:
        return None
    if retries_left <= 0:
        return Decision(None, "no retries left" if history else "no --retry given")
    pack = attempts.pack(result)
    if pack is None:
        return Decision(None, "the engine is not known, so bringup knows none of its flags")
    return _policy(attempts, result, result.failure, argv, history, pack, plan, attempts.can_wait())


def _policy(
    attempts: Attempts[R],
    result: R,
    failure: Failure,
    argv: tuple[str, ...],
    history: list[Change],
    pack: Pack,
    plan: Plan | None,
    can_wait: bool,
) -> Decision:
    """The policy's change for ``failure``, as the attempts' ``vet`` lets it stand."""
    decision = retry_policy.decide(
        failure,
        argv,
        pack=pack,
        history=history,
        facts=dict(result.facts),
        plan=plan,
        can_wait=can_wait,
    )
    if decision.change is None:
        return decision
    return attempts.vet(argv, decision)


def _record(
    number: int,
    argv: tuple[str, ...],
    result: AttemptResult,
    outcome: Outcome,
    change: Change | None,
    stopped: str | None,
) -> AttemptRecord:
    f = result.failure
    return AttemptRecord(
        attempt=number,
        argv=argv,
        outcome=outcome,
        exit_code=result.exit_code,
        failure_class=f.failure_class.value if f else None,
        phase=f.phase.value if f else None,
        change=change,
        stopped_because=stopped,
    )
