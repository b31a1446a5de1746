"""Names on one printable line: what a file or folder name looks like in a message.

A POSIX name may hold any byte but ``/`` and NUL. Python hands undecodable bytes over as
lone surrogates (``surrogateescape``); printed raw, they crash a UTF-8 stream, a newline
splits a one-line error, and an escape sequence drives the terminal. ``printable`` shows
invalid UTF-8 as ``\\xNN`` and control or invisible formatting characters (newlines, ESC,
right-to-left overrides) as ``\\n``, ``\\x1b``, ``\\u202e``; everything else is unchanged.
"""

from __future__ import annotations

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str) -> str:
    """``text`` with undecodable bytes and non-printable characters escaped."""
    if text.isprintable():
        return text
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
