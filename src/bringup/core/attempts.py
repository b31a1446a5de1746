"""The record of ``--retry``: each attempt, and each change made before the next one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bringup.core.retry_policy import Change
from bringup.core.vocab import Outcome


@dataclass(frozen=True, slots=True)
class RetryEvent:
    """A change made before attempt ``attempt`` (2 is the first retry)."""

    attempt: int
    change: Change

    def to_json(self) -> dict[str, Any]:
        """``{"event": "retry", "attempt", "change": {"flag", "value", "reason"}}``."""
        return {"event": "retry", "attempt": self.attempt, "change": change_json(self.change)}


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One attempt: the command it ran, how it ended, and the change made after it."""

    attempt: int
    argv: tuple[str, ...]
    outcome: Outcome
    exit_code: int
    failure_class: str | None
    phase: str | None
    change: Change | None  # the change made before the next attempt; None for the last
    stopped_because: str | None  # the last attempt's failure: why it was not retried

    def to_json(self) -> dict[str, Any]:
        """One entry of the summary's ``"attempts"``."""
        return {
            "attempt": self.attempt,
            "argv": list(self.argv),
            "outcome": self.outcome.value,
            "exit_code": self.exit_code,
            "class": self.failure_class,
            "phase": self.phase,
            "change": change_json(self.change) if self.change is not None else None,
            "not_retried": self.stopped_because,
        }


def change_json(change: Change) -> dict[str, Any]:
    """``{"flag", "value", "reason"}`` (flag and value null for a wait for the GPUs)."""
    return {"flag": change.flag, "value": change.value, "reason": change.reason}
