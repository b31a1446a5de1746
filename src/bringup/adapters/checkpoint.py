"""Find a checkpoint on disk and read what verification needs: listings, headers, config.

Only headers are read, never tensor data: for a safetensors shard that is the first
:data:`~bringup.core.safetensors.PREFIX_BYTES` bytes plus the JSON header. The checks
themselves are pure (``bringup.core.checkpoint`` and ``bringup.core.safetensors``).

Inputs accepted by :func:`resolve_model_path`: a model folder; a Hugging Face cache repo
folder ``models--org--name`` (the snapshot ``refs/main`` names, else the newest); one of
its snapshots; a single ``.safetensors`` file; a ``.gguf`` file (part 1 of a split one).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from bringup.adapters import gguf_file
from bringup.core import safetensors
from bringup.core.checkpoint import (
    INDEX_NAME,
    Checkpoint,
    Problem,
    TensorInfo,
    check_duplicates,
    check_index,
    check_quantization,
    check_tokenizer,
    parse_config,
    parse_index,
)
from bringup.errors import InputError

MAX_JSON_BYTES = 64 * 1024 * 1024  # config.json and the index are small; refuse absurd ones


def resolve_model_path(path: str | os.PathLike[str]) -> Path:
    """The folder or file to verify, from any of the accepted inputs (see module docstring)."""
    p = Path(os.path.abspath(Path(path).expanduser()))
    if p.suffix == ".gguf":
        return gguf_file.first_part(p) if _any_part_exists(p) else _missing(p)
    if not p.exists():
        return _missing(p)
    if p.is_file():
        if p.suffix == ".safetensors":
            return p
        raise InputError(
            f"{p} is not a checkpoint file",
            hint="give a model folder, a .safetensors file or a .gguf file",
        )
    if (p / "snapshots").is_dir():
        return _cache_snapshot(p)
    repos = sorted(c.name for c in _listdir(p) if c.name.startswith("models--"))
    if repos and not _weight_names(p):
        raise InputError(
            f"{p} is a Hugging Face cache, not one model",
            hint=f"pick one of: {', '.join(repos[:5])}",
        )
    return p


def _missing(p: Path) -> Path:
    raise InputError(f"no such file or folder: {p}", hint="check the path")


def _any_part_exists(p: Path) -> bool:
    return any(q.exists() for q in gguf_file.split_parts(gguf_file.first_part(p)))


def _cache_snapshot(repo: Path) -> Path:
    ref = repo / "refs" / "main"
    if ref.is_file():
        rev = ref.read_text(encoding="utf-8", errors="replace").strip()
        if rev and (repo / "snapshots" / rev).is_dir():
            return repo / "snapshots" / rev
    snaps = [s for s in _listdir(repo / "snapshots") if s.is_dir()]
    if not snaps:
        raise InputError(
            f"{repo} has no snapshots", hint="the download never finished; fetch the model again"
        )
    return max(snaps, key=lambda s: (s.stat().st_mtime, s.name))


def _listdir(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError as exc:
        raise InputError(
            f"cannot list {folder}: {exc.strerror}", hint="check its permissions"
        ) from exc


def _weight_names(folder: Path) -> list[str]:
    return sorted(c.name for c in _listdir(folder) if c.suffix == ".safetensors")


def scan_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """Read every header of the checkpoint at ``path``; findings go into ``.problems``.

    Raises :class:`InputError` when there is no checkpoint to read (no such path, no weight
    files, several GGUF models in one folder, a file that cannot be opened).
    """
    root = resolve_model_path(path)
    if root.suffix == ".gguf":
        return gguf_file.scan_gguf(root)
    if root.is_file():
        tensors, problems, size = read_safetensors(root, root.name)
        return Checkpoint(
            root=str(root),
            format="safetensors",
            files=(root.name,),
            tensors=tuple(tensors),
            config=None,
            gguf_metadata=None,
            problems=tuple(problems + check_duplicates(tensors)),
            file_sizes={root.name: size},
        )
    weights = _weight_names(root)
    if weights:
        return _scan_folder(root, weights)
    return gguf_file.scan_gguf(_only_gguf(root))


def _only_gguf(root: Path) -> Path:
    models = sorted({gguf_file.first_part(c).name for c in _listdir(root) if c.suffix == ".gguf"})
    if len(models) == 1:
        return root / models[0]
    if models:
        raise InputError(
            f"{root} holds {len(models)} GGUF models",
            hint=f"give one file: {', '.join(models[:5])}",
        )
    others = sorted(c.name for c in _listdir(root) if c.suffix in (".bin", ".pt", ".pth"))
    raise InputError(
        f"no .safetensors or .gguf weights in {root}",
        hint=f"found {others[0]}; bringup verify reads safetensors and GGUF"
        if others
        else "give a model folder, a Hugging Face cache folder, or a weight file",
    )


def _scan_folder(root: Path, weights: list[str]) -> Checkpoint:
    problems: list[Problem] = []
    weight_map: dict[str, str] | None = None
    index_text = _read_text(root / INDEX_NAME)
    if index_text is not None:
        weight_map, bad = parse_index(index_text)
        problems += [bad] if bad else []
    by_file: dict[str, list[TensorInfo]] = {}
    sizes: dict[str, int] = {}
    present: list[str] = []
    for name in weights:
        if not (root / name).exists():  # a dangling cache symlink: the blob is gone
            continue
        present.append(name)
        tensors, found, sizes[name] = read_safetensors(root / name, name)
        problems += found
        if tensors or not found:  # a header that could not be read says nothing about the index
            by_file[name] = tensors
    if weight_map is not None:
        problems += check_index(
            weight_map, present, {f: [t.name for t in ts] for f, ts in by_file.items()}
        )
        loaded = set(weight_map.values())
    else:
        problems += [_dangling(root, n) for n in weights if n not in present]
        loaded = set(present)
    tensors = [t for name in present if name in loaded for t in by_file.get(name, ())]
    config, found = parse_config(_read_text(root / "config.json"))
    problems += check_duplicates(tensors) + found + check_tokenizer(c.name for c in _listdir(root))
    problems += check_quantization(config, tensors)
    return Checkpoint(
        root=str(root),
        format="safetensors",
        files=tuple(present),
        tensors=tuple(tensors),
        config=config,
        gguf_metadata=None,
        problems=tuple(problems),
        file_sizes=sizes,
    )


def _dangling(root: Path, name: str) -> Problem:
    return Problem(
        "missing_shard",
        name,
        f"{root / name} points to {os.readlink(root / name)}, which is not there",
        f"fetch {name} again: its download did not finish",
    )


def read_safetensors(path: Path, name: str) -> tuple[list[TensorInfo], list[Problem], int]:
    """Read one safetensors file's header: its tensors, its problems and its size on disk."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            prefix = f.read(safetensors.PREFIX_BYTES)
            head = safetensors.read_prefix(prefix, size, name)
            if head.header_bytes is None:
                return [], [head.problem] if head.problem else [], size
            header = _read_header(f, prefix, head.header_bytes)
    except OSError as exc:
        raise InputError(
            f"cannot read {path}: {exc.strerror}", hint="check its permissions"
        ) from exc
    tensors, problems = safetensors.parse_header(header, name, size)
    return tensors, problems, size


def _read_header(f: BinaryIO, prefix: bytes, n_bytes: int) -> bytes:
    start = safetensors.LENGTH_BYTES
    have = prefix[start : start + n_bytes]
    if len(have) == n_bytes:
        return have
    return have + f.read(n_bytes - len(have))


def _read_text(path: Path) -> str | None:
    """A small text file's contents; None when it is absent (or a dangling link)."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_JSON_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(
            f"cannot read {path}: {exc.strerror}", hint="check its permissions"
        ) from exc
    return data[:MAX_JSON_BYTES].decode("utf-8", errors="replace")
