"""Read a model from the Hugging Face Hub without its weights: ``config.json`` and the
safetensors headers (``huggingface_hub``).

``hf_hub_download`` fetches ``config.json`` (into a temporary folder, not the user's cache: a
cache snapshot with a config and no weights would later plan without its tensors), and
``HfApi.get_safetensors_metadata`` reads each shard's header with HTTP range requests (the
first 100 kB of each file, more only when a header is larger), so a 400 GB checkpoint costs a
few MB. ``HF_ENDPOINT`` names another Hub (a mirror, or a test server on loopback); the token
is huggingface_hub's own (``HF_TOKEN`` or its saved login). ``HF_HUB_OFFLINE=1``, a Hub that
cannot be reached, a repo that is not there or is gated: one ``InputError`` line each.

The Hub itself cannot be reached from where bringup is developed: the tests run the real
huggingface_hub against a local HTTP server that speaks the two endpoints it uses (HEAD/GET
``/{repo}/resolve/{revision}/{file}`` with range requests), ``tests/plan/hub_server.py``.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup.core.checkpoint import TensorInfo
from bringup.errors import InputError

DEFAULT_ENDPOINT = "https://huggingface.co"
TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class HubModel:
    """What the Hub gave: the config, every tensor's header entry, where it came from."""

    config: dict[str, Any]
    tensors: list[TensorInfo] | None  # None: the repo has no safetensors weights
    origin: str


def endpoint(environ: Mapping[str, str]) -> str:
    """The Hub the environment names (``HF_ENDPOINT``), else huggingface.co."""
    return (environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def offline(environ: Mapping[str, str]) -> bool:
    """``HF_HUB_OFFLINE`` is set to a true value (huggingface_hub's own switch)."""
    return (environ.get("HF_HUB_OFFLINE") or "").strip().lower() in ("1", "true", "yes", "on")


def read_model(repo_id: str, environ: Mapping[str, str], revision: str | None = None) -> HubModel:
    """``repo_id``'s config and safetensors headers from the Hub (no weights are fetched)."""
    url = endpoint(environ)
    if offline(environ):
        raise InputError(
            f"{repo_id}: not on disk, not bundled, and HF_HUB_OFFLINE is set",
            hint="download its config.json first, unset HF_HUB_OFFLINE, or plan a bundled "
            "model (bringup plan --list-models)",
        )
    try:
        return _read(repo_id, url, revision)
    except InputError:
        raise
    except Exception as exc:  # huggingface_hub and httpx raise many kinds; each is one line
        raise _one_line(repo_id, url, exc) from exc


def _read(repo_id: str, url: str, revision: str | None) -> HubModel:
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import NotASafetensorsRepoError
    from huggingface_hub.utils.tqdm import disable_progress_bars

    disable_progress_bars()  # its bars would go to bringup's stderr

    with tempfile.TemporaryDirectory(prefix="bringup-hub-") as tmp:
        path = hf_hub_download(
            repo_id, "config.json", revision=revision, cache_dir=tmp, endpoint=url
        )
        config = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(config, dict):
        raise InputError(f"{repo_id}: its config.json is not a JSON object")
    api = HfApi(endpoint=url)
    try:
        meta = api.get_safetensors_metadata(repo_id, revision=revision, timeout=TIMEOUT_SECONDS)
    except NotASafetensorsRepoError:
        return HubModel(config, None, f"Hugging Face Hub {url}: {repo_id} (config only)")
    tensors = [
        TensorInfo(
            name, info.dtype, tuple(info.shape), info.data_offsets[1] - info.data_offsets[0], file
        )
        for file, file_meta in sorted(meta.files_metadata.items())
        for name, info in file_meta.tensors.items()
    ]
    files = len(meta.files_metadata)
    return HubModel(
        config, tensors, f"Hugging Face Hub {url}: {repo_id} ({files} safetensors headers)"
    )


def _one_line(repo_id: str, url: str, exc: Exception) -> InputError:
    """The error a Hub call ended in, as one line with what to do."""
    name = type(exc).__name__
    text = str(exc).splitlines()[0] if str(exc) else name
    if name in ("RepositoryNotFoundError", "GatedRepoError", "RevisionNotFoundError"):
        return InputError(
            f"{repo_id}: {text} ({url})",
            hint="check the id (and --revision); a gated repo needs HF_TOKEN or hf auth login",
        )
    if name == "EntryNotFoundError":
        return InputError(f"{repo_id}: the repo has no config.json ({url})")
    return InputError(
        f"{repo_id}: the Hugging Face Hub at {url} could not be read ({name}: {text})",
        hint="offline? download the model first, set HF_ENDPOINT to a mirror, or plan a bundled "
        "model (bringup plan --list-models)",
    )
