"""One place that decides colour, width and terminal-ness, from the environment given."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # imported in make_console: wants_color alone does not pay for rich
    from rich.console import Console


def wants_color(stream: TextIO, environ: Mapping[str, str]) -> bool:
    """Colour only on a terminal, never with NO_COLOR set (any value) or TERM=dumb."""
    if "NO_COLOR" in environ or environ.get("TERM") == "dumb":
        return False
    if environ.get("FORCE_COLOR"):
        return True
    return bool(getattr(stream, "isatty", lambda: False)())


def make_console(
    stream: TextIO, environ: Mapping[str, str], *, width: int | None = None
) -> Console:
    """A rich Console writing to ``stream`` that respects NO_COLOR and non-terminals."""
    from rich.console import Console

    color = wants_color(stream, environ)
    return Console(
        file=stream,
        no_color=not color,
        color_system="auto" if color else None,
        force_terminal=color if color else None,
        highlight=False,
        soft_wrap=not color,
        width=width if width is not None else (None if color else 100),
        emoji=False,
    )
