"""Checkpoint layouts the engines accept that a strict reading would fail, and partial sets.

- Mistral's own format: ``consolidated*.safetensors`` with ``params.json`` (and often
  ``tekken.json``). Beside Hugging Face shards and their index, vLLM reads the index and
  loads only the shards it names; alone, vLLM serves it with ``--load-format mistral
  --config-format mistral --tokenizer-mode mistral`` (no ``config.json`` needed).
- ``original/``: the publisher's own format (Meta's ``consolidated.*.pth``); engines read
  the Hugging Face files at the top.
- ``*.bin`` beside ``*.safetensors``: vLLM's loader takes the safetensors and ignores them.

A shard of a set given alone (``model-00001-of-00003.safetensors``) is not a checkpoint: it
is named with the shards that complete it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from bringup.core.checkpoint import Problem, fetch_again, format_size, hf_download, repo_id_of
from bringup.core.words import count

_SHARD = re.compile(r"^(?P<stem>.+)-(?P<k>\d+)-of-(?P<n>\d+)\.safetensors$")


@dataclass(frozen=True, slots=True)
class Layout:
    """What was recognised: a line for each layout, and the findings it makes moot."""

    notes: tuple[str, ...]
    accepted: frozenset[tuple[str, str]]  # (kind, file) pairs that are not problems

    def accepts(self, problem: Problem) -> bool:
        return (problem.kind, problem.file) in self.accepted


def recognise(
    listing: Iterable[str],
    weights: Sequence[str],
    weight_map: Mapping[str, str] | None,
    has_original: bool,
) -> Layout:
    """The layouts in a model folder (its file names, weight files, index, original/)."""
    names = set(listing)
    notes: list[str] = []
    accepted: set[tuple[str, str]] = set()
    consolidated = [w for w in weights if w.startswith("consolidated")]
    if consolidated and "params.json" in names:
        listed = ", ".join(consolidated)
        if weight_map is not None:
            notes.append(
                f"Mistral format beside the Hugging Face shards ({listed} with params.json): "
                "vLLM loads the shards the index names and ignores it"
            )
        else:
            notes.append(
                f"Mistral format ({listed} with params.json): serve it with --load-format "
                "mistral --config-format mistral --tokenizer-mode mistral"
            )
            accepted.add(("config_missing", "config.json"))
        accepted |= {("unreferenced_file", c) for c in consolidated}
    if has_original:
        notes.append(
            "original/ holds the publisher's own format: engines read the files at the top"
        )
    bins = sorted(
        n for n in names if n.endswith(".bin") and n.startswith(("pytorch_model", "model"))
    )
    if bins and weights:
        notes.append(
            f"{count(len(bins), 'PyTorch .bin file')} beside the safetensors ({bins[0]}...): vLLM loads "
            "the safetensors and ignores them"
        )
    return Layout(tuple(notes), frozenset(accepted))


def shard_of_set(name: str, beside: Iterable[str], folder: str) -> list[Problem]:
    """``model-00001-of-00003.safetensors`` given alone: "1 of 3 shards given", the rest named."""
    m = _SHARD.match(name)
    if m is None or int(m["n"]) <= 1:
        return []
    n, width = int(m["n"]), len(m["n"])
    rest = [f"{m['stem']}-{i:0{len(m['k'])}d}-of-{m['n']}.safetensors" for i in range(1, n + 1)]
    rest = [r for r in rest if r != name]
    here = set(beside)
    missing = [r for r in rest if r not in here]
    shown = ", ".join(rest[:3]) + (f" and {len(rest) - 3} more" if len(rest) > 3 else "")
    where = "all beside it" if not missing else f"{len(missing)} of them not beside it either"
    pattern = f"{m['stem']}-*-of-{'0' * (width - len(str(n)))}{n}.safetensors"
    fix = (
        f"verify the whole checkpoint: `bringup verify {folder}`"
        if not missing
        else fetch_again(pattern, f"the engine needs all {n} shards and the index")
    )
    return [
        Problem("shard_of_set", name, f"1 of {n} shards given; the rest: {shown} ({where})", fix)
    ]


def interrupted(blob: str, size: int) -> Problem:
    """A Hugging Face cache blob left ``*.incomplete``: a download that stopped."""
    repo = repo_id_of(blob)
    command = f"`{hf_download(repo[0], cache_dir=repo[1])}`" if repo else "the same `hf download`"
    return Problem(
        "interrupted_download",
        blob,
        f"an interrupted download: {format_size(size)} of a file the cache never finished "
        "(huggingface_hub renames a blob only once it is whole)",
        f"resume it: run {command} again; it continues the *.incomplete file",
    )
