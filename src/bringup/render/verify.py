"""Human output of ``bringup verify``: a summary, one line per problem with its fix, a hash bar.

Lines are built as (text, style) pieces: on a colour terminal rich draws them, anywhere
else they are written as plain text, so ``verify --hash`` into a pipe or a file never
imports rich (its start-up is a tenth of hashing a 1 GiB file).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TextIO

from bringup.core.checkpoint import VerifyReport, format_size
from bringup.core.printable import printable
from bringup.core.words import count
from bringup.render.console import hanging, make_console, wants_color
from bringup.units import format_seconds

Piece = tuple[str, str | None]  # text, rich style (None: plain)
Line = list[Piece]


@dataclass(frozen=True, slots=True)
class HashStats:
    """How much ``--hash`` read, and how long it took."""

    files: int
    n_bytes: int
    seconds: float
    compared: int  # files that had a published digest to compare with


NOTHING_COMPARED = (
    "--hash: nothing to compare with: no published digest here (not a Hugging Face cache "
    "with blob names, and no --manifest), so the sha256 sums were computed but not checked"
)


def format_count(n: int) -> str:
    """A parameter count as people say it: ``'8.03B'``, ``'106.8K'``, ``'512'``."""
    for div, suffix in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")):
        if n >= div:
            value = n / div
            return f"{value:.2f}{suffix}" if value < 100 else f"{value:.1f}{suffix}"
    return str(n)


def format_parameters(n: int) -> str:
    """A model's size as plan says it: ``'70.6B'`` from a billion up, else ``format_count``'s
    (``'4.2M'``, never ``'0.0B'``).

    >>> format_parameters(70_553_706_496), format_parameters(4_200_000)
    ('70.6B', '4.20M')
    """
    return f"{n / 1e9:.1f}B" if n >= 10**9 else format_count(n)


def format_summary(report: VerifyReport, root: str) -> list[str]:
    """The summary lines, plain text."""
    total = sum(report.bytes_by_dtype.values())
    dtypes = ", ".join(f"{d} {format_size(b)}" for d, b in report.bytes_by_dtype.items()) or "none"
    noun = "file" if report.files == 1 else "files"
    return [
        f"checkpoint {printable(root)}",
        (
            f"  {report.format}: {report.files} {noun}, {count(report.tensors, 'tensor')}, "
            f"{format_count(report.parameters)} parameters, {format_size(total)} of tensor data"
        ),
        f"  by dtype: {dtypes}",
    ]


def format_hash_line(stats: HashStats) -> str:
    """One line about ``--hash``: files, bytes, time, throughput, how many were compared."""
    rate = stats.n_bytes / stats.seconds if stats.seconds > 0 else 0.0
    return (
        f"  sha256 of {stats.files} files ({format_size(stats.n_bytes)}) in "
        f"{format_seconds(stats.seconds)}, {format_size(int(rate))}/s; "
        f"{stats.compared} compared with a published digest"
    )


def report_lines(report: VerifyReport, root: str, stats: HashStats | None) -> list[Line]:
    """The summary, then each problem with its fix, then the verdict, as styled pieces."""
    lines: list[Line] = [[(line, None)] for line in format_summary(report, root)]
    lines += [[(f"  layout: {printable(note)}", None)] for note in report.layouts]
    if stats is not None:
        lines.append([(format_hash_line(stats), None)])
        if stats.compared == 0:
            lines.append([(f"  {NOTHING_COMPARED}", "yellow")])
    if report.ok and stats is not None and stats.compared == 0:
        lines.append([("OK", "green"), (": every header check passed; contents not checked", None)])
        return lines
    if report.ok:
        lines.append(
            [("OK", "green"), (": every check passed; the checkpoint is complete and intact", None)]
        )
        return lines
    noun = "problem" if len(report.problems) == 1 else "problems"
    lines.append([("FAILED", "red"), (f": {len(report.problems)} {noun}", None)])
    for p in report.problems:
        where = printable(p.file or "(checkpoint)")
        lines.append([("  ", None), (p.kind, "red"), (f" {where}: {printable(p.detail)}", None)])
        lines.append([(f"    fix: {p.fix}", None)])
    return lines


def print_report(
    stream: TextIO,
    environ: Mapping[str, str],
    report: VerifyReport,
    root: str,
    stats: HashStats | None,
) -> None:
    """Print the report to ``stream``: in colour on a colour terminal, else as plain text."""
    lines = report_lines(report, root, stats)
    if not wants_color(stream, environ):
        stream.write("".join("".join(text for text, _ in line) + "\n" for line in lines))
        return
    from rich.text import Text

    console = make_console(stream, environ)
    for line in lines:
        text = Text.assemble(*((text, style or "") for text, style in line))
        console.print(hanging(text, console.width), crop=False, overflow="ignore")


@contextlib.contextmanager
def hash_progress(
    stream: TextIO, environ: Mapping[str, str], total_bytes: int, *, enabled: bool = True
) -> Iterator[Callable[[int], None] | None]:
    """A transient progress bar over all bytes to hash; yields its advance callback (None off a terminal)."""
    terminal = wants_color(stream, environ) or bool(getattr(stream, "isatty", lambda: False)())
    console = make_console(stream, environ) if enabled and terminal else None
    if console is None or not console.is_terminal:
        yield None
        return
    from rich.progress import (  # lazy: only a terminal ever draws the bar
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    columns = (
        TextColumn("sha256"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("sha256", total=total_bytes)
        yield lambda n_bytes: bar.advance(task, n_bytes)
