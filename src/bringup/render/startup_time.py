"""Human output of a startup prediction: one line per phase, then the total."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from bringup.core.startup_time import StartupPrediction
from bringup.units import format_seconds as seconds


def startup_lines(prediction: StartupPrediction) -> list[str]:
    """``  weights_loading      2.0s  (0.7s-35s)  basis`` per phase, then the total."""
    width = max(len(p.phase.value) for p in prediction.phases)
    out = []
    for p in prediction.phases:
        band = f"({seconds(p.low)}-{seconds(p.high)})"
        out.append(f"  {p.phase.value:<{width}}  {seconds(p.seconds):>6}  {band:<14}  {p.basis}")
    band = f"({seconds(prediction.low_seconds)}-{seconds(prediction.high_seconds)})"
    total = seconds(prediction.total_seconds)
    out.append(f"  {'total':<{width}}  {total:>6}  {band:<14}  bound by {prediction.bound_by}")
    return out


def print_startup(prediction: StartupPrediction, console: Console) -> None:
    """Print the prediction (long lines are not wrapped: one line per phase)."""
    console.print(Text("time to ready (predicted):", style="bold"))
    for line in startup_lines(prediction):
        console.print(Text(line), soft_wrap=True)
