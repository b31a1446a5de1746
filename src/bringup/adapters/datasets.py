"""Prompts for ``bringup bench --dataset FILE``, in the formats ``vllm bench serve`` takes.

- **ShareGPT** (``--dataset-name sharegpt``): a JSON array of conversations, each
  ``{"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", ...}, ...]}``
  (``"role"``/``"content"`` turns are accepted too). As vLLM does, a conversation needs at
  least two turns, and its first turn is the prompt.
- **JSONL** (``--dataset-name custom``): one JSON object per line with a ``"prompt"`` field;
  a line that holds a ShareGPT conversation is taken the same way as above.

Both are streamed, entry by entry, and read only as far as the prompts needed: the file
comes through :mod:`bringup.adapters.files` (type checked, never blocking) in blocks of
:data:`BLOCK_BYTES`; the array is cut into its entries with ``json.JSONDecoder.raw_decode``
over a buffer that holds the entry being read and one block, and a JSONL file is cut at its
newlines. Memory is bounded by the largest entry (refused past :data:`MAX_ENTRY_BYTES`),
never by the file: ShareGPT_V3 is about 0.7 GB. A malformed file is one
:class:`~bringup.errors.InputError` line saying where and what was expected.
"""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Iterator
from typing import Any, BinaryIO

from bringup.adapters import files
from bringup.errors import InputError

BLOCK_BYTES = 1024 * 1024
MAX_ENTRY_BYTES = 16 * 1024 * 1024  # characters of one entry (or line); real ones: kB
HINT = (
    'give a ShareGPT JSON (a list of {"conversations": [...]}) or a JSONL file with a '
    '"prompt" per line'
)
_WHITESPACE = " \t\n\r"
_DECODER = json.JSONDecoder()


def load_prompts(
    path: str,
    limit: int,
    *,
    block_bytes: int = BLOCK_BYTES,
    max_entry_bytes: int = MAX_ENTRY_BYTES,
) -> list[str]:
    """Up to ``limit`` non-empty prompts from the dataset at ``path``, in file order."""
    out: list[str] = []
    with files.open_file(path, what="dataset", hint=HINT) as f:
        reader = _Text(f, path, block_bytes)
        if reader.first_char() == "[":
            entries = _array_entries(reader, path, max_entry_bytes)
        else:
            entries = _line_entries(reader, path, max_entry_bytes)
        for item in entries:
            prompt = prompt_of(item)
            if prompt:
                out.append(prompt)
                if len(out) >= limit:
                    break
    if not out:
        raise InputError(f"dataset {files.shown(path)}: no prompts found", hint=HINT)
    return out


