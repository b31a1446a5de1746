"""``bringup run --nodes FILE --retry N``: a remedy that changes the command applies to every
node's command, and every node starts again.

The one command the user gave is what the remedy rewrites (``retry_policy.apply``, as for a
single server); each attempt plans every node's command from it again (``plan_for``) and
follows all nodes to a verdict (``attempt``). The decision is the single-node one
(``retry_policy.decide``) on the failing node's root cause and facts, so the same failures are
retried, with the same changes, as ``run --retry``; a failure after ready, an interrupt, or
a failure no remedy changes ends the loop. Every attempt is kept as an ``AttemptRecord`` (the
final summary's ``"attempts"``) and every change reported as a ``RetryEvent`` before the next
attempt starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bringup.core import retry_policy
from bringup.core.attempts import AttemptRecord, RetryEvent
from bringup.core.live import ClusterEvent, NodesResult
from bringup.core.nodes import ClusterPlan
from bringup.core.packs.types import Pack
from bringup.core.retry_policy import Change, Decision
from bringup.core.vocab import Outcome
from bringup.follow.nodes import NodesObserver


@dataclass(frozen=True)
class NodesRetryOutcome:
    """The last attempt's result and every attempt's record."""

    result: NodesResult
    attempts: tuple[AttemptRecord, ...]

    @property
    def exit_code(self) -> int:
        return self.result.exit_code


def retry_nodes(
    argv: Sequence[str],
    retries: int,
    *,
    pack: Pack,
    plan_for: Callable[[tuple[str, ...]], ClusterPlan],
    attempt: Callable[[int, ClusterPlan], NodesResult],
    close: Callable[[NodesResult, Sequence[AttemptRecord], bool], None] | None = None,
    on_retry: Callable[[RetryEvent], None] | None = None,
    on_stop: Callable[[Decision], None] | None = None,
) -> NodesRetryOutcome:
    """Attempt over every node; on a failure before ready with a remedy, change the command and
    attempt again over every node, at most ``retries`` times."""
    current = tuple(argv)
    history: list[Change] = []
    records: list[AttemptRecord] = []
    number = 1
    while True:
        plan = plan_for(current)
        result = attempt(number, plan)
        decision = _decide(result, current, history, retries - (number - 1), pack, plan_for)
        change = decision.change if decision is not None else None
        stopped = None if change is not None or decision is None else decision.reason
        records.append(_record(number, current, result, change, stopped))
        if close is not None:
            close(result, records, change is None)
        if change is None:
            if decision is not None and on_stop is not None:
                on_stop(decision)
            return NodesRetryOutcome(result, tuple(records))
        history.append(change)
        number += 1
        current = tuple(retry_policy.apply(current, change))
        if on_retry is not None:
            on_retry(RetryEvent(number, change))


def _decide(
    result: NodesResult,
    argv: tuple[str, ...],
    history: list[Change],
    retries_left: int,
    pack: Pack,
    plan_for: Callable[[tuple[str, ...]], ClusterPlan],
) -> Decision | None:
    """None when there is nothing to decide (ready, interrupted, no failure)."""
    if result.failure is None or result.interrupted or result.time_to_ready_seconds is not None:
        return None
    if retries_left <= 0:
        return Decision(None, "no retries left" if history else "no --retry given")
    decision = retry_policy.decide(
        result.failure,
        argv,
        pack=pack,
        history=history,
        facts=result.facts,
        can_wait=False,  # the GPUs are the nodes': bringup reads none of them here
    )
    if decision.change is None:
        return decision
    following = tuple(retry_policy.apply(argv, decision.change))
    problems = plan_for(following).problems
    if problems:  # the changed command cannot be spread over the nodes: say so, do not start
        return Decision(
            None, f"the changed command would not run on the nodes: {problems[0].line()}"
        )
    return decision


def _record(
    number: int,
    argv: tuple[str, ...],
    result: NodesResult,
    change: Change | None,
    stopped: str | None,
) -> AttemptRecord:
    f = result.failure
    return AttemptRecord(
        attempt=number,
        argv=argv,
        outcome=Outcome(result.summary.get("outcome", "failed")),
        exit_code=result.exit_code,
        failure_class=f.failure_class.value if f else None,
        phase=f.phase.value if f else None,
        change=change,
        stopped_because=stopped,
    )


class DeferredSummary:
    """An observer whose summary waits until the retry loop knows whether the attempt is the
    last: a non-final attempt's summary is not written (only its human lines are); the final
    one gets ``"attempts"``."""

    def __init__(self, inner: NodesObserver, *, human: NodesObserver | None = None) -> None:
        self.inner = inner  # the JSON observer (its close writes the summary)
        self.human = human  # the plain observer, closed at every attempt
        self._result: NodesResult | None = None

    def event(self, event: ClusterEvent) -> None:
        self.inner.event(event)
        if self.human is not None:
            self.human.event(event)

    def line(self, rank: int, text: str) -> None:
        self.inner.line(rank, text)
        if self.human is not None:
            self.human.line(rank, text)

    def note(self, text: str) -> None:
        self.inner.note(text)
        if self.human is not None:
            self.human.note(text)

    def close(self, result: NodesResult) -> None:
        self._result = result
        if self.human is not None:
            self.human.close(result)

    def release(self, attempts: Sequence[AttemptRecord], *, final: bool) -> None:
        """Write the summary (with every attempt) if this attempt is the last."""
        if not final or self._result is None:
            return
        summary: dict[str, Any] = {
            **self._result.summary,
            "attempts": [a.to_json() for a in attempts],
        }
        self.inner.close(_with_summary(self._result, summary))


def _with_summary(result: NodesResult, summary: dict[str, Any]) -> NodesResult:
    return dataclasses.replace(result, summary=summary)
