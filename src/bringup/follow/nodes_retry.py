"""``bringup run --nodes FILE --retry N``: a remedy that changes the command applies to every
node's command, and every node starts again.

The loop is the single-server one (``follow.retry_loop``); ``NodeAttempts`` is what differs.
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
from bringup.follow.retry_loop import retry_loop


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
    attempt again over every node, at most ``retries`` times (``follow.retry_loop``, the loop
    of ``run --retry``)."""
    attempts = NodeAttempts(pack, plan_for, attempt, close)
    result, records = retry_loop(attempts, argv, retries, on_retry=on_retry, on_stop=on_stop)
    return NodesRetryOutcome(result, records)


class NodeAttempts:
    """The multi-node strategy of the retry loop: each attempt plans every node's command from
    the (changed) one and follows them all; a change is the new command line only; the pack is
    the one given; a change the nodes cannot take is not made."""

    def __init__(
        self,
        pack: Pack,
        plan_for: Callable[[tuple[str, ...]], ClusterPlan],
        attempt: Callable[[int, ClusterPlan], NodesResult],
        close: Callable[[NodesResult, Sequence[AttemptRecord], bool], None] | None = None,
    ) -> None:
        self._pack = pack
        self.plan_for = plan_for
        self._attempt = attempt
        self._close = close

    def attempt(self, number: int, argv: tuple[str, ...]) -> NodesResult:
        return self._attempt(number, self.plan_for(argv))

    def change(self, change: Change, argv: tuple[str, ...]) -> bool:
        return True  # the next attempt plans every node's command from ``argv``

    def can_wait(self) -> bool:
        return False  # the GPUs are the nodes': bringup reads none of them here

    def pack(self, result: NodesResult) -> Pack:
        return self._pack

    def outcome(self, result: NodesResult) -> Outcome:
        return Outcome(result.summary.get("outcome", "failed"))

    def vet(self, argv: tuple[str, ...], decision: Decision) -> Decision:
        """The changed command must still spread over the nodes: else say so, do not start."""
        assert decision.change is not None
        following = tuple(retry_policy.apply(argv, decision.change))
        problems = self.plan_for(following).problems
        if problems:
            return Decision(
                None, f"the changed command would not run on the nodes: {problems[0].line()}"
            )
        return decision

    def close(self, result: NodesResult, attempts: Sequence[AttemptRecord], *, final: bool) -> None:
        if self._close is not None:
            self._close(result, attempts, final)


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
