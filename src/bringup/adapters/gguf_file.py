"""Read GGUF files (single or split) with the ``gguf`` package; corruption becomes findings.

``GGUFReader`` memory-maps the file and raises whatever numpy or struct raise on bad input
(ValueError, IndexError, struct.error, KeyError, OverflowError...). Every such exception
stops here and becomes a ``gguf_invalid`` problem: nothing from a file's contents can
raise past this module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup.core.checkpoint import Checkpoint, Problem, TensorInfo, fetch_again, format_size
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


def scan_gguf(first: Path) -> Checkpoint:
    """Scan a GGUF model (all parts of a split one): tensors, metadata and problems."""
    parts = split_parts(first_part(first))
    problems: list[Problem] = []
    tensors: list[TensorInfo] = []
    metadata: dict[str, Any] | None = None
    sizes: dict[str, int] = {}
    present = [p for p in parts if p.is_file()]
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
        sizes[p.name] = p.stat().st_size
        part = read_part(p)
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


def read_part(path: Path) -> _Part:
    """Read one GGUF file's tensor table and metadata; any parse failure is a problem."""
    name = path.name
    try:
        with path.open("rb") as f:
            head = f.read(64)
        size = path.stat().st_size
    except OSError as exc:
        raise InputError(
            f"cannot read {path}: {exc.strerror}", hint="check its permissions"
        ) from exc
    if size == 0:
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
        return _parse(path, size)
    except Exception as exc:  # untrusted bytes: any failure of the parser is a finding
        return _Part([], {}, _invalid(name, size, exc))


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
        fetch_again(name, f"the tensor table says {format_size(end)}, {format_size(size)} on disk"),
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
