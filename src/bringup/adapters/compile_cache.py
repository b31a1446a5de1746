"""Whether vLLM's torch.compile cache already holds this model's graphs (a warm compile).

vLLM's rule (``vllm/compilation/backends.py``, ``VllmBackend.__call__``; 0.32 as 0.11): the
cache folder is ``$VLLM_CACHE_ROOT/torch_compile_cache/<hash>/rank_<rank>_<dp_rank>/<prefix>``
(``VLLM_CACHE_ROOT`` defaults to ``$XDG_CACHE_HOME/vllm``, else ``~/.cache/vllm``; the prefix
is ``backbone`` for the main model), holding ``vllm_compile_cache.py`` (the compiled graphs'
handles) and ``computation_graph.py`` (the traced graph, printed). ``<hash>`` is the first 10
hex digits of the MD5 of ``[env hash, VllmConfig.compute_hash(), the hash of the source files
Dynamo traced, the compiler's hash]``.

**That hash cannot be reproduced here**: it needs vLLM's own config objects and the list of
files Dynamo traces, which exists only after tracing. The approximation: an entry is this
model's when its ``vllm_compile_cache.py`` exists for rank 0 and its printed graph has this
model's shape: a tensor whose last dimension is the hidden size, and the last layer's index
(``layers_modules_<L-1>_``) with none beyond it. Entries of another config of the same model
(other flags, another vLLM) count as warm too, so "warm" may be wrong after an upgrade; with
entries whose graphs cannot be read the answer is ``unknown``. ``VLLM_DISABLE_COMPILE_CACHE=1``
makes every start cold.

**vLLM's AOT compile** (0.32 with torch 2.10 or newer: ``VLLM_USE_AOT_COMPILE``'s default,
``vllm/envs.py::use_aot_compile``) writes another layout
(``vllm/compilation/decorators.py``): ``torch_compile_cache/torch_aot_compile/<hash>/
rank_<rank>_<dp_rank>/model``, a pickled artifact, beside ``<hash>/inductor_cache`` (where
it points ``TORCHINDUCTOR_CACHE_DIR``). ``<hash>`` is the SHA-256 of vLLM's
``aot_compile_hash_factors(vllm_config)`` and the model's ``forward`` (vLLM's version, its
qualified name and first line): not reproducible here either, and the artifact prints no
graph to read the model's shape from. Such entries make the answer ``unknown``, never warm
(unless ``VLLM_USE_AOT_COMPILE=0``, when vLLM ignores them):
on this project's vLLM 0.32 CPU build the artifact even failed to load on the next start
("Compiling model again due to a load failure", ``'function' object has no attribute
'finalize_loading'``), and only the warm Inductor cache beside it made that recompile shorter.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from bringup.core.startup_time import CompileCache

GRAPH_LIMIT = 8 * 1024 * 1024
NONE_OF_THIS_MODEL = "vLLM's compile cache holds no graph of this model's shape"  # the printed graph read per entry, at most


def cache_root(environ: Mapping[str, str]) -> Path:
    """vLLM's cache root, as ``vllm/envs.py`` resolves it."""
    root = environ.get("VLLM_CACHE_ROOT")
    if root:
        return Path(root).expanduser()
    xdg = environ.get("XDG_CACHE_HOME") or os.path.join(environ.get("HOME", "~"), ".cache")
    return Path(xdg).expanduser() / "vllm"


def _entries(root: Path) -> list[Path]:
    """Each ``<hash>/rank_0_0/backbone`` folder that holds compiled graphs."""
    base = root / "torch_compile_cache"
    try:
        hashes = sorted(p for p in base.iterdir() if p.is_dir())
    except OSError:
        return []
    found = []
    for h in hashes:
        entry = h / "rank_0_0" / "backbone"
        if (entry / "vllm_compile_cache.py").is_file():
            found.append(entry)
    return found


def _aot_entries(root: Path) -> list[Path]:
    """Each ``torch_aot_compile/<hash>`` folder whose rank 0 wrote its ``model`` artifact."""
    base = root / "torch_compile_cache" / "torch_aot_compile"
    try:
        hashes = sorted(p for p in base.iterdir() if p.is_dir())
    except OSError:
        return []
    return [h for h in hashes if (h / "rank_0_0" / "model").is_file()]


def _graph_matches(text: str, hidden_size: int, layers: int) -> bool:
    last = layers - 1
    if not re.search(rf"layers_modules_{last}_", text):
        return False
    if re.search(rf"layers_modules_{layers}_", text):
        return False
    return re.search(rf"\[[\d, ]*\b{hidden_size}\]", text) is not None


def find(environ: Mapping[str, str], *, hidden_size: int, layers: int) -> tuple[CompileCache, str]:
    """(warm, cold or unknown, why) for a model of this hidden size and layer count."""
    if environ.get("VLLM_DISABLE_COMPILE_CACHE", "0") not in ("", "0"):
        return CompileCache.COLD, "VLLM_DISABLE_COMPILE_CACHE is set"
    root = cache_root(environ)
    entries = _entries(root)
    # VLLM_USE_AOT_COMPILE=0: vLLM neither reads nor writes torch_aot_compile/ (``envs.
    # use_aot_compile``, ``TorchCompileWithNoGuardsWrapper.__call__``, 0.32)
    aot = [] if environ.get("VLLM_USE_AOT_COMPILE") == "0" else _aot_entries(root)
    if not entries and not aot:
        return CompileCache.COLD, NONE_OF_THIS_MODEL
    unreadable = 0
    for entry in entries:
        try:
            with (entry / "computation_graph.py").open(encoding="utf-8", errors="replace") as fh:
                text = fh.read(GRAPH_LIMIT)
        except OSError:
            unreadable += 1
            continue
        if _graph_matches(text, hidden_size, layers):
            return CompileCache.WARM, f"{entry.parent.parent} holds a graph of this model's shape"
    if unreadable:
        return CompileCache.UNKNOWN, f"{unreadable} entries under {root} without a readable graph"
    if aot:
        n = len(aot)
        return CompileCache.UNKNOWN, (
            f"{n} AOT-compiled {'entry' if n == 1 else 'entries'} under "
            f"{root / 'torch_compile_cache' / 'torch_aot_compile'}, whose model cannot be read"
        )
    return CompileCache.COLD, NONE_OF_THIS_MODEL
