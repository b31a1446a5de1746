"""Read GPUs: through NVML (nvidia-ml-py) on a real machine, or from a readings file.

The readings file is what ``bringup twin`` writes and ``--gpus-from FILE`` reads; it is
re-read at every sample, so a test or demo can change it while bringup watches::

    {"gpus": [{"index": 0, "name": "NVIDIA RTX PRO 6000 Blackwell", "uuid": "GPU-...",
               "memory_total_bytes": 102005473280, "memory_used_bytes": 1048576,
               "processes": [{"pid": 4242, "name": "python3", "used_bytes": 1048576}]}]}

Command line equivalent: ``nvidia-smi --query-gpu=index,name,uuid,memory.total,memory.used
--format=csv`` and ``nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid
--format=csv``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

from bringup.core.gpu import GpuProcess, GpuReading
from bringup.errors import AdapterError, InputError

MAX_READINGS_BYTES = 16 * 1024 * 1024  # a readings file is a few kB per GPU


class GpuSource(Protocol):
    """Anything that can produce a fresh reading of the GPUs."""

    def read(self) -> list[GpuReading]:
        """Return the GPUs now, in index order."""
        ...


class ReadingsFile:
    """GPUs described by a JSON readings file, re-read on every call."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def read(self) -> list[GpuReading]:
        from bringup.adapters import files

        if not os.path.lexists(self.path):
            raise InputError(f"GPU readings file not found: {files.shown(self.path)}")
        data = files.read_json(
            self.path,
            limit=MAX_READINGS_BYTES,
            what="GPU readings file",
            hint='give the JSON `bringup twin` writes: {"gpus": [...]}',
        )
        return parse_readings(data, source=files.shown(self.path))


def parse_readings(data: Any, *, source: str = "readings") -> list[GpuReading]:
    """Turn the readings JSON (already parsed) into ``GpuReading`` values."""
    try:
        gpus = data["gpus"]
        out = [
            GpuReading(
                index=int(g["index"]),
                name=str(g.get("name", "GPU")),
                uuid=str(g.get("uuid", f"GPU-{g['index']}")),
                memory_total_bytes=int(g["memory_total_bytes"]),
                memory_used_bytes=int(g["memory_used_bytes"]),
                processes=tuple(
                    GpuProcess(
                        pid=int(p["pid"]),
                        name=str(p.get("name", "")),
                        used_bytes=None if p.get("used_bytes") is None else int(p["used_bytes"]),
                    )
                    for p in g.get("processes", [])
                ),
            )
            for g in gpus
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(
            f"{source}: not a GPU readings document ({type(exc).__name__}: {exc})",
            hint='expected {"gpus": [{"index", "memory_total_bytes", "memory_used_bytes", ...}]}',
        ) from exc
    return sorted(out, key=lambda g: g.index)


class NvmlGpus:
    """GPUs read through NVML. Initialises lazily; every NVML error becomes AdapterError."""

    def __init__(
        self, hint: str = "no NVIDIA driver here? give --gpus-from FILE (a GPU readings file)"
    ) -> None:
        self._initialised = False
        self.hint = hint

    def _init(self) -> Any:
        try:
            import pynvml
        except ImportError as exc:  # pragma: no cover - nvidia-ml-py is a dependency
            raise AdapterError("nvidia-ml-py is not installed") from exc
        if not self._initialised:
            try:
                pynvml.nvmlInit()
            except pynvml.NVMLError as exc:
                raise AdapterError(
                    f"cannot read GPUs through NVML: {exc}",
                    hint=self.hint,
                ) from exc
            self._initialised = True
        return pynvml

    def read(self) -> list[GpuReading]:
        nvml = self._init()
        try:
            return [self._read_one(nvml, i) for i in range(nvml.nvmlDeviceGetCount())]
        except nvml.NVMLError as exc:
            raise AdapterError(f"NVML query failed: {exc}") from exc

    @staticmethod
    def _read_one(nvml: Any, index: int) -> GpuReading:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        procs = []
        try:
            running = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        except nvml.NVMLError:
            running = []
        for p in running:
            used = getattr(p, "usedGpuMemory", None)
            procs.append(
                GpuProcess(pid=int(p.pid), name=_process_name(int(p.pid)), used_bytes=used)
            )
        return GpuReading(
            index=index,
            name=_text(nvml.nvmlDeviceGetName(handle)),
            uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
            memory_total_bytes=int(memory.total),
            memory_used_bytes=int(memory.used),
            processes=tuple(procs),
        )


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _process_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def open_source(gpus_from: str | None, *, hint: str | None = None) -> GpuSource:
    """The readings file when given, else NVML; ``hint`` names the caller's own flags for
    when NVML cannot be read (the default names ``--gpus-from FILE``)."""
    if gpus_from:
        return ReadingsFile(gpus_from)
    return NvmlGpus(hint) if hint else NvmlGpus()
