"""Reading what systemd reports about a unit's run: journal messages and the main exit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def journal_message(value: Any) -> str | None:
    """A journal MESSAGE: a string, or an array of bytes when it was not valid UTF-8."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, int) for b in value):
        return bytes(b & 0xFF for b in value).decode("utf-8", errors="replace")
    return None


def unit_exit_code(state: Mapping[str, str]) -> int | None:
    """``ExecMainStatus``/``ExecMainCode`` of ``systemctl show`` as an exit status (negative: a signal)."""
    try:
        status = int(state.get("ExecMainStatus", ""))
    except ValueError:
        return None
    code = state.get("ExecMainCode", "")
    return -status if code in ("2", "3", "killed", "dumped") else status
