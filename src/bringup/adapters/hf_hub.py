"""Read a model from the Hugging Face Hub without its weights: ``config.json`` and the
safetensors headers (``huggingface_hub``).

``hf_hub_download`` fetches ``config.json`` and the shard index (into a temporary folder, not
the user's cache: a cache snapshot with a config and no weights would later plan without its
tensors), and ``HfApi.parse_safetensors_file_metadata`` reads each shard's header with HTTP
range requests (the
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup.core.checkpoint import TensorInfo
from bringup.errors import InputError

DEFAULT_ENDPOINT = "https://huggingface.co"
TIMEOUT_SECONDS = 10.0
# the names huggingface_hub looks for (constants.SAFETENSORS_SINGLE_FILE / _INDEX_FILE)
SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"


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
    from huggingface_hub.utils.tqdm import disable_progress_bars

    disable_progress_bars()  # its bars would go to bringup's stderr

    api = HfApi(endpoint=url)
    with tempfile.TemporaryDirectory(prefix="bringup-hub-") as tmp:

        def fetch(name: str) -> Any:
            path = hf_hub_download(repo_id, name, revision=revision, cache_dir=tmp, endpoint=url)
            return json.loads(Path(path).read_text(encoding="utf-8"))

        config = fetch("config.json")
        if not isinstance(config, dict):
            raise InputError(f"{repo_id}: its config.json is not a JSON object")
        # HfApi.get_safetensors_metadata would fetch the index into the user's own cache (it
        # takes no cache_dir: huggingface_hub 2.4, hf_api.py), a snapshot with an index and no
        # shards that a later plan of the same id would read as an incomplete checkpoint; so
        # its two cases are taken here, the index into the temporary folder
        if api.file_exists(repo_id, SINGLE_FILE, revision=revision):
            shards = [SINGLE_FILE]
        elif api.file_exists(repo_id, INDEX_FILE, revision=revision):
            index = fetch(INDEX_FILE)
            if not isinstance(index, dict) or not isinstance(index.get("weight_map"), dict):
                raise InputError(f"{repo_id}: its {INDEX_FILE} has no weight_map")
            shards = sorted(set(index["weight_map"].values()))
        else:
            return HubModel(config, None, f"Hugging Face Hub {url}: {repo_id} (config only)")

    def header(file: str) -> Any:
        return api.parse_safetensors_file_metadata(
            repo_id, file, revision=revision, timeout=TIMEOUT_SECONDS
        )

    # the headers at once, as huggingface_hub's hf_thread_map (min(32, CPUs + 4) threads)
    with ThreadPoolExecutor() as pool:
        headers = list(pool.map(header, shards))
    tensors = [
        TensorInfo(
            name, info.dtype, tuple(info.shape), info.data_offsets[1] - info.data_offsets[0], file
        )
        for file, meta in zip(shards, headers, strict=True)
        for name, info in meta.tensors.items()
    ]
    return HubModel(
        config, tensors, f"Hugging Face Hub {url}: {repo_id} ({len(shards)} safetensors headers)"
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
