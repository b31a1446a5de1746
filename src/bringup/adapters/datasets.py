"""Prompts for ``bringup bench --dataset FILE``, in the formats ``vllm bench serve`` takes.

- **ShareGPT** (``--dataset-name sharegpt``): a JSON array of conversations, each
  ``{"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", ...}, ...]}``
  (``"role"``/``"content"`` turns are accepted too). As vLLM does, a conversation needs at
  least two turns, and its first turn is the prompt.
- **JSONL** (``--dataset-name custom``): one JSON object per line with a ``"prompt"`` field;
  a line that holds a ShareGPT conversation is taken the same way as above.

The file is opened through :mod:`bringup.adapters.files` (type checked, never blocking,
bounded); a JSONL file is read line by line and only as far as the prompts needed. Anything
else is one :class:`~bringup.errors.InputError` line saying what was expected.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any, cast

from bringup.adapters import files
from bringup.errors import InputError

JSON_LIMIT = 4 * 1024**3  # ShareGPT_V3 is about 0.7 GB; a whole JSON array must be parsed
HINT = (
    'give a ShareGPT JSON (a list of {"conversations": [...]}) or a JSONL file with a '
    '"prompt" per line'
)


def load_prompts(path: str, limit: int) -> list[str]:
    """Up to ``limit`` non-empty prompts from the dataset at ``path``, in file order."""
    with files.open_file(path, what="dataset", hint=HINT) as f:
        first = files.read_all(f, 4096, path=path, what="dataset").lstrip()[:1]
        f.seek(0)  # open_file checked it is a regular file
        if first == b"[":
            data = files.read_all(f, JSON_LIMIT + 1, path=path, what="dataset")
            if len(data) > JSON_LIMIT:
                raise InputError(f"dataset {files.shown(path)}: larger than 4 GiB", hint=HINT)
            prompts = _from_array(_parse(data, path), path, limit)
        else:
            prompts = list(_from_lines(io.BufferedReader(cast(Any, f)), path, limit))
    if not prompts:
        raise InputError(f"dataset {files.shown(path)}: no prompts found", hint=HINT)
    return prompts


def _parse(data: bytes, path: str) -> Any:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise InputError(
            f"dataset {files.shown(path)}: not valid JSON ({reason})", hint=HINT
        ) from None


def _from_array(items: Any, path: str, limit: int) -> list[str]:
    if not isinstance(items, list):
        raise InputError(f"dataset {files.shown(path)}: not a JSON list", hint=HINT)
    out: list[str] = []
    for item in items:
        prompt = prompt_of(item)
        if prompt:
            out.append(prompt)
            if len(out) >= limit:
                break
    return out


def _from_lines(f: io.BufferedReader, path: str, limit: int) -> Iterator[str]:
    found = 0
    for number, raw in enumerate(f, 1):
        line = raw.strip()
        if not line:
            continue
        try:
            item = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise InputError(
                f"dataset {files.shown(path)}: line {number} is not a JSON object", hint=HINT
            ) from None
        prompt = prompt_of(item)
        if prompt:
            yield prompt
            found += 1
            if found >= limit:
                return


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