class _Text:
    """The file as UTF-8 text, in blocks, to the size it had when opened (a leading BOM dropped)."""

    def __init__(self, f: BinaryIO, path: str, block_bytes: int) -> None:
        size = os.fstat(f.fileno()).st_size
        self.path = path
        self.block_bytes = block_bytes
        self._blocks = files.iter_blocks(
            f, path=path, what="dataset", block_bytes=block_bytes, limit=size
        )
        self._utf8 = codecs.getincrementaldecoder("utf-8-sig")("strict")
        self.buf = ""  # text read and not yet consumed
        self.pos = 0  # where the unconsumed text starts in buf
        self.consumed = 0  # characters dropped from the front of buf so far
        self.eof = False

    def more(self, at_least: int = 0) -> bool:
        """Append at least one block (``at_least`` characters when asked); False at the end."""
        if self.eof:
            return False
        if self.pos:
            self.consumed += self.pos
            self.buf, self.pos = self.buf[self.pos :], 0
        parts: list[str] = []
        got = 0
        while not parts or got < at_least:
            block = next(self._blocks, None)
            try:
                text = self._utf8.decode(block or b"", final=block is None)
            except UnicodeDecodeError as exc:
                raise InputError(
                    f"dataset {files.shown(self.path)}: not UTF-8 text ({exc.reason})", hint=HINT
                ) from None
            parts.append(text)
            got += len(text)
            if block is None:
                self.eof = True
                break
        self.buf += "".join(parts)
        return True

    def skip_space(self) -> str:
        """The next non-blank character ('' at the end), not consumed."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WHITESPACE:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def first_char(self) -> str:
        return self.skip_space()

    def offset(self) -> int:
        """Characters from the start of the file to the unconsumed text."""
        return self.consumed + self.pos


def _array_entries(reader: _Text, path: str, max_entry: int) -> Iterator[Any]:
    """Each entry of a top-level JSON array, decoded one at a time."""
    reader.pos += 1  # the "[" (first_char saw it)
    if reader.skip_space() == "]":
        _end(reader, path)
        return
    number = 0
    while True:
        number += 1
        yield _decode_one(reader, path, number, max_entry)
        sep = reader.skip_space()
        if sep == ",":
            reader.pos += 1
            if reader.skip_space() == "":
                raise _bad(reader, path, f"the file ends after entry {number} and a comma")
        elif sep == "]":
            _end(reader, path)
            return
        elif sep == "":
            raise _bad(reader, path, f"the file ends inside the list, after entry {number}")
        else:
            raise _bad(reader, path, f"expected ',' or ']' after entry {number}, found {sep!r}")


def _end(reader: _Text, path: str) -> None:
    reader.pos += 1  # the "]"
    if reader.skip_space() != "":
        raise _bad(reader, path, "extra data after the list")


# A value ending this close to the end of what was read may go on in the next block ("12"
# of "123", "tru", a \uXXXX escape): it is decoded again with more text.
_MARGIN = 16


def _decode_one(reader: _Text, path: str, number: int, max_entry: int) -> Any:
    """The JSON value at the reader's position; reads more until it is whole (or too large)."""
    while True:
        near_end = len(reader.buf) - _MARGIN
        try:
            item, end = _DECODER.raw_decode(reader.buf, reader.pos)
        except json.JSONDecodeError as exc:
            cut = exc.pos >= near_end or exc.msg.startswith("Unterminated string")
            if cut and _grow(reader, path, number, max_entry):
                continue
            msg = exc.msg.removesuffix(" starting at")  # "Unterminated string starting at"
            raise _bad(reader, path, f"entry {number}: {msg}", at=exc.pos) from None
        except RecursionError:
            raise _bad(reader, path, f"entry {number} is nested too deeply") from None
        if end >= near_end and _grow(reader, path, number, max_entry):
            continue
        reader.pos = end
        return item


def _grow(reader: _Text, path: str, number: int, max_entry: int) -> bool:
    """Read more for an entry not yet whole (doubling what is held, so a large entry is
    decoded a few times, not once per block); False at the end of the file."""
    held = len(reader.buf) - reader.pos
    if held > max_entry:
        raise InputError(
            f"dataset {files.shown(path)}: entry {number} is larger than "
            f"{max_entry // (1024 * 1024)} MiB",
            hint=HINT,
        )
    return reader.more(at_least=held)


def _line_entries(reader: _Text, path: str, max_entry: int) -> Iterator[Any]:
    """Each non-blank line of a JSONL file, decoded."""
    number = 0
    while reader.pos < len(reader.buf) or reader.more():
        number += 1
        newline = reader.buf.find("\n", reader.pos)
        while newline < 0 and not reader.eof:
            held = len(reader.buf) - reader.pos
            if held > max_entry:
                raise InputError(
                    f"dataset {files.shown(path)}: line {number} is longer than "
                    f"{max_entry // (1024 * 1024)} MiB",
                    hint=HINT,
                )
            reader.more(at_least=held)  # the held text moves to the front of the buffer
            newline = reader.buf.find("\n", held)
        if newline < 0:
            newline = len(reader.buf)
        line = reader.buf[reader.pos : newline]
        reader.pos = newline + 1 if newline < len(reader.buf) else newline
        if line.strip():
            try:
                yield json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                raise InputError(
                    f"dataset {files.shown(path)}: line {number} is not a JSON object", hint=HINT
                ) from None


def _bad(reader: _Text, path: str, what: str, *, at: int | None = None) -> InputError:
    where = reader.consumed + (reader.pos if at is None else at)
    return InputError(
        f"dataset {files.shown(path)}: not valid JSON ({what}, at character {where:,})", hint=HINT
    )


def prompt_of(item: Any) -> str | None:
    """The prompt of one dataset entry: ``prompt``, or a conversation's first turn."""
    if isinstance(item, str):
        return item or None
    if not isinstance(item, dict):
        return None
    prompt = item.get("prompt")
    if isinstance(prompt, str):
        return prompt or None
    turns = item.get("conversations", item.get("conversation"))
    if not isinstance(turns, list) or len(turns) < 2 or not isinstance(turns[0], dict):
        return None
    value = turns[0].get("value", turns[0].get("content"))
    return value if isinstance(value, str) and value else None
