"""The machine's side of a report: versions (bringup, Python, and the engine's environment:
the engine, torch and the CUDA it was built for, read from the interpreter that runs the
server command) and the GPUs through NVML (name, memory, driver, and the topology matrix when
more than one GPU is used), or a readings file.

Command line equivalent: ``VENV/bin/python -c 'import importlib.metadata as m;
print(m.version("vllm"), m.version("torch"))'``, ``nvidia-smi -q`` and ``nvidia-smi topo -m``.
"""

from __future__ import annotations

import json
import platform
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bringup import __version__
from bringup.adapters import gpus as gpu_adapter
from bringup.adapters.commands import LocalRunner, Runner
from bringup.core.report.model import GpuLine, Gpus
from bringup.errors import BringupError

# run by the server command's own interpreter: importlib.metadata only (no torch import: it
# takes seconds); the CUDA torch was built for is in torch/version.py
_PROBE = r"""
import importlib.metadata as m, json, re
out = {}
for name in ("vllm", "sglang", "text-generation-server", "llama_cpp_python", "torch", "transformers"):
    try:
        out[name] = m.version(name)
    except Exception:
        pass
try:
    path = next(p for p in m.files("torch") or () if str(p).replace("\\", "/") == "torch/version.py")
    text = path.locate().read_text()
    for key in ("cuda", "hip"):
        found = re.search(key + r"\s*(?::[^=\n]*)?=\s*['\"]([^'\"]+)['\"]", text)
        if found:
            out[key] = found.group(1)
except Exception:
    pass
print(json.dumps(out))
"""
_LABELS = {"cuda": "CUDA (torch built for)", "hip": "ROCm/HIP (torch built for)"}
PROBE_TIMEOUT_SECONDS = 20.0


def versions(
    argv: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
    runner: Runner | None = None,
) -> tuple[tuple[str, str], ...]:
    """bringup's and Python's versions, then what the server command's interpreter has."""
    out = [("bringup", __version__), ("Python (bringup's)", platform.python_version())]
    interpreter = engine_interpreter(argv, environ or {})
    if interpreter is not None:
        found = _probe(interpreter, runner or LocalRunner(dict(environ or {})))
        out += [(_LABELS.get(k, k), v) for k, v in found.items()]
    return tuple(out)


def engine_interpreter(argv: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """The Python that runs ``argv``: itself (``python -m ...``) or its script's ``#!`` line."""
    if not argv:
        return None
    words = list(argv)
    if Path(words[0]).name == "env":  # env NAME=value ... CMD
        words = [w for w in words[1:] if "=" not in w or w.startswith("-")]
        if not words:
            return None
    found = shutil.which(words[0], path=environ.get("PATH"))
    if found is None:
        return None
    if Path(found).name.startswith("python"):
        return found
    try:
        with open(found, "rb") as fh:
            first = fh.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    shebang = first[2:].decode("utf-8", "replace").split()
    if shebang and Path(shebang[0]).name == "env" and len(shebang) > 1:
        return shutil.which(shebang[1], path=environ.get("PATH"))
    return shebang[0] if shebang and Path(shebang[0]).name.startswith("python") else None


def _probe(interpreter: str, runner: Runner) -> dict[str, str]:
    try:
        result = runner.run([interpreter, "-c", _PROBE], timeout_seconds=PROBE_TIMEOUT_SECONDS)
        data = json.loads(result.stdout) if result.returncode == 0 else {}
    except (BringupError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


# nvmlDeviceGetTopologyCommonAncestor's levels as nvidia-smi topo -m names them
_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def gpus(gpus_from: str | None, world: int = 1, nvml: Any = None) -> Gpus:
    """The GPUs (a readings file, else NVML), the driver, and the topology when ``world`` > 1."""
    if gpus_from:
        try:
            readings = gpu_adapter.ReadingsFile(gpus_from).read()
        except BringupError as exc:
            return Gpus(note=f"GPUs not readable: {exc}")
        lines = tuple(
            GpuLine(g.index, g.name, g.memory_total_bytes, g.memory_used_bytes) for g in readings
        )
        return Gpus(lines, note=f"read from {gpus_from}, not from NVML")
    try:
        if nvml is None:
            import pynvml

            pynvml.nvmlInit()
            nvml = pynvml
        return _nvml_gpus(nvml, world)
    except Exception as exc:  # NVMLError and its many subclasses, a missing library
        return Gpus(note=f"no GPUs read through NVML ({type(exc).__name__}: {exc})")


def _nvml_gpus(nvml: Any, world: int) -> Gpus:
    count = int(nvml.nvmlDeviceGetCount())
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    lines = []
    for i, h in enumerate(handles):
        memory = nvml.nvmlDeviceGetMemoryInfo(h)
        lines.append(
            GpuLine(i, _text(nvml.nvmlDeviceGetName(h)), int(memory.total), int(memory.used))
        )
    driver = _text(nvml.nvmlSystemGetDriverVersion())
    cuda = int(nvml.nvmlSystemGetCudaDriverVersion())
    topology = _topology(nvml, handles) if world > 1 and count > 1 else ()
    return Gpus(tuple(lines), driver, f"{cuda // 1000}.{cuda % 1000 // 10}", topology)


def _topology(nvml: Any, handles: list[Any]) -> tuple[tuple[str, ...], ...]:
    names = [f"GPU{i}" for i in range(len(handles))]
    rows: list[tuple[str, ...]] = [("", *names)]
    for i, a in enumerate(handles):
        cells = []
        for j, b in enumerate(handles):
            cells.append("X" if i == j else _link(nvml, a, b))
        rows.append((names[i], *cells))
    return tuple(rows)


def _link(nvml: Any, a: Any, b: Any) -> str:
    links = _nvlinks(nvml, a, b)
    if links:
        return f"NV{links}"
    try:
        return _LEVELS.get(int(nvml.nvmlDeviceGetTopologyCommonAncestor(a, b)), "?")
    except Exception:
        return "?"


def _nvlinks(nvml: Any, a: Any, b: Any) -> int:
    """The active NVLinks from ``a`` to ``b`` (0 without NVLink)."""
    try:
        target = _bus(nvml.nvmlDeviceGetPciInfo(b).busId)
    except Exception:
        return 0
    count = 0
    for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
        try:
            if not nvml.nvmlDeviceGetNvLinkState(a, link):
                continue
            remote = _bus(nvml.nvmlDeviceGetNvLinkRemotePciInfo(a, link).busId)
        except Exception:
            break  # no such link: the rest are absent too
        count += remote == target
    return count


def _bus(value: str | bytes) -> str:
    """A PCI bus id without its domain (NVML writes 8 or 4 digits of it)."""
    return _text(value).lower().split(":", 1)[-1]


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
