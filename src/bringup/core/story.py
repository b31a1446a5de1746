"""What ``bringup demo`` saw, as values: the plan, and each followed start of the twin."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bringup.core.diagnosis import Remedy
from bringup.core.live import StartupResult
from bringup.core.vocab import Outcome


@dataclass
class Attempt:
    """One followed start of the twin."""

    argv: list[str]
    result: StartupResult | None = None
    failure_t: float | None = None
    server_alive_at_failure: list[int] = field(default_factory=list)
    answer: str | None = None
    wall_seconds: float = 0.0
    # the failure's remedies with the plan's numbers in place of the log's guess (None: as found)
    remedies: tuple[Remedy, ...] | None = None


@dataclass
class Story:
    """What the demo saw, for the summary and ``--json``."""

    plan: dict[str, Any] | None = None
    recommended_max_num_seqs: str | None = None
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def told(self) -> bool:
        """The story went as it should: predicted, caught while alive, fixed, answered."""
        if self.plan is None or len(self.attempts) != 2:
            return False
        first, second = (a.result for a in self.attempts)
        verdict = self.plan["verdict"]
        return (
            not verdict["fits"]
            and verdict["failure_class"] == "cuda_oom"
            and verdict["phase"] == "warmup"
            and first is not None
            and first.outcome is Outcome.FAILED
            and first.failure is not None
            and first.failure.failure_class.value == "cuda_oom"
            and second is not None
            and second.outcome is Outcome.READY
        )
