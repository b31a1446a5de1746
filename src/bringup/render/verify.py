"""Human output of ``bringup verify``: a summary, one line per problem with its fix, a hash bar."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape

from bringup.core.checkpoint import VerifyReport, format_size
from bringup.core.printable import printable
from bringup.units import format_seconds


@dataclass(frozen=True, slots=True)
class HashStats:
    """How much ``--hash`` read, and how long it took."""

    files: int
    n_bytes: int
    seconds: float
    compared: int  # files that had a published digest to compare with


def format_count(n: int) -> str:
    """A parameter count as people say it: ``'8.03B'``, ``'106.8K'``, ``'512'``."""
    for div, suffix in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")):
        if n >= div:
            value = n / div
            return f"{value:.2f}{suffix}" if value < 100 else f"{value:.1f}{suffix}"
    return str(n)


def format_summary(report: VerifyReport, root: str) -> list[str]:
    """The summary lines (plain text with rich markup escaped)."""
    total = sum(report.bytes_by_dtype.values())
    dtypes = ", ".join(f"{d} {format_size(b)}" for d, b in report.bytes_by_dtype.items()) or "none"
    noun = "file" if report.files == 1 else "files"
    return [
        f"checkpoint {escape(printable(root))}",
        (
            f"  {report.format}: {report.files} {noun}, {report.tensors} tensors, "
            f"{format_count(report.parameters)} parameters, {format_size(total)} of tensor data"
        ),
        f"  by dtype: {escape(dtypes)}",
    ]


def format_hash_line(stats: HashStats) -> str:
    """One line about ``--hash``: files, bytes, time, throughput, how many were compared."""
    rate = stats.n_bytes / stats.seconds if stats.seconds > 0 else 0.0
    return (
        f"  sha256 of {stats.files} files ({format_size(stats.n_bytes)}) in "
        f"{format_seconds(stats.seconds)}, {format_size(int(rate))}/s; "
        f"{stats.compared} compared with a published digest"
    )


def print_report(
    console: Console, report: VerifyReport, root: str, stats: HashStats | None
) -> None:
    """Print the summary, then each problem with its fix, then the verdict."""
    for line in format_summary(report, root):
        console.print(line)
    if stats is not None:
        console.print(format_hash_line(stats))
    if report.ok:
        console.print(
            "[green]OK[/green]: every check passed; the checkpoint is complete and intact"
        )
        return
    noun = "problem" if len(report.problems) == 1 else "problems"
    console.print(f"[red]FAILED[/red]: {len(report.problems)} {noun}")
    for p in report.problems:
        console.print(
            f"  [red]{p.kind}[/red] {escape(printable(p.file or '(checkpoint)'))}: {escape(printable(p.detail))}"
        )
        console.print(f"    fix: {escape(p.fix)}")


@contextlib.contextmanager
def hash_progress(
    console: Console, total_bytes: int, *, enabled: bool = True
) -> Iterator[Callable[[int], None] | None]:
    """A transient progress bar over all bytes to hash; yields its advance callback (None off a terminal)."""
    if not (enabled and console.is_terminal):
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
