"""Read GGUF files (single or split) with the ``gguf`` package; corruption becomes findings.

``GGUFReader`` memory-maps the file and raises whatever numpy or struct raise on bad input
(ValueError, IndexError, struct.error, KeyError, OverflowError...). Every such exception
stops here and becomes a ``gguf_invalid`` problem: nothing from a file's contents can
raise past this module.
"""

from __future__ import annotations

import dataclasses
import os
import re
import struct
from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import Any, BinaryIO

from bringup.adapters import files
from bringup.core.checkpoint import (
    STOPPED,
    Checkpoint,
    Problem,
    TensorInfo,
    fetch_again,
    format_size,
)
from bringup.core.safetensors import LFS_MAGIC
from bringup.errors import InputError

SPLIT_NAME = re.compile(r"^(?P<base>.*)-(?P<part>\d{5})-of-(?P<count>\d{5})\.gguf$")
MAX_ARRAY_ITEMS = 64  # arrays longer than this (vocabularies, merges) are left out of metadata


def first_part(path: Path) -> Path:
    """For ``name-0000k-of-0000n.gguf`` the path of part 1; any other path unchanged."""
    m = SPLIT_NAME.match(path.name)
    if m is None:
        return path
    return path.with_name(f"{m['base']}-00001-of-{m['count']}.gguf")


def split_parts(first: Path) -> list[Path]:
    """All part paths of a split GGUF (just ``first`` when the name is not a split name)."""
    m = SPLIT_NAME.match(first.name)
    if m is None:
        return [first]
    count = int(m["count"])
    return [
        first.with_name(f"{m['base']}-{i:05d}-of-{m['count']}.gguf") for i in range(1, count + 1)
    ]


@dataclass(frozen=True, slots=True)
class _Part:
    tensors: list[TensorInfo]
    metadata: dict[str, Any]
    problem: Problem | None
    size: int = 0


def scan_gguf(first: Path) -> Checkpoint:
    """Scan a GGUF model (all parts of a split one): tensors, metadata and problems."""
    parts = split_parts(first_part(first))
    problems: list[Problem] = []
    tensors: list[TensorInfo] = []
    metadata: dict[str, Any] | None = None
    sizes: dict[str, int] = {}
    present = [p for p in parts if _exists(p)]
    if not present:
        raise InputError(
            f"no such GGUF file: {first}", hint="check the path, or give part 00001 of a split"
        )
    for p in parts:
        if p not in present:
            problems.append(
                Problem(
                    "split_missing",
                    p.name,
                    f"part {parts.index(p) + 1} of {len(parts)} is not on disk",
                    fetch_again(
                        p.name,
                        f"the model is split in {len(parts)} parts "
                        "and the engine needs all of them",
                    ),
                )
            )
            continue
        part = read_part(p)
        sizes[p.name] = part.size
        tensors += part.tensors
        problems += [part.problem] if part.problem else []
        if metadata is None and part.problem is None:
            metadata = part.metadata
    problems += _check_split_count(parts, metadata)
    root = str(first_part(first).absolute())
    return Checkpoint(
        root=root,
        format="gguf",
        files=tuple(p.name for p in parts if p in present),
        tensors=tuple(tensors),
        config=None,
        gguf_metadata=metadata,
        problems=tuple(problems),
        file_sizes=sizes,
    )


def _check_split_count(parts: list[Path], metadata: dict[str, Any] | None) -> list[Problem]:
    if metadata is None or len(parts) == 1 or "split.count" not in metadata:
        return []
    said = metadata["split.count"]
    if said == len(parts):
        return []
    return [
        Problem(
            "gguf_invalid",
            parts[0].name,
            f"split.count says {said} parts, the file names say {len(parts)}",
            "fetch all parts of the same GGUF upload again: these come from different splits",
        )
    ]


def _exists(path: Path) -> bool:
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        raise files.error(exc, path, what="GGUF file") from None
    return True


