"""What a file given as a log is when it is not one: empty, a weights file, or bytes with no
text line in them. General rule: a log is lines of text; a file whose first bytes are a
known binary format's header, or in which no line is text, gets that said, not a diagnosis
of a startup that "ends mid-startup"."""

from __future__ import annotations

import struct

SNIFF_BYTES = 1 << 20  # what is looked at: the first MiB


def is_text_line(line: bytes) -> bool:
    """A line of at least 4 characters, nearly all printable (valid UTF-8 letters count)."""
    text = line.rstrip(b"\r").decode("utf-8", "replace")
    if len(text) < 4:
        return False
    printable = sum(1 for c in text if c == "\t" or (c.isprintable() and c != "\ufffd"))
    return printable >= 0.95 * len(text)


def binary_format(head: bytes, size: int) -> str | None:
    """``safetensors`` / ``GGUF`` when the first bytes are that format's header."""
    if head.startswith(b"GGUF"):
        return "GGUF"
    if len(head) >= 10:
        (length,) = struct.unpack("<Q", head[:8])
        if 2 <= length <= size - 8 and head[8:9] == b"{":
            return "safetensors"
    return None


def not_a_log(head: bytes, size: int) -> str | None:
    """Why the file whose first bytes are ``head`` (of ``size`` in all) is not a log, or None.

    >>> not_a_log(b"", 0)
    'empty file'
    >>> not_a_log(b"\\x10\\x00\\x00\\x00\\x00\\x00\\x00\\x00{\\"a\\": 1}", 100)
    'this is a safetensors file, not a log'
    >>> not_a_log(bytes(range(256)) * 4, 1024)
    'no text lines'
    >>> not_a_log(b"INFO starting\\n", 14) is None
    True
    """
    if size == 0 or not head:
        return "empty file"
    kind = binary_format(head, size)
    if kind is not None:
        return f"this is a {kind} file, not a log"
    if size <= len(head) and not any(is_text_line(line) for line in head.split(b"\n")):
        return "no text lines"
    return None
