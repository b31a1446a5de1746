"""GPUs bringup knows by name: memory as CUDA reports it, bandwidth, interconnect.

The entries are in ``core.gpu_table`` (each with its datasheet). ``memory_bytes`` is the total
that ``cudaMemGetInfo`` (``torch.cuda.mem_get_info``) and NVML report, which is what vLLM
multiplies by ``--gpu-memory-utilization``; it is smaller than the marketing size (an "80GB"
H100 reports 79.19 GiB). A name several parts share (``A100``: 40 GB or 80 GB, SXM or PCIe)
is refused with the choices, never taken to mean one of them.

>>> lookup("h100").name
'H100 80GB HBM3'
>>> lookup("NVIDIA RTX PRO 6000 Blackwell Server Edition").memory_bytes
102005473280
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from bringup.core.gpu_table import CATALOG, GpuModel
from bringup.errors import UsageError

__all__ = ["CATALOG", "GpuModel", "candidates", "find", "lookup"]


def _key(text: str) -> str:
    """Normalise a GPU name: lower case, vendor words and punctuation dropped."""
    words = re.sub(r"[^a-z0-9]+", " ", text.lower()).split()
    return " ".join(w for w in words if w not in {"nvidia", "amd", "geforce", "instinct", "tesla"})


_INDEX: dict[str, GpuModel] = {}
for _gpu in CATALOG:
    for _name in (_gpu.name, *_gpu.aliases):
        _INDEX.setdefault(_key(_name), _gpu)


def candidates(name: str) -> list[GpuModel]:
    """The catalog entries ``name`` may mean: the one it names (case, vendor prefix and
    punctuation aside), else every entry whose name or alias starts with it or that NVML's
    longer name starts with (``NVIDIA A100-SXM4-80GB ... Edition``): the longest such."""
    key = _key(name)
    if not key:
        return []
    if key in _INDEX:
        return [_INDEX[key]]
    squashed = key.replace(" ", "")
    for known, gpu in _INDEX.items():
        if known.replace(" ", "") == squashed:
            return [gpu]
    wider = _unique(g for k, g in _INDEX.items() if k.startswith(key + " "))
    if wider:
        return wider
    # NVML names with a suffix we do not list ("... Server Edition", "... 80GB HBM3e")
    hits = [(len(k), g) for k, g in _INDEX.items() if key.startswith(k + " ")]
    return [max(hits, key=lambda h: h[0])[1]] if hits else []


def _unique(gpus: Iterable[GpuModel]) -> list[GpuModel]:
    out: list[GpuModel] = []
    for gpu in gpus:
        if gpu not in out:
            out.append(gpu)
    return out


def find(name: str) -> GpuModel | None:
    """The catalog entry ``name`` names, or None when it names none or several."""
    found = candidates(name)
    return found[0] if len(found) == 1 else None


def lookup(name: str) -> GpuModel:
    """Like :func:`find`, but a name that fits none or several is a UsageError with the
    choices."""
    found = candidates(name)
    if len(found) == 1:
        return found[0]
    if found:
        choices = "; ".join(f"{g.name} ({g.memory_bytes / 2**30:.0f} GiB)" for g in found)
        raise UsageError(
            f"--gpu {name!r} is ambiguous: {choices}",
            hint="name one of them, e.g. --gpu " + repr(found[0].name),
        )
    names = {_key(g.name): g.name for g in CATALOG}
    close = difflib.get_close_matches(_key(name), list(names), n=3, cutoff=0.5)
    near = f" (closest: {', '.join(names[c] for c in close)})" if close else ""
    raise UsageError(
        f"unknown GPU {name!r}{near}",
        hint="bringup plan --list-gpus shows the catalog; or give --gpu-memory SIZE "
        "and --memory-bandwidth RATE",
    )
