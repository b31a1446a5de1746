"""A service's start timeout from the startup prediction.

``TimeoutStartSec=`` (and a container health check's start period, a Kubernetes
``startupProbe``'s ``failureThreshold x periodSeconds``) is ``MARGIN`` times the sum of the
phases' high ends, rounded up to a whole minute and never under ``FLOOR_SECONDS``: the high
ends are each phase's upper quartile (or a third over a measured read), so the worst case of
all of them at once, with half again on top, leaves room for a busy machine without letting a
hung start sit for the old fixed 20 minutes.
"""

from __future__ import annotations

import math

from bringup.core.startup_time.model import StartupPrediction
from bringup.units import format_seconds

MARGIN = 1.5
FLOOR_SECONDS = 300.0


def start_timeout(prediction: StartupPrediction, before_seconds: float = 0.0) -> tuple[float, str]:
    """(seconds, the comment that says where they come from); ``before_seconds``: what runs
    inside the same timeout before the server starts (the unit's guard, at most)."""
    seconds = max(FLOOR_SECONDS, math.ceil(MARGIN * prediction.high_seconds / 60) * 60)
    seconds += before_seconds
    before = f", plus {format_seconds(before_seconds)} for the guard" if before_seconds else ""
    note = (
        f"TimeoutStartSec: {MARGIN:g} x the predicted startup's high end "
        f"({format_seconds(prediction.high_seconds)}; typical "
        f"{format_seconds(prediction.total_seconds)}, bound by {prediction.bound_by}), rounded up "
        f"to a minute, at least {format_seconds(FLOOR_SECONDS)}{before} (bringup plan; "
        "--timeout-start overrides it)"
    )
    return seconds, note
