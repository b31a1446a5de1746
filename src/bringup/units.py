"""Human units at the edge: sizes and durations in, bytes and seconds inside.

>>> parse_size("1000MiB")
1048576000
>>> parse_size("96GB")
96000000000
>>> parse_duration("2h")
7200.0
>>> format_bytes(61_740_000_000)
'57.50 GiB'
"""

from __future__ import annotations

import re

from bringup.errors import UsageError

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kKmMgGtTpP]?)(i?)([bB]?)\s*$")
_POW = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?", re.IGNORECASE)
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

KiB = 1024
MiB = 1024**2
GiB = 1024**3


def parse_size(text: str) -> int:
    """Parse ``"1000MiB"``, ``"80GiB"``, ``"96GB"`` or a plain byte count into bytes."""
    m = _SIZE.match(text)
    if not m:
        raise UsageError(f"not a size: {text!r}", hint="use e.g. 1000MiB, 80GiB, 96GB or bytes")
    number, prefix, binary, _ = m.groups()
    base = 1024 if binary else 1000
    return int(float(number) * base ** _POW[prefix.lower()])


def parse_duration(text: str) -> float:
    """Parse ``"300s"``, ``"5m"``, ``"2h"``, ``"1h30m"`` or plain seconds into seconds."""
    stripped = text.strip()
    parts = _DURATION.findall(stripped)
    if not parts or _DURATION.sub("", stripped).strip():
        raise UsageError(f"not a duration: {text!r}", hint="use e.g. 300s, 5m, 2h or 1h30m")
    return sum(float(n) * _SECONDS[(u or "s").lower()] for n, u in parts)


def format_bytes(n: float) -> str:
    """Format bytes in binary units with two decimals (``'57.50 GiB'``)."""
    sign = "-" if n < 0 else ""
    value = float(abs(n))
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{sign}{value:.0f} {unit}" if unit == "B" else f"{sign}{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_seconds(seconds: float) -> str:
    """Format a duration compactly: ``'850ms'``, ``'42.0s'``, ``'3m12s'``, ``'1h04m'``."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"
