"""A spinner for work that takes seconds and prints nothing meanwhile (measuring this machine's
memory bandwidth, about 5 s): a rich status on the stream given, only on a terminal, never with
NO_COLOR or TERM=dumb, and never under ``--json``; elsewhere nothing at all. It clears itself,
so what the command prints afterwards is unchanged.

    with busy(ctx.stderr, ctx.environ)("measuring memory bandwidth (2 threads)"):
        measure()
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import TextIO

from bringup.render.console import make_console, wants_color

Busy = Callable[[str], AbstractContextManager[object]]


def quiet(_text: str) -> AbstractContextManager[object]:
    """No spinner (not a terminal, NO_COLOR, ``--json``, or a caller without a stream)."""
    return contextlib.nullcontext()


def busy(stream: TextIO, environ: Mapping[str, str], *, json_output: bool = False) -> Busy:
    """A spinner factory for ``stream``: ``busy(...)(text)`` is a context manager that shows
    ``text`` with a spinner while it is open (on a terminal), or does nothing."""
    if json_output or not wants_color(stream, environ):
        return quiet

    @contextlib.contextmanager
    def spinning(text: str) -> Iterator[object]:
        console = make_console(stream, environ)
        with console.status(text, spinner="dots") as status:
            yield status

    return spinning
