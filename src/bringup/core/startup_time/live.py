"""A prediction applied to a followed startup: each phase's expected time, the weights ETA,
when a phase counts as slow, and when as stalled.

The follower's phases are finer than the prediction's: ``config`` and ``distributed_init``
belong to ``start``, ``weights_loaded`` to ``weights_loading``, ``kv_cache_alloc`` and
``warmup`` to ``memory_profiling``. A predicted phase's time runs from the first of its live
phases to the first of the next one's.

- **slow**: a predicted phase still running past its ``high`` end is said once, with the
  reason its facts give (``PhaseEstimate.slow_reason``);
- **stalled by expectation**: no progress for ``STALL_GAPS`` times the phase's expected gap
  between progress lines (the weights: its ``high`` over the shards; a phase without
  progress lines: its whole ``high``), and never sooner than the ``--stall`` floor. Any
  progress restarts the count, so a slow load that keeps moving is never cut off.

Pure: the machine passes the times.
"""

from __future__ import annotations

from bringup.core.startup_time.eta import Estimate, WeightsEta
from bringup.core.startup_time.model import PhaseEstimate, StartupPrediction
from bringup.core.vocab import Phase
from bringup.units import format_seconds

STALL_GAPS = 4.0  # "several times the expected gap"

_GROUP = {
    Phase.START: Phase.START,
    Phase.CONFIG: Phase.START,
    Phase.DISTRIBUTED_INIT: Phase.START,
    Phase.WEIGHTS_LOADING: Phase.WEIGHTS_LOADING,
    Phase.WEIGHTS_LOADED: Phase.WEIGHTS_LOADING,
    Phase.TORCH_COMPILE: Phase.TORCH_COMPILE,
    Phase.MEMORY_PROFILING: Phase.MEMORY_PROFILING,
    Phase.KV_CACHE_ALLOC: Phase.MEMORY_PROFILING,
    Phase.WARMUP: Phase.MEMORY_PROFILING,
    Phase.CUDA_GRAPH_CAPTURE: Phase.CUDA_GRAPH_CAPTURE,
    Phase.API_SERVER_STARTING: Phase.API_SERVER_STARTING,
}


def summary_line(prediction: StartupPrediction) -> str:
    """``predicted time to ready: 1m10s (38s-2m58s), bound by weights_loading``."""
    return (
        f"predicted time to ready: {format_seconds(prediction.total_seconds)} "
        f"({format_seconds(prediction.low_seconds)}-{format_seconds(prediction.high_seconds)}), "
        f"bound by {prediction.bound_by}"
    )


def predicted_phase(phase: Phase) -> Phase | None:
    """The prediction's phase a live phase belongs to (None for ``ready``)."""
    return _GROUP.get(phase)


class Expectation:
    """What the prediction expects of the phase under way."""

    def __init__(self, prediction: StartupPrediction, checkpoint_bytes: int = 0) -> None:
        self.prediction = prediction
        self.checkpoint_bytes = checkpoint_bytes
        self._group: Phase | None = Phase.START
        self._group_since = 0.0
        self._said_slow: set[Phase] = set()
        self._eta: WeightsEta | None = None

    def estimate(self, phase: Phase) -> PhaseEstimate | None:
        """The prediction of the predicted phase ``phase`` belongs to."""
        group = predicted_phase(phase)
        return None if group is None else self.prediction.phase(group)

    def on_phase(self, phase: Phase, t: float) -> PhaseEstimate | None:
        """A live phase began at ``t``; the estimate when it opens a predicted phase."""
        group = predicted_phase(phase)
        if group is None or group == self._group:
            return None
        self._group, self._group_since = group, t
        self._eta = None
        return self.prediction.phase(group)

    def on_progress(self, phase: Phase, done: int, total: int, t: float) -> Estimate | None:
        """Progress in the weights phase: the ETA (None for other phases)."""
        if predicted_phase(phase) is not Phase.WEIGHTS_LOADING:
            return None
        if self._eta is None:
            est = self.prediction.phase(Phase.WEIGHTS_LOADING)
            self._eta = WeightsEta(
                total,
                est.seconds if est else None,
                self._group_since,
                est.tail_seconds if est else 0.0,
            )
        return self._eta.update(t, done, total)

    def bytes_per_second(self, estimate: Estimate) -> float | None:
        """The weights' read rate so far, in bytes (shards taken as equal in size)."""
        if not self.checkpoint_bytes or estimate.units_per_second is None:
            return None
        return estimate.units_per_second * self.checkpoint_bytes / estimate.total

    def slow(self, t: float) -> tuple[PhaseEstimate, float] | None:
        """The phase under way and its time so far, once, when it ran past its high end."""
        if self._group is None or self._group in self._said_slow:
            return None
        est = self.prediction.phase(self._group)
        elapsed = t - self._group_since
        if est is None or elapsed <= est.high:
            return None
        self._said_slow.add(self._group)
        return est, elapsed

    def stall_limit(self, floor: float | None, total_units: int | None) -> float | None:
        """Seconds without progress that make the phase under way stalled: ``STALL_GAPS``
        expected gaps, never under ``floor`` (``--stall``); None when stalls are off."""
        if floor is None:
            return None
        est = None if self._group is None else self.prediction.phase(self._group)
        if est is None:
            return floor
        units = total_units if self._group is Phase.WEIGHTS_LOADING and total_units else 1
        return max(floor, STALL_GAPS * est.high / max(1, units))
