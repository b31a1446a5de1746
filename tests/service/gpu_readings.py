"""Build GPU readings files for the guard tests, written atomically like a real writer."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

GiB = 1024**3
MiB = 1024**2


def gpu(
    index: int,
    used_bytes: int,
    processes: Sequence[tuple[int, str, int]] = (),
    *,
    total_bytes: int = 80 * GiB,
) -> dict[str, Any]:
    """One GPU entry of a readings document; processes are (pid, name, used_bytes)."""
    return {
        "index": index,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": f"GPU-{index}{index}aa-0000",
        "memory_total_bytes": total_bytes,
        "memory_used_bytes": used_bytes,
        "processes": [{"pid": p, "name": n, "used_bytes": b} for p, n, b in processes],
    }


def write_readings(path: Path, gpus: list[dict[str, Any]]) -> Path:
    """Replace the readings file in one step, so a reader never sees half a document."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"gpus": gpus}), encoding="utf-8")
    os.replace(tmp, path)
    return path
