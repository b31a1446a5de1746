"""``bringup bench`` for people: the metric table, the plan's decode lines, and an SVG plot.

Metric labels are exactly those ``vllm bench serve`` prints, one column per concurrency
level, so the numbers can be set side by side with vLLM's own benchmark.
"""

from __future__ import annotations

from collections.abc import Callable
from xml.sax.saxutils import escape

from rich.console import Console
from rich.table import Table

from bringup.core.bench_report import BenchReport, DecodeReport
from bringup.core.bench_stats import LevelStats
from bringup.core.server_metrics import ServerMetrics

Row = tuple[str, Callable[[LevelStats], float | int | None], str]

ROWS: tuple[Row, ...] = (
    ("Successful requests", lambda lv: lv.completed, "d"),
    ("Failed requests", lambda lv: lv.failed, "d"),
    ("Benchmark duration (s)", lambda lv: lv.duration, ".2f"),
    ("Total input tokens", lambda lv: lv.total_input_tokens, "d"),
    ("Total generated tokens", lambda lv: lv.total_output_tokens, "d"),
    ("Request throughput (req/s)", lambda lv: lv.request_throughput, ".2f"),
    ("Output token throughput (tok/s)", lambda lv: lv.output_throughput, ".2f"),
    ("Total Token throughput (tok/s)", lambda lv: lv.total_token_throughput, ".2f"),
    *(
        (f"{stat} {label} (ms)", (lambda lv, a=f"{key}_{metric}_ms": getattr(lv, a)), ".2f")
        for metric, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2EL"))
        for stat, key in (("Mean", "mean"), ("Median", "median"), ("P90", "p90"), ("P99", "p99"))
    ),
)


def format_value(value: float | int | None, spec: str) -> str:
    """A table cell: the number in ``spec`` format, or '-' when there is none."""
    return "-" if value is None else format(value, spec)


def format_summary(report: BenchReport) -> list[str]:
    """The lines above and below the table: what was measured, how, and the ceiling."""
    p = report.prompt
    return [
        f"Benchmark of {report.model} at {report.url} (/v1/{_path(report.endpoint)}, streaming)",
        (
            f"Prompts: {report.input_tokens} tokens requested, {p.tokens} used ({p.method}: {p.detail});"
            f" {report.output_tokens} output tokens per request"
        ),
    ]


def format_footer(report: BenchReport) -> list[str]:
    """Single-stream decode, the ceiling beside it, and how the run ended."""
    single = report.single_stream_decode_tokens_per_second
    lines = [
        "Single-stream decode: "
        + (
            "not measured (no successful request at concurrency 1)"
            if single is None
            else f"{single:.1f} tok/s (1000 / mean TPOT at concurrency 1)"
        ),
        *format_decode(report.decode),
    ]
    lines.extend(format_server_metrics(report))
    if report.stop_reason == "errors":
        lines.append("Stopped early: the server kept failing (errors above).")
    elif report.stop_reason == "duration":
        lines.append(
            "Cut short: the --duration bound ended a level before all its requests were sent."
        )
    if report.skipped_concurrency:
        lines.append("Not run: concurrency " + ",".join(map(str, report.skipped_concurrency)))
    for level in report.levels:
        lines.extend(
            f"Errors at concurrency {level.concurrency}: {e.count} x {e.message}"
            for e in level.errors
        )
    return lines


def format_decode(decode: DecodeReport) -> list[str]:
    """The plan's ceiling and expected speed, and measured over each; or why there is none."""
    plan = decode.plan
    if plan is None:
        return [f"Plan: {decode.note}"]
    lines = [f"Plan: {plan.ceiling_line()}", f"Plan: {plan.expected_line()}"]
    if decode.measured_over_ceiling is not None and decode.measured_over_expected is not None:
        lines.append(
            f"Measured / ceiling: {_ratio(decode.measured_over_ceiling)}; "
            f"measured / expected: {_ratio(decode.measured_over_expected)}"
        )
    elif decode.note:
        lines.append(f"Measured / ceiling: - ({decode.note})")
    return lines


def format_server_metrics(report: BenchReport) -> list[str]:
    """The server's /metrics before and after, when it has them."""
    load = report.server_metrics
    if load is None or (load.before is None and load.after is None):
        return []

    def one(m: ServerMetrics | None) -> str:
        if m is None:
            return "-"
        kv = "-" if m.kv_cache_usage_perc is None else f"{100 * m.kv_cache_usage_perc:.1f}%"
        run = "-" if m.num_requests_running is None else str(m.num_requests_running)
        wait = "-" if m.num_requests_waiting is None else str(m.num_requests_waiting)
        return f"KV cache {kv}, running {run}, waiting {wait}"

    return [f"Server /metrics: before {one(load.before)}; after {one(load.after)}"]


def _ratio(value: float) -> str:
    return f"{value:.2f}" if value >= 0.01 else f"{value:.2g}"


def format_table(levels: tuple[LevelStats, ...]) -> list[str]:
    """The metric table as plain fixed-width lines (vLLM's labels, one column per level)."""
    label_width = max(len(label) for label, _, _ in ROWS) + 1
    header = ["Concurrency", *(str(lv.concurrency) for lv in levels)]
    cells = [
        [f"{label}:", *(format_value(get(lv), spec) for lv in levels)] for label, get, spec in ROWS
    ]
    widths = [max(10, *(len(row[i]) for row in [header, *cells])) for i in range(1, len(header))]
    lines = []
    for row in [header, *cells]:
        left = row[0].ljust(label_width)
        lines.append(
            left + "".join(cell.rjust(w + 2) for cell, w in zip(row[1:], widths, strict=True))
        )
    return lines


