"""Find a model the way vLLM takes its name, without the network: path, HF cache, bundled.

``vllm serve NAME`` loads a local path when ``NAME`` exists on disk, else treats it as a
Hugging Face repo id and reads the hub cache. :func:`locate_model` does the same, in order:

1. an existing path: a config JSON file (any name ending ``.json``), a ``.gguf`` file, a
   model folder, a cache repo folder ``models--org--name`` or one of its snapshots;
2. ``org/name`` in the Hugging Face hub cache: ``HF_HUB_CACHE`` (or its older name
   ``HUGGINGFACE_HUB_CACHE``), else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``,
   else ``~/.cache/huggingface/hub`` (huggingface_hub's own order); the snapshot is the one
   ``refs/<revision>`` names (``main`` unless ``--revision`` says), else the newest;
3. a config bundled with bringup (``adapters.model_catalog``), matched on its Hugging Face
   ids, its name or the last part of an id, case-insensitively
   (``meta-llama/Llama-3.1-70B-Instruct`` → ``Llama-3.1-70B``).

4. with ``hub=True`` (``plan``), an ``org/name`` found nowhere above is read from the Hugging
   Face Hub: its ``config.json`` and safetensors headers, never the weights
   (``adapters.hf_hub``).

Nothing else touches the network. :func:`load_model` then reads what the planner needs: the config and,
where weights are on disk, the tensor headers.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from bringup.adapters import files
from bringup.core.checkpoint import Checkpoint, TensorInfo
from bringup.errors import InputError

SourceKind = Literal["config", "checkpoint", "gguf", "bundled", "hub"]
MAX_CONFIG_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ModelSource:
    """Where a model name led."""

    name: str  # what was asked for
    kind: SourceKind
    path: Path | None  # the file or folder (None for a bundled config)
    origin: str  # one human line: "Hugging Face cache: /…/snapshots/abc", "bundled config …"
    endpoint: str | None = None  # kind "hub": the Hub to read it from
    revision: str | None = None  # kind "hub": --revision


@dataclass(frozen=True, slots=True)
class LoadedModel:
    """What a plan reads from a model source."""

    source: ModelSource
    config: dict[str, Any]
    tensors: list[TensorInfo] | None = None  # None: synthesise from the config
    checkpoint: Checkpoint | None = field(default=None, repr=False)


def hf_cache_dirs(environ: Mapping[str, str], home: str | None = None) -> list[Path]:
    """The hub cache folder huggingface_hub would use, first (then the default, if different)."""
    base = Path(home) if home else Path(environ.get("HOME") or Path.home())
    default = base / ".cache" / "huggingface" / "hub"
    first: Path
    if environ.get("HF_HUB_CACHE"):
        first = Path(environ["HF_HUB_CACHE"])
    elif environ.get("HUGGINGFACE_HUB_CACHE"):
        first = Path(environ["HUGGINGFACE_HUB_CACHE"])
    elif environ.get("HF_HOME"):
        first = Path(environ["HF_HOME"]) / "hub"
    elif environ.get("XDG_CACHE_HOME"):
        first = Path(environ["XDG_CACHE_HOME"]) / "huggingface" / "hub"
    else:
        first = default
    out = [first.expanduser()]
    if default not in out:
        out.append(default)
    return out


def bundled_names() -> list[str]:
    """Names of the configs bundled with bringup."""
    from bringup.adapters import model_catalog

    return sorted((m.name for m in model_catalog.catalog()), key=str.lower)


def bundled_config(name: str) -> dict[str, Any] | None:
    """The bundled config ``name`` stands for (a Hugging Face id, or a bundled name), or None."""
    from bringup.adapters import model_catalog

    found = model_catalog.find(name)
    return model_catalog.config(found) if found is not None else None


def _is_repo_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "~"))


def _stat(path: Path) -> os.stat_result | None:
    """``os.stat``; None when nothing is there. Permission denied on a folder above, a
    symlink loop: one InputError line (they are not "not there")."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise files.error(exc, path) from None


def _is_dir(path: Path) -> bool:
    st = _stat(path)
    return st is not None and stat.S_ISDIR(st.st_mode)


def _snapshot(repo: Path, revision: str | None) -> Path | None:
    snaps = repo / "snapshots"
    if revision and _is_dir(snaps / revision):
        return snaps / revision
    ref = repo / "refs" / (revision or "main")
    ref_stat = _stat(ref)
    rev = ""
    if ref_stat is not None and stat.S_ISREG(ref_stat.st_mode):
        rev = files.read_text(ref, limit=4096, what="cache ref").strip()
    if rev and "/" not in rev and _is_dir(snaps / rev):
        return snaps / rev
    if not _is_dir(snaps):
        return None
    found = [(st, s) for s in files.list_folder(snaps) if (st := _stat(s)) is not None]
    found = [(st, s) for st, s in found if stat.S_ISDIR(st.st_mode)]
    return max(found, key=lambda x: (x[0].st_mtime, x[1].name))[1] if found else None


