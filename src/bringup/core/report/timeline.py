"""The startup as a picture: an SVG drawn by hand (plain XML; pure: values in, text out).

One lane per node (one for a single server). In each lane the phases are bars on a shared
time axis, labelled with their names; under them, the weight-loading rate (units per second
between progress lines, as a step line scaled to its own maximum) and the GPU memory of
each device over time (a line per GPU, scaled to its total); the failure is a red mark at
its time, labelled with its class and log line; ready is a green mark.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from bringup.core.report.recording import Lane
from bringup.units import format_bytes, format_seconds

WIDTH = 960
LEFT = 150  # room for the lane's labels
RIGHT = 30
TOP = 72
LANE_HEIGHT = 190
AXIS = 36
PHASE_BAR = 26
# one colour per phase, in startup order; cycles for engines with more
_COLOURS = (
    "#8da0cb",
    "#66c2a5",
    "#fc8d62",
    "#e78ac3",
    "#a6d854",
    "#ffd92f",
    "#e5c494",
    "#b3b3b3",
    "#80b1d3",
    "#bebada",
    "#fb8072",
    "#8dd3c7",
)
_GPU_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
)


@dataclass(frozen=True, slots=True)
class Size:
    """The picture's size in pixels."""

    width: int
    height: int


def size(lanes: int) -> Size:
    """The size of a picture with ``lanes`` lanes."""
    return Size(WIDTH, TOP + max(1, lanes) * LANE_HEIGHT + AXIS)


def draw(lanes: Sequence[Lane], title: str, unit: str = "s") -> str:
    """The SVG document of ``lanes`` (the order given); ``unit``: the time axis is in
    seconds (``s``) or, for a log without timestamps, in log lines (``line``)."""
    shown = list(lanes) or [Lane("")]
    box = size(len(shown))
    end = max([lane.end_t for lane in shown] + [1.0])
    scale = _Scale(end, unit)
    out = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{box.width}" height="{box.height}" '
            f'viewBox="0 0 {box.width} {box.height}" font-family="sans-serif" font-size="12">'
        ),
        f'<rect width="{box.width}" height="{box.height}" fill="#ffffff"/>',
        f'<text x="{LEFT}" y="22" font-size="15" font-weight="bold">{escape(title)}</text>',
    ]
    for i, lane in enumerate(shown):
        out += _lane(lane, TOP + i * LANE_HEIGHT, scale)
    out += _axis(scale, TOP + len(shown) * LANE_HEIGHT)
    out.append("</svg>")
    return "\n".join(out) + "\n"


class _Scale:
    def __init__(self, end: float, unit: str) -> None:
        self.end = end
        self.unit = unit
        self.span = WIDTH - LEFT - RIGHT

    def label(self, t: float) -> str:
        return format_seconds(t) if self.unit == "s" else f"line {t:.0f}"

    def x(self, t: float) -> float:
        return round(LEFT + self.span * max(0.0, min(t, self.end)) / self.end, 1)


def _lane(lane: Lane, top: int, scale: _Scale) -> list[str]:
    out = [
        f'<g class="lane" data-name={quoteattr(lane.name or "server")}>',
        f'<text x="8" y="{top + 18}" font-weight="bold">{escape(lane.name or "server")}</text>',
        f'<text x="8" y="{top + 18 + PHASE_BAR + 26}" fill="#555">loading rate</text>',
        f'<text x="8" y="{top + 18 + PHASE_BAR + 96}" fill="#555">GPU memory</text>',
    ]
    out += _phases(lane, top, scale)
    out += _rate(lane, top + PHASE_BAR + 12, scale)
    out += _memory(lane, top + PHASE_BAR + 82, scale)
    out += _marks(lane, top, scale)
    out.append("</g>")
    return out


def _phases(lane: Lane, top: int, scale: _Scale) -> list[str]:
    out = []
    ends = [t for t, _p, _n in lane.phases[1:]] + [lane.end_t]
    for i, ((t, phase, line), stop) in enumerate(zip(lane.phases, ends, strict=True)):
        x0, x1 = scale.x(t), scale.x(max(stop, t))
        colour = _COLOURS[i % len(_COLOURS)]
        said = f"log line {line}" if line else "no log line: the model's answer"
        tip = f"{phase}: from {format_seconds(t)}, {format_seconds(max(0.0, stop - t))} ({said})"
        out.append(
            f'<rect class="phase" x="{x0}" y="{top}" width="{max(1.0, round(x1 - x0, 1))}" '
            f'height="{PHASE_BAR}" fill="{colour}" stroke="#333" stroke-width="0.5">'
            f"<title>{escape(tip)}</title></rect>"
        )
        if x1 - x0 > 7 * len(phase):
            out.append(f'<text x="{x0 + 4}" y="{top + 17}">{escape(phase)}</text>')
        else:  # too narrow: the name above the bar, slanted
            out.append(
                f'<text x="{x0 + 2}" y="{top - 3}" font-size="10" '
                f'transform="rotate(-20 {x0 + 2} {top - 3})">{escape(phase)}</text>'
            )
    return out


