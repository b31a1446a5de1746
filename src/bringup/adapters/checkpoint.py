"""Find a checkpoint on disk and read what verification needs: listings, headers, config.

Only headers are read, never tensor data: for a safetensors shard that is the first
:data:`~bringup.core.safetensors.PREFIX_BYTES` bytes plus the JSON header. The checks
themselves are pure (``bringup.core.checkpoint`` and ``bringup.core.safetensors``).

Inputs accepted by :func:`resolve_model_path`: a model folder; a Hugging Face cache repo
folder ``models--org--name`` (the snapshot ``refs/main`` names, else the newest); one of
its snapshots; a single ``.safetensors`` file; a ``.gguf`` file (part 1 of a split one).
"""

from __future__ import annotations

import functools
import json
import os
import stat
from importlib import resources
from pathlib import Path
from typing import BinaryIO

from bringup.adapters import files
from bringup.core import layouts, safetensors
from bringup.core.architectures import Registry, check_architecture, registries
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
from bringup.core.config_tensors import check_config_tensors
from bringup.errors import InputError

MAX_JSON_BYTES = 64 * 1024 * 1024  # config.json and the index are small; refuse absurd ones


CHECKPOINT_HINT = "give a model folder, a .safetensors file or a .gguf file"


def resolve_model_path(path: str | os.PathLike[str]) -> Path:
    """The folder or file to verify, from any of the accepted inputs (see module docstring)."""
    p = Path(os.path.abspath(Path(path).expanduser()))
    if p.suffix == ".gguf":
        from bringup.adapters import gguf_file  # only for GGUF: safetensors runs skip its import

        return gguf_file.first_part(p) if _any_part_exists(p) else _missing(p)
    st = stat_or_none(p)
    if st is None:
        return _missing(p)
    if stat.S_ISREG(st.st_mode):
        if p.suffix == ".safetensors":
            return p
        raise InputError(f"{files.shown(p)} is not a checkpoint file", hint=CHECKPOINT_HINT)
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(
            f"{files.shown(p)} is {files.kind_of(st.st_mode)}, not a checkpoint",
            hint=CHECKPOINT_HINT,
        )
    listing = _listdir(p)  # first, so an unreadable folder is named, not a file inside it
    if _is_dir(p / "snapshots"):
        return _cache_snapshot(p)
    repos = sorted(c.name for c in listing if c.name.startswith("models--"))
    if repos and not _weight_names(p):
        raise InputError(
            f"{p} is a Hugging Face cache, not one model",
            hint=f"pick one of: {', '.join(repos[:5])}",
        )
    return p


def _missing(p: Path) -> Path:
    raise InputError(f"no such file or folder: {files.shown(p)}", hint="check the path")


def stat_or_none(path: Path) -> os.stat_result | None:
    """``os.stat(path)``; None when nothing is there (a dangling link included). Any other
    failure (permission denied on a folder above, a symlink loop) is an InputError."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise files.error(exc, path) from None


def _is_dir(path: Path) -> bool:
    st = stat_or_none(path)
    return st is not None and stat.S_ISDIR(st.st_mode)


def _any_part_exists(p: Path) -> bool:
    from bringup.adapters import gguf_file  # only for GGUF: safetensors runs skip its import

    return any(stat_or_none(q) is not None for q in gguf_file.split_parts(gguf_file.first_part(p)))


def _cache_snapshot(repo: Path) -> Path:
    ref = repo / "refs" / "main"
    ref_stat = stat_or_none(ref)
    if ref_stat is not None and stat.S_ISREG(ref_stat.st_mode):
        rev = files.read_text(ref, limit=4096, what="cache ref").strip()
        if rev and "/" not in rev and _is_dir(repo / "snapshots" / rev):
            return repo / "snapshots" / rev
    snaps = [(st, s) for s in _listdir(repo / "snapshots") if (st := stat_or_none(s)) is not None]
    snaps = [(st, s) for st, s in snaps if stat.S_ISDIR(st.st_mode)]
    if not snaps:
        raise InputError(
            f"{files.shown(repo)} has no snapshots",
            hint="the download never finished; fetch the model again",
        )
    return max(snaps, key=lambda x: (x[0].st_mtime, x[1].name))[1]


def _listdir(folder: Path) -> list[Path]:
    return files.list_folder(folder, what="model folder")


def _weight_names(folder: Path) -> list[str]:
    return sorted(c.name for c in _listdir(folder) if c.suffix == ".safetensors")


def scan_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """Read every header of the checkpoint at ``path``; findings go into ``.problems``.

    Raises :class:`InputError` when there is no checkpoint to read (no such path, no weight
    files, several GGUF models in one folder, a file that cannot be opened).
    """
    root = resolve_model_path(path)
    if root.suffix == ".gguf":
        return _scan_gguf(root)
    if not _is_dir(root):
        tensors, problems, size = read_safetensors(root, root.name)
        problems += layouts.shard_of_set(root.name, _names_beside(root), str(root.parent))
        return Checkpoint(
            root=str(root),
            format="safetensors",
            files=(root.name,),
            tensors=tuple(tensors),
            config=None,
            gguf_metadata=None,
            problems=tuple(problems + check_duplicates(tensors) + _interrupted(root.parent)),
            file_sizes={root.name: size},
        )
    weights = _weight_names(root)
    if weights:
        return _scan_folder(root, weights)
    return _scan_gguf(_only_gguf(root))


def _scan_gguf(root: Path) -> Checkpoint:
    from bringup.adapters import gguf_file  # only for GGUF: safetensors runs skip its import

    return gguf_file.scan_gguf(root)


def _only_gguf(root: Path) -> Path:
    from bringup.adapters import gguf_file  # only for GGUF: safetensors runs skip its import

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
        if stat_or_none(root / name) is None:  # a dangling cache symlink: the blob is gone
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
    listing = [c.name for c in _listdir(root)]
    layout = layouts.recognise(listing, weights, weight_map, _is_dir(root / "original"))
    problems = [p for p in problems if not layout.accepts(p)]
    config, found = parse_config(_read_text(root / "config.json"))
    found = [p for p in found if not layout.accepts(p)]
    problems += check_duplicates(tensors) + found + check_tokenizer(listing)
    problems += check_quantization(config, tensors)
    if not any(p.kind in DAMAGE for p in problems):  # partial tensors say nothing of the config
        problems += check_config_tensors(config, tensors)
    problems += check_architecture(config, vllm_registries()) + _interrupted(root)
    return Checkpoint(
        root=str(root),
        format="safetensors",
        files=tuple(present),
        tensors=tuple(tensors),
        config=config,
        gguf_metadata=None,
        problems=tuple(problems),
        file_sizes=sizes,
        layouts=layout.notes,
    )


DAMAGE = frozenset(
    {"missing_shard", "truncated", "header_invalid", "header_too_large", "lfs_pointer",
     "index_tensor_missing", "offsets_invalid"}
)  # fmt: skip


@functools.cache
def vllm_registries() -> list[Registry]:
    """vLLM's model registries, per version (bringup/data/vllm_architectures.json)."""
    text = resources.files("bringup.data").joinpath("vllm_architectures.json").read_text()
    return registries(json.loads(text))


