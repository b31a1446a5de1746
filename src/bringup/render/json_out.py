"""Dataclasses and enums to JSON, the same way for every command's ``--json``.

Every object written goes through here and gets ``schema_version`` first (each element of a
list written at the top): scripts can rely on it. Raise ``SCHEMA_VERSION`` when a field is
removed or changes meaning, never for a field added.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

SCHEMA_VERSION = 1


def to_jsonable(value: Any) -> Any:
    """Convert dataclasses, enums, tuples and mappings into plain JSON values.

    Dataclass fields keep their names unless the field's metadata names its JSON key:
    ``field(metadata={"json": "class"})`` writes ``failure_class`` as ``class``, the spelling
    ``diagnose`` and ``run`` use (``plan``'s verdict keeps ``failure_class``, as its issue says);
    ``field(metadata={"json": None})`` keeps a field out of JSON (for people only).
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            key = f.metadata.get("json", f.name)
            if key is None:
                continue
            out[key] = to_jsonable(getattr(value, f.name))
        return out
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (str, bytes)):
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    if isinstance(value, Sequence):
        return [to_jsonable(v) for v in value]
    return value


def versioned(value: Any) -> Any:
    """``value`` as JSON values, with ``schema_version`` first in it (or in each object of it).

    >>> versioned({"outcome": "ready"}), versioned([{"a": 1}, 2])
    ({'schema_version': 1, 'outcome': 'ready'}, [{'schema_version': 1, 'a': 1}, 2])
    """
    data = to_jsonable(value)
    if isinstance(data, dict):
        return {"schema_version": SCHEMA_VERSION, **data}
    if isinstance(data, list):
        return [versioned(item) if isinstance(item, dict) else item for item in data]
    return data


def dumps(value: Any, *, indent: int | None = 2) -> str:
    """Serialise ``value`` (dataclasses allowed) to a JSON string, with ``schema_version``."""
    return json.dumps(versioned(value), indent=indent, ensure_ascii=False, default=str)


def write_line(value: Any, stream: TextIO) -> None:
    """One JSON Lines object (compact, one line, with ``schema_version``), flushed."""
    stream.write(dumps(value, indent=None) + "\n")
    stream.flush()


def print_json(value: Any, stream: TextIO, *, indent: int | None = 2) -> None:
    """Write ``value`` as JSON followed by a newline, and flush."""
    stream.write(dumps(value, indent=indent) + "\n")
    stream.flush()