def rates(lane: Lane) -> list[tuple[float, float, float, str]]:
    """The weight-loading rate: (from t, to t, units per second, unit) between progress lines
    of the weight-loading phase."""
    points = [
        (t, done, unit)
        for t, phase, done, _total, unit in lane.progress
        if phase == "weights_loading"
    ]
    out = []
    for (t0, d0, unit), (t1, d1, _u) in itertools.pairwise(points):
        if t1 > t0 and d1 >= d0:
            out.append((t0, t1, (d1 - d0) / (t1 - t0), unit))
    return out


def _rate(lane: Lane, top: int, scale: _Scale) -> list[str]:
    steps = rates(lane)
    height = 50
    out = [
        f'<line x1="{LEFT}" y1="{top + height}" x2="{WIDTH - RIGHT}" y2="{top + height}" stroke="#ccc"/>'
    ]
    if not steps:
        out.append(
            f'<text x="{LEFT + 4}" y="{top + height - 6}" fill="#999">no progress lines</text>'
        )
        return out
    peak = max(r for _a, _b, r, _u in steps) or 1.0
    points = []
    for t0, t1, r, _u in steps:
        y = round(top + height - height * r / peak, 1)
        points += [f"{scale.x(t0)},{y}", f"{scale.x(t1)},{y}"]
    unit = steps[0][3]
    out.append(
        f'<polyline class="rate" points="{" ".join(points)}" fill="none" stroke="#d95f02" stroke-width="2"/>'
    )
    out.append(
        f'<text x="{LEFT + 4}" y="{top + 10}" fill="#d95f02">peak {peak:.2f} {escape(unit)}/s</text>'
    )
    return out


def _memory(lane: Lane, top: int, scale: _Scale) -> list[str]:
    height = 60
    out = [
        f'<line x1="{LEFT}" y1="{top + height}" x2="{WIDTH - RIGHT}" y2="{top + height}" stroke="#ccc"/>'
    ]
    devices = sorted({i for _t, i, _u, _tot in lane.gpus})
    if not devices:
        out.append(f'<text x="{LEFT + 4}" y="{top + height - 6}" fill="#999">no GPU samples</text>')
        return out
    for k, index in enumerate(devices):
        samples = [(t, used, total) for t, i, used, total in lane.gpus if i == index]
        total = max(tot for _t, _u, tot in samples) or 1
        colour = _GPU_COLOURS[k % len(_GPU_COLOURS)]
        points = " ".join(
            f"{scale.x(t)},{round(top + height - height * used / total, 1)}"
            for t, used, _tot in samples
        )
        peak = max(used for _t, used, _tot in samples)
        out.append(
            f'<polyline class="gpu" data-gpu="{index}" points="{points}" fill="none" stroke="{colour}" stroke-width="1.5"/>'
        )
        out.append(
            f'<text x="{LEFT + 4 + 170 * k}" y="{top + 10}" fill="{colour}">GPU {index}: peak '
            f"{escape(format_bytes(peak))} of {escape(format_bytes(total))}</text>"
        )
    return out


def _marks(lane: Lane, top: int, scale: _Scale) -> list[str]:
    out = []
    bottom = top + LANE_HEIGHT - 20
    if lane.failure is not None:
        t, failure = lane.failure
        x = scale.x(t)
        label = (
            f"{failure.failure_class.value} at line {failure.line_number}"
            if failure.line_number
            else failure.failure_class.value
        )
        out.append(
            f'<line class="failure" x1="{x}" y1="{top - 4}" x2="{x}" y2="{bottom}" stroke="#d62728" stroke-width="2">'
            f"<title>{escape(failure.summary)}</title></line>"
        )
        anchor = "end" if x > WIDTH / 2 else "start"
        dx = -4 if anchor == "end" else 4
        out.append(
            f'<text x="{x + dx}" y="{bottom - 2}" fill="#d62728" text-anchor="{anchor}" font-weight="bold">{escape(label)}</text>'
        )
    if lane.ready_t is not None:
        x = scale.x(lane.ready_t)
        out.append(
            f'<line class="ready" x1="{x}" y1="{top - 4}" x2="{x}" y2="{bottom}" stroke="#2ca02c" stroke-width="2"/>'
        )
        out.append(
            f'<text x="{x - 4}" y="{bottom - 2}" fill="#2ca02c" text-anchor="end" font-weight="bold">ready at {scale.label(lane.ready_t)}</text>'
        )
    return out


def _axis(scale: _Scale, y: int) -> list[str]:
    out = [f'<line x1="{LEFT}" y1="{y}" x2="{WIDTH - RIGHT}" y2="{y}" stroke="#333"/>']
    step = _step(scale.end) if scale.unit == "s" else _line_step(scale.end)
    t = 0.0
    while t <= scale.end + 1e-9:
        x = scale.x(t)
        out.append(f'<line x1="{x}" y1="{y}" x2="{x}" y2="{y + 5}" stroke="#333"/>')
        out.append(
            f'<text x="{x}" y="{y + 18}" text-anchor="middle">{escape(format_seconds(t))}</text>'
        )
        t += step
    return out


def _line_step(end: float) -> float:
    """A round step of log lines giving at most 10 ticks."""
    scale = 1.0
    while True:
        for step in (scale, 2 * scale, 5 * scale):
            if end / step <= 10:
                return step
        scale *= 10


def _step(end: float) -> float:
    """A round tick step giving 5 to 10 ticks over ``end`` seconds."""
    for step in (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600):
        if end / step <= 10:
            return float(step)
    return end / 10
