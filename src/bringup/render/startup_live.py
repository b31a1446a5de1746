"""The startup prediction in a followed startup's output: each phase's predicted time, the
weights' progress bar with its rate and ETA, and the slow-phase line."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from bringup.core.live import PhaseReached, Progress, SlowPhase
from bringup.units import format_seconds


def predicted_words(event: PhaseReached) -> str:
    """`` (predicted 26s, at most 54s)`` when the phase opens a predicted one, else ``""``."""
    if event.predicted_seconds is None:
        return ""
    high = format_seconds(event.predicted_high_seconds or 0.0)
    return f" (predicted {format_seconds(event.predicted_seconds)}, at most {high})"


def rate_and_eta(event: Progress) -> str:
    """``, 0.35 GB/s, ETA 12s`` from what the event carries (``""`` without a prediction)."""
    out = ""
    if event.bytes_per_second is not None:
        out += f", {event.bytes_per_second / 1e9:.2f} GB/s"
    if event.eta_seconds is not None:
        out += f", ETA {format_seconds(event.eta_seconds)}"
    return out


def slow_line(event: SlowPhase) -> str:
    """One line: which phase, how long so far against the prediction, and why."""
    return (
        f"{event.phase} is slower than predicted: {format_seconds(event.elapsed_seconds)} so far, "
        f"expected at most {format_seconds(event.predicted_high_seconds)}"
        + (f"; likely {event.reason}" if event.reason else "")
    )


def weights_bar(event: Progress, width: int = 30) -> RenderableType:
    """The weights phase as a bar: shards done of total, GB/s now, ETA."""
    grid = Table.grid(padding=(0, 1))
    grid.add_row(
        Text("weights"),
        ProgressBar(total=max(1, event.total), completed=event.done, width=width),
        Text(f"{event.done}/{event.total} {event.unit}{rate_and_eta(event)}"),
    )
    return Group(grid)
