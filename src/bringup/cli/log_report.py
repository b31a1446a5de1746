"""The report of a log read afterwards (``diagnose --markdown``, ``bringup report RUN_DIR``):
the diagnosis, then one more pass over the log for the lines the report quotes."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from dataclasses import dataclass

from bringup import __version__
from bringup.cli.main import Context
from bringup.core.diagnosis import Diagnosis
from bringup.core.report.markdown import build_markdown
from bringup.core.report.model import ReportData
from bringup.core.report.recording import lane_from_log
from bringup.core.report.timeline import draw
from bringup.core.vocab import Engine


@dataclass(frozen=True)
class LogReport:
    """A diagnosed log and the report made of it."""

    diagnosis: Diagnosis
    data: ReportData
    lines: list[tuple[int, str]]


def read_log(path: str, ctx: Context) -> bytes | None:
    """The log held in memory when it is stdin (read once); None for a file (read twice)."""
    if path != "-":
        return None
    buffer = getattr(ctx.stdin, "buffer", None)
    data = (
        buffer.read() if buffer is not None else ctx.stdin.read().encode("utf-8", "surrogateescape")
    )
    return bytes(data)


def _blocks(path: str, held: bytes | None) -> Iterable[bytes]:
    from bringup.adapters import files

    if held is not None:
        yield held
        return
    hint = "pass a readable log file, or - to read stdin"
    with files.open_file(path, what="log file", hint=hint) as fh:
        size = os.fstat(fh.fileno()).st_size
        yield from files.iter_blocks(fh, path=path, what="log file", limit=size or None)


def log_report(
    path: str,
    engine: Engine | None,
    ctx: Context,
    *,
    title: str,
    source: str,
    command: tuple[str, ...] = (),
    exit_note: str | None = None,
    with_gpus: bool = False,
    held: bytes | None = None,
) -> LogReport:
    """Diagnose the log at ``path`` (``-``: stdin, or ``held``, stdin already read) and make
    its report."""
    from bringup.adapters import report_env
    from bringup.adapters.log_excerpt import excerpt
    from bringup.core.logfeed import diagnose_chunks
    from bringup.render.report import from_diagnosis

    held = held if held is not None else read_log(path, ctx)
    d = diagnose_chunks(_blocks(path, held), engine)
    cause = d.failure or d.after_ready
    lines, total = excerpt(_blocks(path, held), cause.line_number if cause else None)
    versions = (("bringup", __version__),)
    data = from_diagnosis(
        d,
        title=title,
        source=source,
        lines=lines,
        total_lines=total,
        versions=versions,
        gpus=report_env.gpus(None) if with_gpus else None,
        command=command,
        exit_note=exit_note,
    )
    return LogReport(d, data, lines)


def write_outputs(
    report: LogReport,
    args: argparse.Namespace,
    ctx: Context,
    argv: tuple[str, ...],
    target: str | None,
) -> None:
    """The Markdown (or, with ``--html``, HTML) report to ``target`` (``-``: stdout; None:
    none) and the timeline picture the flags ask for."""
    from bringup.cli.report_flags import report_redactor, write_text

    red = report_redactor(args, ctx, argv)
    markdown = build_markdown(report.data, red)
    svg = None
    if getattr(args, "timeline", None) or getattr(args, "html", False):
        d = report.diagnosis
        lane, unit = lane_from_log(d.timeline, d.failure or d.after_ready, report.lines)
        svg = draw([lane], red.text(f"{report.data.title}: {d.outcome.value}"), unit)
    if getattr(args, "timeline", None) and svg is not None:
        write_text(args.timeline, svg, ctx.stdout)
    if target is None:
        return
    if getattr(args, "html", False):
        from bringup.render.report_html import html_page

        write_text(target, html_page(markdown, svg, red.text(report.data.title)), ctx.stdout)
    else:
        write_text(target, markdown, ctx.stdout)