def read_part(path: Path) -> _Part:
    """Read one GGUF file's tensor table and metadata; any parse failure is a problem."""
    with files.open_file(path, what="GGUF file", hint="replace it with the real GGUF file") as f:
        size = os.fstat(f.fileno()).st_size
        part = _classify(f, path, size)
    if part is None:
        try:
            part = _parse(path, size)
        except Exception as exc:  # untrusted bytes: any failure of the parser is a finding
            part = _Part([], {}, _invalid(path.name, size, exc))
    return dataclasses.replace(part, size=size)


def _classify(f: BinaryIO, path: Path, size: int) -> _Part | None:
    """The problem that stops reading (empty, git-lfs pointer, a bad header or table), as a
    part without tensors; None when the file is sound enough for GGUFReader."""
    name = path.name
    head = files.read_all(f, 64, path=path)
    if size == 0 or not head:
        return _Part(
            [],
            {},
            Problem(
                "truncated",
                name,
                "the file is empty (0 bytes)",
                fetch_again(name, "it is empty, the download never wrote it"),
            ),
        )
    if head.startswith(LFS_MAGIC):
        return _Part(
            [],
            {},
            Problem(
                "lfs_pointer",
                name,
                "it is a git-lfs pointer, not the weights",
                f"run `git lfs pull --include {name}` in the model folder, "
                "or download the file with `hf download`",
            ),
        )
    try:
        table = _walk(f, size, path)
    except _Cut as cut:
        return _Part([], {}, _truncated(name, cut.needed, size, in_header=True))
    except _Bad as bad:
        return _Part([], {}, bad.problem)
    problem = _check_table(table, size, name)
    return None if problem is None else _Part([], {}, problem)


def _parse(path: Path, size: int) -> _Part:
    import gguf  # lazy: numpy and gguf cost ~100 ms to import

    reader = gguf.GGUFReader(path)
    try:
        tensors = [
            TensorInfo(
                t.name,
                t.tensor_type.name,
                tuple(int(d) for d in reversed(t.shape.tolist())),
                int(t.n_bytes),
                path.name,
            )
            for t in reader.tensors
        ]
        ends = [int(t.data_offset) + int(t.n_bytes) for t in reader.tensors]
        metadata = {
            k: v
            for k, v in (
                (k, _value(f)) for k, f in reader.fields.items() if not k.startswith("GGUF.")
            )
            if v is not None
        }
    finally:
        del reader
    if ends and max(ends) > size:
        return _Part(tensors, metadata, _past_end(path.name, max(ends), size))
    return _Part(tensors, metadata, None)


def _value(field: Any) -> Any:
    if len(field.data) > MAX_ARRAY_ITEMS:
        return None
    return field.contents()


def _past_end(name: str, end: int, size: int) -> Problem:
    return Problem(
        "gguf_invalid",
        name,
        f"tensor data runs past the end of the file: the tensor table says "
        f"{format_size(end)}, {format_size(size)} on disk",
        fetch_again(name, STOPPED),
    )


def _invalid(name: str, size: int, exc: Exception) -> Problem:
    text = str(exc) or type(exc).__name__
    if "reshape" in text or "buffer" in text:
        text = f"tensor data runs past the end of the file ({format_size(size)} on disk)"
    elif len(text) > 120:
        text = text[:117] + "..."
    return Problem(
        "gguf_invalid",
        name,
        f"it is not a readable GGUF file: {text}",
        fetch_again(name, "its GGUF header or tensor table cannot be parsed"),
    )


# -- the tensor table, walked with bounds before GGUFReader sees the file --------------------

