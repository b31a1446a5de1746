"""The lines of a log a report quotes: the last ones and those around the root-cause line,
read in one pass in constant memory (numbered from 1, split at ``\\n`` as the analyzer does).

Command line equivalent: ``tail -n 200 LOG`` and ``sed -n 'N-3,N+3p' LOG``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from bringup.adapters.process import decode_line

MAX_LINE_CHARS = 4000  # a report quotes no more of one line


def excerpt(
    blocks: Iterable[bytes], around: int | None, *, tail: int = 200, context: int = 3
) -> tuple[list[tuple[int, str]], int]:
    """(numbered lines: those within ``context`` of line ``around`` and the last ``tail``,
    in order; the number of lines in all)."""
    last: deque[tuple[int, str]] = deque(maxlen=tail)
    near: list[tuple[int, str]] = []
    n = 0
    carry = b""
    for block in blocks:
        data = carry + block
        lines = data.split(b"\n")
        carry = lines.pop()
        for raw in lines:
            n += 1
            _keep(n, raw, around, context, last, near)
    if carry:
        n += 1
        _keep(n, carry, around, context, last, near)
    merged = dict(near)
    merged.update(last)
    return sorted(merged.items()), n


def _keep(
    n: int,
    raw: bytes,
    around: int | None,
    context: int,
    last: deque[tuple[int, str]],
    near: list[tuple[int, str]],
) -> None:
    text = decode_line(raw[: MAX_LINE_CHARS * 4])[:MAX_LINE_CHARS]
    last.append((n, text))
    if around is not None and abs(n - around) <= context:
        near.append((n, text))
