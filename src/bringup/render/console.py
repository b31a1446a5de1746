"""One place that decides colour, width and terminal-ness, from the environment given."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # imported in make_console: wants_color alone does not pay for rich
    from rich.console import Console
    from rich.text import Text

HANG = 4  # a continuation is indented this much more than its line (deeper than its sub-lines, 2)


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
    """A rich Console writing to ``stream`` that respects NO_COLOR and non-terminals; its
    width (``COLUMNS``) and terminal type come from ``environ`` too, not from os.environ."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            """The reader went away: rich would exit 1 here; the command line ends it as it
            ends any other write to a closed pipe (``cli.main``)."""
            self.quiet = True
            raise BrokenPipeError

    color = wants_color(stream, environ)
    return _Console(
        file=stream,
        no_color=not color,
        color_system="auto" if color else None,
        force_terminal=color if color else None,
        highlight=False,
        soft_wrap=not color,
        width=width if width is not None else (None if color else 100),
        emoji=False,
        _environ=dict(environ),
    )


def fit(console: Console, renderable: object) -> object:
    """``renderable`` as ``console`` should print it: a line of text wrapped with a hanging
    indent (:func:`hanging`) where the console wraps at all (a terminal), anything else as it
    is (tables lay themselves out; a pipe's console never wraps)."""
    from rich.console import Group
    from rich.text import Text

    if console.soft_wrap:
        return renderable
    if isinstance(renderable, Text):
        return hanging(renderable, console.width)
    if isinstance(renderable, Group):
        return Group(*(fit(console, r) for r in renderable.renderables))  # type: ignore[arg-type]
    return renderable


def hanging(text: Text, width: int) -> Text:
    """``text`` wrapped at ``width`` columns, each continuation indented :data:`HANG` more
    than the line's own indent, so a wrapped path or problem reads as one item (rich's own
    wrapping starts continuations at column 0). Words break only where one is longer than a
    line (a long path), never otherwise.

    >>> from rich.console import Console
    >>> from rich.text import Text
    >>> print(hanging(Text("  fix: fetch the file again"), 18).plain)
      fix: fetch
          the file
          again
    """
    from rich.console import Console
    from rich.text import Text

    plain = text.plain
    indent = len(plain) - len(plain.lstrip(" ")) + HANG
    if len(plain) <= width or width <= indent + 8:
        return text
    rows = text.wrap(Console(width=width, _environ={}), width - indent, overflow="fold")
    out = Text()
    for i, row in enumerate(rows):
        row.rstrip()
        if i:
            out.append("\n" + " " * indent)
        out.append_text(row)
    return out
