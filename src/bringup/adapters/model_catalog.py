"""The models bundled with bringup, known by their Hugging Face ids.

``bringup/data/model_catalog.json`` lists each bundled config (``data/models/NAME.json``): the
Hugging Face repo ids it stands for (``meta-llama/Llama-3.1-70B-Instruct`` and the base model
share ``Llama-3.1-70B``'s architecture) and the public ``config.json`` it was written from
(repository, path and commit), with a note where a field is not the public file's own.

A name matches an entry by its full repo id, by its own name, or by the last part of one of
its ids, any case (``Llama-3.1-70B-Instruct`` → ``Llama-3.1-70B``).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any


@dataclass(frozen=True, slots=True)
class CatalogModel:
    """One bundled model."""

    name: str  # the bundled config's file name, without .json
    hf_ids: tuple[str, ...]
    source: str  # the public config.json it was written from, or what could not be checked
    note: str = ""


@functools.cache
def catalog() -> tuple[CatalogModel, ...]:
    """Every bundled model, in the catalog's order."""
    text = resources.files("bringup.data").joinpath("model_catalog.json").read_text("utf-8")
    data = json.loads(text)
    return tuple(
        CatalogModel(m["name"], tuple(m["hf_ids"]), m["source"], m.get("note", ""))
        for m in data["models"]
    )


@functools.cache
def _index() -> dict[str, CatalogModel]:
    index: dict[str, CatalogModel] = {}
    for model in catalog():
        index.setdefault(model.name.lower(), model)
    for model in catalog():
        for repo_id in model.hf_ids:
            index.setdefault(repo_id.lower(), model)
    for model in catalog():
        for repo_id in model.hf_ids:
            index.setdefault(repo_id.rsplit("/", 1)[-1].lower(), model)
    return index


def find(name: str) -> CatalogModel | None:
    """The bundled model ``name`` stands for (repo id, bundled name, or an id's last part)."""
    wanted = name.strip().rstrip("/").lower()
    found = _index().get(wanted)
    if found is None and "/" in wanted:
        found = _index().get(wanted.rsplit("/", 1)[-1])
    return found


def config(model: CatalogModel) -> dict[str, Any]:
    """The bundled config of ``model``."""
    folder = resources.files("bringup.data").joinpath("models")
    data: dict[str, Any] = json.loads(folder.joinpath(f"{model.name}.json").read_text("utf-8"))
    return data
