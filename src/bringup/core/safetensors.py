"""Pure safetensors header reading: bounded length, JSON, dtypes and byte spans.

A safetensors file is an 8-byte little-endian header length ``N``, ``N`` bytes of JSON
(``{"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}``)
and the tensor data. Offsets are relative to the start of the data, spans must tile the
data exactly, and the file is ``8 + N + max(end)`` bytes long.

The adapter hands in the first bytes of the file (:data:`PREFIX_BYTES`) and then, once
:func:`read_prefix` has bounded the length, the header bytes. Nothing here allocates
according to a length read from the file before checking it.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any, TypeGuard

from bringup.core.checkpoint import STOPPED, Problem, TensorInfo, fetch_again, format_size

LENGTH_BYTES = 8
PREFIX_BYTES = 1024  # enough for the length and a whole git-lfs pointer file
MAX_HEADER_BYTES = 100_000_000  # the safetensors library refuses headers above 100 MB
LFS_MAGIC = b"version https://git-lfs"

# bits per element of every dtype the safetensors format defines
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "I64": 64,
    "U64": 64,
    "F64": 64,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
}


@dataclass(frozen=True, slots=True)
class Prefix:
    """What the first bytes say: the header length, or the problem that stops reading."""

    header_bytes: int | None  # N, already bounded; None when a problem stops reading
    problem: Problem | None


def read_prefix(prefix: bytes, file_size: int, file: str) -> Prefix:
    """Classify the first bytes of a file: empty, git-lfs pointer, too short, absurd length."""
    if file_size == 0:
        return Prefix(
            None,
            Problem(
                "truncated",
                file,
                "the file is empty (0 bytes)",
                fetch_again(file, "it is empty, the download never wrote it"),
            ),
        )
    if prefix.startswith(LFS_MAGIC):
        return Prefix(None, _lfs_problem(prefix, file))
    if file_size < LENGTH_BYTES or len(prefix) < LENGTH_BYTES:
        return Prefix(
            None,
            Problem(
                "truncated",
                file,
                f"the file is only {file_size} bytes",
                fetch_again(file, f"{file_size} bytes cannot hold a header"),
            ),
        )
    (length,) = struct.unpack("<Q", prefix[:LENGTH_BYTES])
    if length > MAX_HEADER_BYTES:
        return Prefix(
            None,
            Problem(
                "header_too_large",
                file,
                f"the header length field says {length} bytes (the limit is {format_size(MAX_HEADER_BYTES)})",
                fetch_again(file, "its first 8 bytes are not a safetensors header length"),
            ),
        )
    if LENGTH_BYTES + length > file_size:
        return Prefix(
            None,
            Problem(
                "truncated",
                file,
                f"the header alone needs {format_size(LENGTH_BYTES + length)}, "
                f"{format_size(file_size)} on disk",
                fetch_again(file, STOPPED),
            ),
        )
    return Prefix(int(length), None)


def _lfs_problem(prefix: bytes, file: str) -> Problem:
    size = ""
    for line in prefix.decode("utf-8", "replace").splitlines():
        if line.startswith("size ") and line[5:].strip().isdigit():
            size = f" of a {format_size(int(line[5:].strip()))} file"
    return Problem(
        "lfs_pointer",
        file,
        f"it is a git-lfs pointer{size}, not the weights",
        f"run `git lfs pull --include {file}` in the model folder, or download "
        "the file with `hf download`",
    )


def parse_header(
    header: bytes, file: str, file_size: int
) -> tuple[list[TensorInfo], list[Problem]]:
    """Parse the JSON header and check dtypes, spans and the file size."""
    try:
        data = json.loads(header.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        return [], [_invalid(file, f"the header is not valid JSON ({_short(exc)})")]
    if not isinstance(data, dict):
        return [], [_invalid(file, "the header is not a JSON object")]
    meta = data.get("__metadata__")
    if meta is not None and not isinstance(meta, dict):
        return [], [_invalid(file, "__metadata__ is not an object")]
    entries: list[tuple[TensorInfo, int, int]] = []
    for name, entry in data.items():
        if name == "__metadata__":
            continue
        parsed = _entry(name, entry, file)
        if parsed is None:
            return [], [
                _invalid(
                    file,
                    f"tensor {name!r} is not "
                    "{dtype: str, shape: [int...], data_offsets: [begin, end]}",
                )
            ]
        entries.append(parsed)
    data_size = file_size - LENGTH_BYTES - len(header)
    return [e[0] for e in entries], _check_dtypes(entries, file) + _check_spans(
        entries, file, data_size, len(header)
    )


def _entry(name: str, entry: Any, file: str) -> tuple[TensorInfo, int, int] | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("dtype"), str):
        return None
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    if not (_ints(shape) and _ints(offsets)) or len(offsets) != 2 or offsets[0] > offsets[1]:
        return None
    begin, end = offsets
    return TensorInfo(name, entry["dtype"], tuple(shape), end - begin, file), begin, end


def _ints(value: Any) -> TypeGuard[list[int]]:
    return isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
    )


def _check_dtypes(entries: list[tuple[TensorInfo, int, int]], file: str) -> list[Problem]:
    unknown: dict[str, list[str]] = {}
    for t, _, _ in entries:
        if t.dtype not in DTYPE_BITS:
            unknown.setdefault(t.dtype, []).append(t.name)
    return [
        Problem(
            "dtype_unknown",
            file,
            f"dtype {dtype!r} of {len(names)} tensors (e.g. {names[0]}) is not a safetensors dtype",
            fetch_again(
                file,
                f"no engine can read dtype {dtype!r}; the file was written by a "
                "broken tool or is damaged",
            ),
        )
        for dtype, names in unknown.items()
    ]


def _check_spans(
    entries: list[tuple[TensorInfo, int, int]], file: str, data_size: int, header_size: int
) -> list[Problem]:
    bad: list[str] = []
    for t, _, _ in entries:
        bits = DTYPE_BITS.get(t.dtype)
        if bits is not None and t.nbytes * 8 != t.n_elements * bits:
            want = (t.n_elements * bits + 7) // 8
            bad.append(
                f"{t.name} spans {t.nbytes} bytes, its shape {list(t.shape)} x {t.dtype} needs {want}"
            )
    cursor = 0
    for t, begin, end in sorted(entries, key=lambda e: (e[1], e[2])):
        if begin != cursor:
            what = (
                "overlaps the previous tensor"
                if begin < cursor
                else f"leaves a {begin - cursor}-byte gap"
            )
            bad.append(f"{t.name} at [{begin}, {end}) {what}")
        cursor = max(cursor, end)
    problems = []
    if bad:
        problems.append(
            Problem(
                "offsets_invalid",
                file,
                "; ".join(bad[:3]) + _more(len(bad)),
                fetch_again(file, "its tensor byte spans are inconsistent"),
            )
        )
    expected = LENGTH_BYTES + header_size + cursor
    on_disk = LENGTH_BYTES + header_size + data_size
    if cursor > data_size:
        problems.append(
            Problem(
                "truncated",
                file,
                f"the header says {format_size(expected)}, {format_size(on_disk)} on disk",
                fetch_again(file, STOPPED),
            )
        )
    elif cursor < data_size:
        problems.append(
            Problem(
                "offsets_invalid",
                file,
                f"{data_size - cursor} bytes follow the last tensor "
                f"(the header says {format_size(expected)}, {format_size(on_disk)} on disk)",
                fetch_again(file, "it is longer than its header says"),
            )
        )
    return problems


def _more(count: int) -> str:
    return f" (and {count - 3} more)" if count > 3 else ""


def _invalid(file: str, why: str) -> Problem:
    return Problem("header_invalid", file, why, fetch_again(file, "its header cannot be read"))


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= 80 else text[:77] + "..."