def rich_table(levels: tuple[LevelStats, ...]) -> Table:
    """The metric table as a rich Table, for terminals."""
    table = Table(title="Serving benchmark", title_justify="left")
    table.add_column("Concurrency")
    for level in levels:
        table.add_column(str(level.concurrency), justify="right")
    for label, get, spec in ROWS:
        table.add_row(label, *(format_value(get(lv), spec) for lv in levels))
    return table


def print_report(report: BenchReport, console: Console) -> None:
    """Write the whole human report: summary, table (rich on a terminal), footer."""
    for line in format_summary(report):
        console.print(line, markup=False)
    if console.is_terminal:
        console.print(rich_table(report.levels))
    else:
        for line in format_table(report.levels):
            console.print(line, markup=False)
    for line in format_footer(report):
        console.print(line, markup=False)


def _path(endpoint: str) -> str:
    return "chat/completions" if endpoint == "chat" else "completions"


# --- the plot -------------------------------------------------------------------------------

_W, _H, _PAD = 900, 380, 60
_PANEL_W = (_W - 3 * _PAD) // 2
_PANEL_H = _H - 2 * _PAD
Series = list[tuple[str, list[float | None], str]]
_LATENCY_SERIES: tuple[tuple[str, str, str], ...] = (
    ("Median TTFT (ms)", "median_ttft_ms", "#d62728"),
    ("P99 TTFT (ms)", "p99_ttft_ms", "#ff9896"),
    ("Mean TPOT (ms)", "mean_tpot_ms", "#1f77b4"),
    ("P99 ITL (ms)", "p99_itl_ms", "#9edae5"),
)


def render_svg(report: BenchReport) -> str:
    """Throughput and latency against concurrency, as a standalone SVG document."""
    levels = report.levels
    xs = [lv.concurrency for lv in levels]
    throughput: Series = [
        ("Output token throughput (tok/s)", [lv.output_throughput for lv in levels], "#2ca02c")
    ]
    latency: Series = [
        (name, [getattr(lv, attr) for lv in levels], color) for name, attr, color in _LATENCY_SERIES
    ]
    plan = report.decode.plan
    guide = (plan.ceiling_tokens_per_s, "planned batch-1 decode ceiling") if plan else None
    parts = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
            f'viewBox="0 0 {_W} {_H}" font-family="sans-serif" font-size="12">'
        ),
        f'<rect width="{_W}" height="{_H}" fill="white"/>',
        _text(_W / 2, 24, f"bringup bench: {report.model}", anchor="middle", size=15),
        *_panel(_PAD, "Throughput (tok/s)", xs, throughput, guide),
        *_panel(2 * _PAD + _PANEL_W, "Latency (ms)", xs, latency, None),
        "</svg>",
    ]
    return "\n".join(parts) + "\n"


def _panel(
    left: float, title: str, xs: list[int], series: Series, guide: tuple[float, str] | None
) -> list[str]:
    top = _PAD
    values = [v for _, ys, _ in series for v in ys if v is not None]
    y_max = _nice_max(max([*values, guide[0] if guide else 0.0, 1e-9]))
    out = [
        (
            f'<g class="panel"><rect x="{left}" y="{top}" width="{_PANEL_W}" height="{_PANEL_H}" '
            'fill="none" stroke="#888"/>'
        ),
        _text(left + _PANEL_W / 2, top - 12, title, anchor="middle"),
    ]
    out += _axes(left, top, xs, y_max)

    def point(i: int, v: float) -> tuple[float, float]:
        x = left + (_PANEL_W * (i + 0.5) / max(1, len(xs)))
        return x, top + _PANEL_H * (1 - v / y_max)

    if guide is not None:
        gy = point(0, guide[0])[1]
        out.append(
            f'<line x1="{left}" y1="{gy:.1f}" x2="{left + _PANEL_W}" y2="{gy:.1f}" '
            'stroke="#555" stroke-dasharray="6 4"/>'
        )
        out.append(_text(left + _PANEL_W - 4, gy - 4, guide[1], anchor="end", size=10))
    for n, (name, ys, color) in enumerate(series):
        pts = [point(i, v) for i, v in enumerate(ys) if v is not None]
        if len(pts) > 1:
            coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
            out.append(
                f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"/>'
            )
        out += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>' for x, y in pts]
        out.append(
            f'<rect x="{left + 8}" y="{top + 8 + 16 * n}" width="10" height="10" fill="{color}"/>'
        )
        out.append(_text(left + 22, top + 17 + 16 * n, name, size=10))
    out.append("</g>")
    return out


def _axes(left: float, top: float, xs: list[int], y_max: float) -> list[str]:
    out = []
    for k in range(5):
        v = y_max * k / 4
        y = top + _PANEL_H * (1 - k / 4)
        out.append(f'<line x1="{left - 4}" y1="{y:.1f}" x2="{left}" y2="{y:.1f}" stroke="#888"/>')
        out.append(_text(left - 6, y + 4, f"{v:g}", anchor="end", size=10))
    for i, c in enumerate(xs):
        x = left + _PANEL_W * (i + 0.5) / max(1, len(xs))
        out.append(_text(x, top + _PANEL_H + 16, str(c), anchor="middle", size=10))
    out.append(_text(left + _PANEL_W / 2, top + _PANEL_H + 34, "concurrency", anchor="middle"))
    return out


def _nice_max(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^k at or above ``value``."""
    scale = 10.0 ** len(str(int(value))) / 10 if value >= 1 else 1.0
    for step in (1, 2, 2.5, 5, 10):
        if step * scale >= value:
            return step * scale
    return value


def _text(x: float, y: float, text: str, *, anchor: str = "start", size: int = 12) -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}">'
        f"{escape(text)}</text>"
    )
