"""Plain output of a followed startup with a prediction: the phase's predicted time, the
weights' rate and ETA, the slow-phase line; the rich panel's weights bar."""

from __future__ import annotations

import io

from rich.console import Console

from bringup.core.live import PhaseReached, Progress, SlowPhase
from bringup.core.vocab import Phase
from bringup.render.live import PlainObserver
from bringup.render.startup_live import weights_bar


def test_plain_lines_say_prediction_rate_eta_and_slowness() -> None:
    out = io.StringIO()
    plain = PlainObserver(out, echo=False)
    plain.event(Progress(0.5, Phase.WEIGHTS_LOADING, 3, 7, "shards", 12.4, 0.35e9))
    plain.event(PhaseReached(1.0, Phase.TORCH_COMPILE, 9, 26.0, 54.0))
    plain.event(Progress(2.0, Phase.WEIGHTS_LOADING, 7, 7, "shards", 0.0, 0.35e9, late=True))
    plain.event(SlowPhase(80.0, Phase.TORCH_COMPILE, 60.0, 54.0, "a cold compile cache"))
    text = out.getvalue()
    assert "(predicted 26.0s, at most 54.0s)" in text
    assert "3/7 shards, 0.35 GB/s, ETA 12.4s" in text
    assert "7/7" not in text  # a phase that is over: its late line is not a step back
    assert (
        "torch_compile is slower than predicted: 1m00s so far, expected at most 54.0s; "
        "likely a cold compile cache"
    ) in text


def test_weights_bar_renders_counts_rate_and_eta() -> None:
    console = Console(file=io.StringIO(), width=100, color_system=None)
    console.print(weights_bar(Progress(2.0, Phase.WEIGHTS_LOADING, 3, 7, "shards", 12.4, 0.35e9)))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "weights" in text
    assert "3/7 shards, 0.35 GB/s, ETA 12.4s" in text


def test_a_late_progress_line_says_so_in_json() -> None:
    """--json keeps a finished phase's late line (the shards done) and marks it late; a
    current one carries no such field."""
    late = Progress(2.0, Phase.WEIGHTS_LOADING, 7, 7, "shards", late=True).to_json()
    now = Progress(2.0, Phase.WEIGHTS_LOADING, 3, 7, "shards").to_json()
    assert late["late"] is True
    assert late["done"] == 7
    assert "late" not in now