GGUF_MAGIC = b"GGUF"
MAX_TENSORS = 1 << 20  # the largest real GGUF has a few thousand; refuse absurd counts early
MAX_KV = 1 << 16
MAX_STRING_ITEMS = 1 << 23  # vocabularies are up to ~300k tokens
_WINDOW = 1 << 20
# value type -> (struct code, bytes) for the fixed-size GGUF value types
_SCALARS: dict[int, tuple[str, int]] = {
    0: ("B", 1),
    1: ("b", 1),
    2: ("H", 2),
    3: ("h", 2),
    4: ("I", 4),
    5: ("i", 4),
    6: ("f", 4),
    7: ("?", 1),
    10: ("Q", 8),
    11: ("q", 8),
    12: ("d", 8),
}
_STRING, _ARRAY = 8, 9


class _Cut(Exception):
    """The file ends inside the GGUF header, at ``needed`` bytes."""

    def __init__(self, needed: int) -> None:
        super().__init__(needed)
        self.needed = needed


class _Bad(Exception):
    """The header breaks the format; ``problem`` says how."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.detail)
        self.problem = problem


class _Window:
    """Bounded reads of the header through a 1 MiB window; past the end raises _Cut."""

    def __init__(self, f: BinaryIO, size: int, path: Path) -> None:
        self.f, self.size, self.path = f, size, path
        self.pos = 0
        self.buf = b""
        self.start = 0
        self.order = "<"

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if end > self.size:
            raise _Cut(end)
        if end > self.start + len(self.buf) or self.pos < self.start:
            self.f.seek(self.pos)
            self.buf = files.read_all(self.f, max(n, _WINDOW), path=self.path)
            self.start = self.pos
            if len(self.buf) < n:  # the file shrank while it was read
                raise _Cut(end)
        i = self.pos - self.start
        self.pos = end
        return self.buf[i : i + n]

    def skip(self, n: int) -> None:
        if self.pos + n > self.size:
            raise _Cut(self.pos + n)
        self.pos += n

    def num(self, code: str, n: int) -> Any:
        return struct.unpack(self.order + code, self.take(n))[0]

    def string(self, limit: int) -> bytes:
        n = self.num("Q", 8)
        if n > limit:
            raise (
                _Cut(self.pos + n)
                if self.pos + n > self.size
                else _Bad(
                    _invalid_problem(
                        self.path.name, f"a string of {n:,} bytes at byte {self.pos:,}"
                    )
                )
            )
        return self.take(n)


@dataclass(frozen=True, slots=True)
class _Table:
    """What the walk read: tensors (name, type, dims, offset), alignment, where data starts."""

    tensors: list[tuple[str, int, tuple[int, ...], int]]
    alignment: int
    data_start: int


def _walk(f: BinaryIO, size: int, path: Path) -> _Table:
    """Walk the header and tensor table, every count checked against the bytes left."""
    w = _Window(f, size, path)
    name = path.name
    magic = w.take(4)
    if magic != GGUF_MAGIC:
        raise _Bad(
            Problem(
                "bad_magic",
                name,
                f"it does not start with the GGUF magic: its first bytes are {magic!r}",
                fetch_again(name, "it is not a GGUF file (a wrong or half-written download)"),
            )
        )
    version = w.num("I", 4)
    if version & 0xFFFF == 0:  # a big-endian GGUF
        w.order, version = ">", struct.unpack(">I", struct.pack("<I", version))[0]
    if version not in (2, 3):
        raise _Bad(
            _invalid_problem(name, f"GGUF version {version}; llama.cpp reads versions 2 and 3")
        )
    n_tensors, n_kv = w.num("Q", 8), w.num("Q", 8)
    if n_tensors > MAX_TENSORS or n_tensors * 33 > size:
        raise _Bad(_invalid_problem(name, f"the header claims {n_tensors:,} tensors"))
    if n_kv > MAX_KV or n_kv * 13 > size:
        raise _Bad(_invalid_problem(name, f"the header claims {n_kv:,} metadata keys"))
    alignment = 32
    for _ in range(n_kv):
        key = w.string(1 << 16)
        vtype = w.num("I", 4)
        value = _skip_value(w, vtype, name)
        if key == b"general.alignment" and isinstance(value, int):
            alignment = value
    if alignment <= 0 or alignment & (alignment - 1):
        raise _Bad(_invalid_problem(name, f"general.alignment is {alignment}, not a power of 2"))
    tensors = []
    for _ in range(n_tensors):
        tname = w.string(1 << 16).decode("utf-8", "replace")
        n_dims = w.num("I", 4)
        if n_dims > 8:
            raise _Bad(_invalid_problem(name, f"tensor {tname!r} claims {n_dims} dimensions"))
        dims = tuple(w.num("Q", 8) for _ in range(n_dims))
        ttype, offset = w.num("I", 4), w.num("Q", 8)
        tensors.append((tname, ttype, dims, offset))
    return _Table(tensors, alignment, -(-w.pos // alignment) * alignment)


def _skip_value(w: _Window, vtype: int, name: str, depth: int = 0) -> Any:
    if vtype in _SCALARS:
        code, n = _SCALARS[vtype]
        return w.num(code, n)
    if vtype == _STRING:
        w.string(w.size)
        return None
    if vtype == _ARRAY and depth < 2:
        itype, count = w.num("I", 4), w.num("Q", 8)
        if itype in _SCALARS:
            w.skip(count * _SCALARS[itype][1])
            return None
        if count > MAX_STRING_ITEMS:
            raise _Bad(_invalid_problem(name, f"a metadata array claims {count:,} items"))
        for _ in range(count):
            _skip_value(w, itype, name, depth + 1)
        return None
    raise _Bad(_invalid_problem(name, f"metadata value type {vtype} at byte {w.pos - 4:,}"))


def _check_table(table: _Table, size: int, name: str) -> Problem | None:
    """llama.cpp's own checks on the table: known types, tensors packed in table order
    (each offset the padded end of the one before), all data inside the file."""
    import gguf  # lazy: numpy and gguf cost ~100 ms to import

    running = 0
    end = table.data_start
    for tname, ttype, dims, offset in table.tensors:
        try:
            block, type_bytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(ttype)]
        except (ValueError, KeyError):
            return Problem(
                "dtype_unknown",
                name,
                f"tensor {tname!r} has tensor type {ttype}, which GGUF (gguf {_gguf_version()}) "
                "does not define",
                f"fetch {name} again; if it is a new quantization type, upgrade llama.cpp and "
                "bringup (pip install -U gguf)",
            )
        elements = prod(dims)
        if dims and dims[0] % block:
            return _invalid_problem(
                name, f"tensor {tname!r} rows of {dims[0]} do not fill {block}-element blocks"
            )
        n_bytes = elements // block * type_bytes
        if offset != running:
            where = table.data_start + offset
            outside = where + n_bytes > size
            return Problem(
                "offsets_invalid",
                name,
                f"tensor {tname!r} has data offset {offset:,}, expected {running:,}"
                + (f": its data lies outside the file ({format_size(size)})" if outside else ""),
                fetch_again(
                    name, "its tensor table does not match its data (llama.cpp refuses it)"
                ),
            )
        running += -(-n_bytes // table.alignment) * table.alignment
        end = table.data_start + offset + n_bytes
    if end > size:
        return _truncated(name, end, size)
    return None


def _truncated(name: str, expected: int, size: int, *, in_header: bool = False) -> Problem:
    what = (
        f"the file ends inside its GGUF header: it needs at least {expected:,} bytes, "
        f"{size:,} bytes on disk"
        if in_header
        else f"the tensor table says {format_size(expected)} ({expected:,} bytes), "
        f"{format_size(size)} ({size:,} bytes) on disk"
    )
    return Problem(
        "truncated",
        name,
        what,
        fetch_again(name, STOPPED),
    )


def _invalid_problem(name: str, what: str) -> Problem:
    return Problem(
        "gguf_invalid",
        name,
        f"it is not a readable GGUF file: {what}",
        fetch_again(name, "its GGUF header or tensor table cannot be parsed"),
    )


def _gguf_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gguf")
    except PackageNotFoundError:
        return "?"