def find_in_hf_cache(
    repo_id: str, environ: Mapping[str, str], revision: str | None = None
) -> Path | None:
    """The snapshot folder of ``org/name`` in the hub cache, or None when it is not there."""
    folder = "models--" + repo_id.replace("/", "--")
    for cache in hf_cache_dirs(environ):
        repo = cache / folder
        if _is_dir(repo):
            snap = _snapshot(repo, revision)
            if snap is not None:
                return snap
    return None


def locate_model(
    name: str, environ: Mapping[str, str], *, revision: str | None = None, hub: bool = False
) -> ModelSource:
    """Where ``name`` leads (see the module docstring); InputError when nowhere. ``hub``: an
    ``org/name`` found nowhere here is read from the Hugging Face Hub (``adapters.hf_hub``:
    config and safetensors headers, no weights) unless ``HF_HUB_OFFLINE`` is set."""
    path = Path(name).expanduser()
    st = _stat(path)
    if st is not None:
        if path.suffix == ".json" and not stat.S_ISDIR(st.st_mode):
            return ModelSource(name, "config", path, f"config file {path}")
        if path.suffix == ".gguf":
            return ModelSource(name, "gguf", path, f"GGUF file {path}")
        return ModelSource(name, "checkpoint", path, f"model folder {path}")
    if path.suffix == ".gguf":
        return ModelSource(name, "gguf", path, f"GGUF file {path}")
    if _is_repo_id(name):
        snap = find_in_hf_cache(name, environ, revision)
        if snap is not None:
            return ModelSource(name, "checkpoint", snap, f"Hugging Face cache: {snap}")
    from bringup.adapters import model_catalog

    bundled = model_catalog.find(name)
    if bundled is not None:
        return ModelSource(name, "bundled", None, f"bundled config {bundled.name}")
    if hub and _is_repo_id(name):
        from bringup.adapters import hf_hub

        if not hf_hub.offline(environ):
            url = hf_hub.endpoint(environ)
            return ModelSource(name, "hub", None, f"Hugging Face Hub {url}: {name}", url, revision)
    searched = ", ".join(str(p) for p in hf_cache_dirs(environ))
    raise InputError(
        f"no such model: {name} (not a path; not in the Hugging Face cache at {searched}; "
        "not one of the bundled models)",
        hint="give a model folder or config JSON file, download it first, or a bundled model "
        "(bringup plan --list-models)",
    )


def read_config_file(path: Path) -> dict[str, Any]:
    """A config JSON object from ``path``; InputError when it cannot be read or is not one."""
    data = files.read_json(path, limit=MAX_CONFIG_BYTES, what="config JSON file")
    if not isinstance(data, dict):
        raise InputError(
            f"{files.shown(path)} is not a config JSON object",
            hint="give the model's config.json",
        )
    return data


def load_model(source: ModelSource) -> LoadedModel:
    """The config (and tensor headers when the weights are on disk) of a located model.

    A snapshot or folder with a config but no safetensors (a partial download) plans from
    the config alone. GGUF files are not read here (llama.cpp's plan reads them).
    """
    if source.kind == "bundled":
        config = bundled_config(source.name)
        assert config is not None
        return LoadedModel(source, config)
    if source.kind == "hub":
        from bringup.adapters import hf_hub

        env = {"HF_ENDPOINT": source.endpoint or hf_hub.DEFAULT_ENDPOINT}
        got = hf_hub.read_model(source.name, env, source.revision)
        return LoadedModel(replace(source, origin=got.origin), got.config, got.tensors)
    assert source.path is not None
    if source.kind == "config":
        return LoadedModel(source, read_config_file(source.path))
    if source.kind == "gguf":
        raise InputError(f"{source.path}: a GGUF model has no config JSON to load here")
    folder = source.path
    if _is_dir(folder) and not _has_safetensors(folder) and _stat(folder / "config.json"):
        return LoadedModel(source, read_config_file(folder / "config.json"))
    from bringup.adapters.checkpoint import scan_checkpoint

    ckpt = scan_checkpoint(folder)
    if ckpt.format != "safetensors":
        raise InputError(
            f"{source.name}: the planner reads safetensors checkpoints or config JSON files"
        )
    if ckpt.config is None:
        raise InputError(
            f"{source.name}: no readable config.json", hint="the planner needs the architecture"
        )
    return LoadedModel(source, dict(ckpt.config), list(ckpt.tensors) or None, ckpt)


def _has_safetensors(folder: Path) -> bool:
    return any(p.suffix == ".safetensors" for p in files.list_folder(folder, what="model folder"))


def resolve_model(
    name: str, environ: Mapping[str, str] | None = None, *, revision: str | None = None
) -> LoadedModel:
    """:func:`locate_model` then :func:`load_model`: the one call most commands need."""
    return load_model(
        locate_model(name, os.environ if environ is None else environ, revision=revision)
    )
