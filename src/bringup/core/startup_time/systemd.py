"""``TimeoutStartSec=`` of ``bringup unit`` from the startup prediction, and the comment
that says where it comes from: the prediction's ``service`` (``service.service_timeout``, the
rule ``plan`` shows as ``startup.service``) plus what runs before the server (the guard)."""

from __future__ import annotations

from bringup.core.startup_time.model import StartupPrediction
from bringup.core.startup_time.service import FLOOR_SECONDS, MARGIN
from bringup.units import format_seconds


def start_timeout(prediction: StartupPrediction, before_seconds: float = 0.0) -> tuple[float, str]:
    """(seconds, the comment that says where they come from); ``before_seconds``: what runs
    inside the same timeout before the server starts (the unit's guard, at most)."""
    seconds = prediction.service.timeout_start_seconds + before_seconds
    before = f", plus {format_seconds(before_seconds)} for the guard" if before_seconds else ""
    note = (
        f"TimeoutStartSec: {MARGIN:g} x the predicted startup's high end "
        f"({format_seconds(prediction.high_seconds)}; typical "
        f"{format_seconds(prediction.total_seconds)}, bound by {prediction.bound_by}), rounded up "
        f"to a minute, at least {format_seconds(FLOOR_SECONDS)}{before} (bringup plan; "
        "--timeout-start overrides it)"
    )
    return seconds, note
