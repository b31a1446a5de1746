"""GPU readings as values: what every GPU-aware command works on (never NVML itself)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A process holding memory on one GPU."""

    pid: int
    name: str
    used_bytes: int | None  # None when the driver does not say (e.g. inside some containers)


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU at one moment. Bytes are what NVML reports (total as cudaMemGetInfo sees it)."""

    index: int
    name: str
    uuid: str
    memory_total_bytes: int
    memory_used_bytes: int
    processes: tuple[GpuProcess, ...] = ()

    @property
    def memory_free_bytes(self) -> int:
        """Total minus used, never negative."""
        return max(0, self.memory_total_bytes - self.memory_used_bytes)


def select_visible(
    readings: list[GpuReading], cuda_visible_devices: str | None
) -> list[GpuReading]:
    """Apply CUDA_VISIBLE_DEVICES (indices or UUID prefixes) the way CUDA does.

    The result is in CUDA order: the first listed device becomes CUDA device 0. Parsing stops
    at the first entry that names no device, as CUDA does. ``None`` means all devices;
    an empty string means none.

    >>> gpus = [GpuReading(i, "H100", f"GPU-{i}aaa", 80, 0) for i in range(4)]
    >>> [g.index for g in select_visible(gpus, "2,0")]
    [2, 0]
    >>> [g.index for g in select_visible(gpus, "GPU-3")]
    [3]
    >>> [g.index for g in select_visible(gpus, "1,x,2")]
    [1]
    """
    if cuda_visible_devices is None:
        return list(readings)
    chosen: list[GpuReading] = []
    for token in (t.strip() for t in cuda_visible_devices.split(",")):
        match = _match_device(readings, token)
        if match is None or match in chosen:
            break
        chosen.append(match)
    return chosen


def _match_device(readings: list[GpuReading], token: str) -> GpuReading | None:
    if token.isdigit():
        return next((g for g in readings if g.index == int(token)), None)
    if token.startswith(("GPU-", "MIG-")):
        hits = [g for g in readings if g.uuid.startswith(token)]
        return hits[0] if len(hits) == 1 else None
    return None
