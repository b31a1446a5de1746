"""The fleet table of ``bringup status --hosts FILE``: one row per service.

``format_fleet`` returns plain lines (fixed columns); ``print_fleet`` writes a rich table on a
terminal and those lines otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TextIO

from rich.table import Table

from bringup.core.fleet import FleetRow, GpuUse
from bringup.render.console import make_console
from bringup.render.live import is_terminal
from bringup.units import format_bytes

HEADERS = ("HOST", "UNIT", "STATE", "PHASE", "READY SINCE", "GPUS", "LAST FAILURE")
_STYLE = {"ready": "green", "failed": "red", "starting": "yellow"}


def format_gpus(gpus: Sequence[GpuUse]) -> str:
    """``0: 70.00 GiB/80.00 GiB, 1: ...``, or ``-``."""
    return (
        ", ".join(
            f"{g.index}: {format_bytes(g.used_bytes)}/{format_bytes(g.total_bytes)}" for g in gpus
        )
        or "-"
    )


def cells(row: FleetRow) -> tuple[str, ...]:
    """The row's cells, in ``HEADERS`` order; an unreachable host shows its error as the failure."""
    if row.error is not None:
        return (row.host, row.unit, "unreachable", "-", "-", "-", row.error)
    state = (
        f"{row.verdict} ({row.state})"
        if row.verdict and row.state
        else (row.verdict or row.state or "?")
    )
    return (
        row.host,
        row.unit,
        state,
        row.phase or "-",
        row.ready_since or "-",
        format_gpus(row.gpus),
        row.last_failure or "-",
    )


def format_fleet(rows: Sequence[FleetRow]) -> list[str]:
    """Plain, aligned lines: a header, then one line per service."""
    table = [HEADERS, *(cells(r) for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(HEADERS) - 1)]
    return [
        "  ".join(
            [*(c.ljust(w) for c, w in zip(line[:-1], widths, strict=True)), line[-1]]
        ).rstrip()
        for line in table
    ]


def print_fleet(rows: Sequence[FleetRow], stream: TextIO, environ: Mapping[str, str]) -> None:
    """A rich table on a terminal, the plain lines otherwise."""
    if not is_terminal(stream, environ):
        for line in format_fleet(rows):
            stream.write(line + "\n")
        stream.flush()
        return
    table = Table(*HEADERS, box=None, header_style="bold")
    for row in rows:
        style = "red" if row.error is not None else _STYLE.get(row.verdict or "", "")
        table.add_row(*cells(row), style=style)
    make_console(stream, environ).print(table)
