"""The live ETA of a phase that reports progress (the weights: shards n of m).

Before any unit is done the ETA is the prediction's remaining time. Once units are done, the
observed rate (units done over the seconds since the phase began) gives its own remaining
time; the two are blended by the share done, so the prediction fades out as the load shows
its real pace: ``eta = f * observed + (1 - f) * predicted_left`` with ``f`` the share done.
Units are taken as equal in size (vLLM's shards of one checkpoint are, but for the last).
Work the prediction places after the last unit (``tail_seconds``: the CPU build's repack
after the last shard) shows in no unit's pace, so the observed remainder carries it as
predicted: once every shard is read the ETA is that tail, not zero.
Pure: the caller passes the times.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Estimate:
    """Where a phase with progress stands."""

    done: int
    total: int
    elapsed_seconds: float  # since the phase began
    units_per_second: float | None  # None before the first unit is done
    eta_seconds: float | None  # None: neither a prediction nor a rate yet


class WeightsEta:
    """The ETA of a phase of ``total_units`` units, begun at ``start``."""

    def __init__(
        self,
        total_units: int,
        predicted_seconds: float | None,
        start: float,
        tail_seconds: float = 0.0,
    ) -> None:
        self.total = max(1, total_units)
        self.predicted = predicted_seconds
        self.start = start
        self.tail = max(0.0, tail_seconds)
        self.done = 0

    def update(self, now: float, done: int, total: int | None = None) -> Estimate:
        """Progress ``done`` of ``total`` (default: as given at the start) at ``now``."""
        if total:
            self.total = max(1, total)
        self.done = max(self.done, min(done, self.total))
        return self.estimate(now)

    def estimate(self, now: float) -> Estimate:
        """The ETA at ``now`` from what is known so far."""
        elapsed = max(0.0, now - self.start)
        share = self.done / self.total
        rate = self.done / elapsed if self.done and elapsed > 0 else None
        predicted_left = None if self.predicted is None else max(0.0, self.predicted - elapsed)
        observed_left = None if rate is None else (self.total - self.done) / rate + self.tail
        if observed_left is None:
            eta = predicted_left
        elif predicted_left is None:
            eta = observed_left
        else:
            eta = share * observed_left + (1 - share) * predicted_left
        return Estimate(self.done, self.total, elapsed, rate, eta)
