"""The GPU readings file the twin writes (the format ``--gpus-from FILE`` reads).

Several twin processes update it (each worker owns its GPU's memory), so every update is a
read-modify-write under an exclusive ``flock`` on the file's directory, written to a
temporary file and renamed over the old one: a reader never sees half a document.

A missing file is created with the default GPU set. An existing file keeps its GPU list;
the twin changes only ``memory_used_bytes`` and ``processes`` of the GPUs it uses, and
keeps memory the file attributes to nobody: ``used = (old used - old processes) + new
processes``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bringup.twin import memory


def default_document(count: int = memory.DEFAULT_GPU_COUNT) -> dict[str, Any]:
    """Four idle RTX PRO 6000 Blackwell GPUs."""
    return {
        "gpus": [
            {
                "index": i,
                "name": memory.GPU_NAME,
                "uuid": f"GPU-7c1e0a52-3b9d-4f6e-a1c8-9d2e5f00000{i}",
                "memory_total_bytes": memory.GPU_TOTAL_BYTES,
                "memory_used_bytes": 0,
                "processes": [],
            }
            for i in range(count)
        ]
    }


def visible(gpus: list[dict[str, Any]], cuda_visible_devices: str | None) -> list[dict[str, Any]]:
    """The GPUs CUDA shows, in CUDA order (indices or UUID prefixes; stops at a bad entry)."""
    if cuda_visible_devices is None:
        return sorted(gpus, key=lambda g: int(g["index"]))
    chosen: list[dict[str, Any]] = []
    for token in (t.strip() for t in cuda_visible_devices.split(",")):
        match = next(
            (
                g
                for g in gpus
                if token and (token == str(g["index"]) or str(g.get("uuid", "")).startswith(token))
            ),
            None,
        )
        if match is None or match in chosen:
            break
        chosen.append(match)
    return chosen


class Ledger:
    """The twin's view of the readings file; every method is a locked, atomic update."""

    def __init__(self, path: str | None) -> None:
        self.path = Path(path) if path else None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        assert self.path is not None
        directory = self.path.parent if str(self.path.parent) else Path(".")
        # SIGTERM waits until the document is written: a reader never finds it half-updated
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        fd = os.open(directory, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            doc = self._read()
            yield doc
            self._write(doc)
        finally:
            os.close(fd)  # closing releases the lock
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def _read(self) -> dict[str, Any]:
        assert self.path is not None
        try:
            doc: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return default_document()
        return doc

    def _write(self, doc: dict[str, Any]) -> None:
        assert self.path is not None
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, self.path)

    def gpus(self) -> list[dict[str, Any]]:
        """The GPU list (creating the file with the default set when it is missing)."""
        if self.path is None:
            default: list[dict[str, Any]] = default_document()["gpus"]
            return default
        with self._locked() as doc:
            gpus: list[dict[str, Any]] = doc["gpus"]
        return gpus

    def set_usage(self, pid: int, name: str, gpu_index: int, used_bytes: int) -> None:
        """Record that ``pid`` holds ``used_bytes`` on GPU ``gpu_index``."""
        if self.path is None:
            return
        with self._locked() as doc:
            for gpu in doc["gpus"]:
                if int(gpu["index"]) == gpu_index:
                    procs = [p for p in gpu.get("processes", []) if int(p["pid"]) != pid]
                    procs.append({"pid": pid, "name": name, "used_bytes": used_bytes})
                    _replace_processes(gpu, procs)

    def release(self, pids: set[int]) -> None:
        """Drop every entry of ``pids`` (the driver frees a dead process's memory)."""
        if self.path is None or not pids:
            return
        with self._locked() as doc:
            for gpu in doc["gpus"]:
                procs = gpu.get("processes", [])
                if any(int(p["pid"]) in pids for p in procs):
                    _replace_processes(gpu, [p for p in procs if int(p["pid"]) not in pids])

    def release_dead(self, prefix: str) -> None:
        """Drop entries named ``prefix...`` whose process is gone (the driver frees them)."""
        if self.path is None or not self.path.exists():
            return
        with self._locked() as doc:
            dead = _dead_pids(doc, prefix)
            for gpu in doc["gpus"]:
                procs = gpu.get("processes", [])
                _replace_processes(gpu, [p for p in procs if int(p["pid"]) not in dead])


def _held(procs: list[dict[str, Any]]) -> int:
    return sum(int(p.get("used_bytes") or 0) for p in procs)


def _replace_processes(gpu: dict[str, Any], procs: list[dict[str, Any]]) -> None:
    unattributed = int(gpu.get("memory_used_bytes", 0)) - _held(gpu.get("processes", []))
    gpu["processes"] = procs
    gpu["memory_used_bytes"] = max(0, unattributed) + _held(procs)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _dead_pids(doc: dict[str, Any], prefix: str) -> set[int]:
    return {
        int(p["pid"])
        for gpu in doc["gpus"]
        for p in gpu.get("processes", [])
        if str(p.get("name", "")).startswith(prefix) and not _alive(int(p["pid"]))
    }