def _names_beside(path: Path) -> list[str]:
    return [c.name for c in _listdir(path.parent)]


def _interrupted(folder: Path) -> list[Problem]:
    """``blobs/*.incomplete`` of the Hugging Face cache repo ``folder`` is in, if any."""
    repo = next((p for p in (folder, *folder.parents) if p.name.startswith("models--")), None)
    blobs = repo / "blobs" if repo is not None else None
    if blobs is None or not _is_dir(blobs):
        return []
    parts = [(c.name, st.st_size) for c in _listdir(blobs) if c.name.endswith(".incomplete")
             and (st := stat_or_none(c)) is not None]  # fmt: skip
    return [layouts.interrupted(str(blobs / name), size) for name, size in sorted(parts)]


def _dangling(root: Path, name: str) -> Problem:
    try:
        target = files.shown(os.readlink(root / name))
    except OSError:
        target = "a file"
    return Problem(
        "missing_shard",
        name,
        f"{files.shown(root / name)} points to {target}, which is not there",
        f"fetch {name} again: its download did not finish",
    )


def read_safetensors(path: Path, name: str) -> tuple[list[TensorInfo], list[Problem], int]:
    """Read one safetensors file's header: its tensors, its problems and its size on disk."""
    with files.open_file(path, what="safetensors shard", hint=SHARD_HINT) as f:
        size = os.fstat(f.fileno()).st_size
        prefix = files.read_all(f, safetensors.PREFIX_BYTES, path=path)
        head = safetensors.read_prefix(prefix, size, name)
        if head.header_bytes is None:
            return [], [head.problem] if head.problem else [], size
        start = prefix[safetensors.LENGTH_BYTES :].lstrip()[:1]
        if start not in (b"{", b""):  # not JSON of an object: do not read 100 MB to say so
            header = prefix[safetensors.LENGTH_BYTES : safetensors.LENGTH_BYTES + head.header_bytes]
        else:
            header = _read_header(f, path, prefix, head.header_bytes)
    tensors, problems = safetensors.parse_header(header, name, size)
    return tensors, problems, size


SHARD_HINT = "replace it with the real shard: fetch it again"


def _read_header(f: BinaryIO, path: Path, prefix: bytes, n_bytes: int) -> bytes:
    start = safetensors.LENGTH_BYTES
    have = prefix[start : start + n_bytes]
    if len(have) == n_bytes:
        return have
    # a file that shrank since its size was read gives a short header: parse_header says so
    return have + files.read_all(f, n_bytes - len(have), path=path)


def _read_text(path: Path) -> str | None:
    """A small text file's contents; None when it is absent (or a dangling link)."""
    if stat_or_none(path) is None:
        return None
    data = files.read_bytes(path, limit=MAX_JSON_BYTES, what=path.name)
    return data.decode("utf-8", errors="replace")
