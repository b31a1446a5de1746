"""The GPU-memory guard, as pure decisions: which GPUs, are they free, who holds them, and
which holders are provably stale instances of the service we are about to start.

The CLI reads GPUs and processes (``adapters/gpus.py``, ``adapters/procinfo.py``), and this
module decides. Nothing here reads the clock, the environment or ``/proc``.

``--gpus`` indices are CUDA indices: positions in ``CUDA_VISIBLE_DEVICES`` when it is set
(what the server itself will see), physical indices otherwise. UUIDs (or unique prefixes)
name GPUs in any case. Reported ``index`` values are physical (what nvidia-smi shows).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from bringup.core.gpu import GpuReading, select_visible
from bringup.core.words import count
from bringup.errors import UsageError


@dataclass(frozen=True, slots=True)
class Cgroup:
    """Where a process sits in the cgroup tree, read from ``/proc/PID/cgroup``."""

    path: str  # "/system.slice/vllm.service"; "/" for the root
    unit: str | None = None  # innermost systemd unit: "vllm.service", "session-3.scope"
    unit_path: str | None = None  # the cgroup of that unit, "/system.slice/vllm.service"
    user_manager: str | None = None  # "user@1000.service" for units of a user's manager
    container: str | None = None  # "docker:0123456789ab", "podman:…", "containerd:…", "crio:…"


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """What the host says about one process."""

    pid: int
    name: str
    cmdline: tuple[str, ...] = ()
    cgroup: Cgroup | None = None
    started_at: float | None = None  # creation time (epoch seconds): guards against PID reuse
    ancestors: tuple[tuple[int, tuple[str, ...]], ...] = ()  # (pid, cmdline), parent first


@dataclass(frozen=True, slots=True)
class Holder:
    """A process holding memory on a GPU, as the guard reports it."""

    pid: int
    name: str
    unit: str | None
    used_bytes: int | None
    cmdline: tuple[str, ...] = ()
    container: str | None = None


@dataclass(frozen=True, slots=True)
class GpuState:
    """One selected GPU at one sample: its use and who holds it."""

    index: int  # physical (NVML) index
    used_bytes: int
    holders: tuple[Holder, ...]
    ok: bool  # under the limit
    uuid: str = ""
    name: str = ""
    total_bytes: int = 0


@dataclass(frozen=True, slots=True)
class Threshold:
    """When a GPU counts as free: at most ``max_used_bytes`` used, or ``need_bytes`` free."""

    max_used_bytes: int | None = None
    need_bytes: int | None = None

    def is_free(self, gpu: GpuReading) -> bool:
        """Whether ``gpu`` satisfies this threshold."""
        if self.need_bytes is not None:
            return gpu.memory_free_bytes >= self.need_bytes
        if self.max_used_bytes is not None:
            return gpu.memory_used_bytes <= self.max_used_bytes
        return True


def impossible_need(selected: Sequence[GpuReading], threshold: Threshold) -> list[GpuReading]:
    """The GPUs whose whole memory is below ``--need``: it can never be free there, so
    waiting would only run out the timeout (the guard refuses at once instead)."""
    need = threshold.need_bytes
    return [] if need is None else [g for g in selected if g.memory_total_bytes < need]


@dataclass(frozen=True, slots=True)
class Stale:
    """A holder the guard may end, and the proof that it is an earlier instance."""

    pid: int
    name: str
    reason: str
    started_at: float | None = None


def select_gpus(
    readings: Sequence[GpuReading], cuda_visible_devices: str | None, gpus: str | None
) -> list[GpuReading]:
    """The GPUs to guard: CUDA_VISIBLE_DEVICES applied, then ``--gpus`` within that.

    >>> gs = [GpuReading(i, "H100", f"GPU-{i}aaa", 80, 0) for i in range(4)]
    >>> [g.index for g in select_gpus(gs, "2,3", "1")]
    [3]
    >>> [g.index for g in select_gpus(gs, None, "GPU-0,2")]
    [0, 2]
    """
    if not readings and not (gpus or "").strip():
        return []  # no GPU on this machine (a CPU server): nothing to wait for
    visible = select_visible(list(readings), cuda_visible_devices)
    if not visible:
        raise UsageError(
            f"no GPU to guard: CUDA_VISIBLE_DEVICES={cuda_visible_devices!r} names none of "
            f"the {count(len(readings), 'GPU')}",
            hint="unset it or list indices/UUIDs that exist",
        )
    if gpus is None or not gpus.strip():
        return visible
    chosen: list[GpuReading] = []
    for token in (t.strip() for t in gpus.split(",") if t.strip()):
        gpu = _pick(visible, token, cuda_visible_devices)
        if gpu not in chosen:
            chosen.append(gpu)
    return chosen


def _pick(visible: list[GpuReading], token: str, cvd: str | None) -> GpuReading:
    if token.isdigit() and int(token) < len(visible):
        return visible[int(token)]
    if token.startswith(("GPU-", "MIG-")):
        hits = [g for g in visible if g.uuid.startswith(token)]
        if len(hits) == 1:
            return hits[0]
    shown = ", ".join(f"{i}={g.uuid or g.index}" for i, g in enumerate(visible))
    where = f" (CUDA_VISIBLE_DEVICES={cvd})" if cvd is not None else ""
    raise UsageError(
        f"--gpus: no visible GPU {token!r}{where}; visible: {shown}",
        hint="use CUDA indices 0..N-1 of the visible GPUs, or UUIDs",
    )


def evaluate(
    selected: Iterable[GpuReading],
    threshold: Threshold,
    processes: Mapping[int, ProcessInfo],
) -> tuple[GpuState, ...]:
    """Each selected GPU's state, holders named from ``processes`` where known."""
    return tuple(
        GpuState(
            index=gpu.index,
            used_bytes=gpu.memory_used_bytes,
            holders=tuple(_holder(p.pid, p.name, p.used_bytes, processes) for p in gpu.processes),
            ok=threshold.is_free(gpu),
            uuid=gpu.uuid,
            name=gpu.name,
            total_bytes=gpu.memory_total_bytes,
        )
        for gpu in selected
    )


def _holder(pid: int, name: str, used: int | None, processes: Mapping[int, ProcessInfo]) -> Holder:
    info = processes.get(pid)
    if info is None:
        return Holder(pid=pid, name=name, unit=None, used_bytes=used)
    cg = info.cgroup
    return Holder(
        pid=pid,
        name=info.name or name,
        unit=cg.unit if cg else None,
        used_bytes=used,
        cmdline=info.cmdline,
        container=cg.container if cg else None,
    )


def find_stale(
    holders: Iterable[ProcessInfo],
    own: ProcessInfo | None,
    service_cmdline: Sequence[str] | None,
) -> list[Stale]:
    """The holders that are provably earlier instances of the service; nothing else.

    Proof is one of: the same systemd service unit or container as the guard itself (the
    guard runs as the unit's ExecStartPre), the service's command line, or being a child
    of a process running the service's command line. The guard and its ancestors, and
    PIDs 0 and 1, are never stale.
    """
    protected = {0, 1}
    if own is not None:
        protected |= {own.pid, *(pid for pid, _ in own.ancestors)}
    out: list[Stale] = []
    for info in holders:
        if info.pid in protected or any(s.pid == info.pid for s in out):
            continue
        reason = _stale_reason(info, own, service_cmdline)
        if reason is not None:
            out.append(Stale(info.pid, info.name, reason, info.started_at))
    return out


def _stale_reason(
    info: ProcessInfo, own: ProcessInfo | None, service: Sequence[str] | None
) -> str | None:
    if own is not None and own.cgroup is not None and info.cgroup is not None:
        same = _same_service(own.cgroup, info.cgroup)
        if same is not None:
            return same
    if service:
        if matches_cmdline(info.cmdline, service):
            return "runs the service's command line"
        for pid, cmdline in info.ancestors:
            if matches_cmdline(cmdline, service):
                return f"child of PID {pid}, which runs the service's command line"
    return None


def _same_service(own: Cgroup, other: Cgroup) -> str | None:
    if own.container is not None and own.container == other.container:
        return f"in the guard's own container ({own.container})"
    if own.unit is None or own.unit_path is None or not is_service_unit(own.unit):
        return None
    if other.path == own.unit_path or other.path.startswith(own.unit_path + "/"):
        return f"in the guard's own systemd unit ({own.unit})"
    return None


def is_service_unit(unit: str) -> bool:
    """A ``.service`` that is not a user's whole service manager (``user@1000.service``)."""
    return unit.endswith(".service") and not unit.startswith("user@")


_INTERPRETER = re.compile(r"^(python|pypy)[0-9.]*$")


def matches_cmdline(actual: Sequence[str], wanted: Sequence[str]) -> bool:
    """Whether a process command line is ``wanted``, allowing a Python interpreter prefix.

    The executable is compared by base name (``vllm`` matches ``/opt/venv/bin/vllm``), the
    arguments exactly (two Python interpreters count as the same executable). A console script runs as ``python3 /opt/venv/bin/vllm serve …``,
    so an interpreter (with its own ``-`` options) may come first; nothing else may.

    >>> matches_cmdline(["/usr/bin/python3", "/v/bin/vllm", "serve", "m"], ["vllm", "serve", "m"])
    True
    >>> matches_cmdline(["bringup", "guard", "--", "vllm", "serve", "m"], ["vllm", "serve", "m"])
    False
    """
    n = len(wanted)
    if n == 0 or len(actual) < n:
        return False
    tail, prefix = actual[len(actual) - n :], actual[: len(actual) - n]
    if not _same_executable(tail[0], wanted[0]) or list(tail[1:]) != list(wanted[1:]):
        return False
    if not prefix:
        return True
    return bool(_INTERPRETER.match(_base(prefix[0]))) and all(a.startswith("-") for a in prefix[1:])


def _same_executable(a: str, b: str) -> bool:
    """Equal base names; any two Python interpreters (``python3``, ``python3.11``) count as one."""
    base_a, base_b = _base(a), _base(b)
    return base_a == base_b or bool(_INTERPRETER.match(base_a) and _INTERPRETER.match(base_b))


def _base(arg: str) -> str:
    return PurePosixPath(arg).name


@dataclass(frozen=True, slots=True)
class Ended:
    """A stale holder the guard ended (or tried to), and how that went."""

    pid: int
    name: str
    reason: str  # the proof that it was an earlier instance of the service
    outcome: str  # "SIGTERM", "SIGKILL", "gone", "denied" or "survived"


@dataclass(frozen=True, slots=True)
class GuardResult:
    """The guard's final state: what ``--json`` prints."""

    ok: bool
    waited_seconds: float
    gpus: tuple[GpuState, ...]
    max_used_bytes: int | None = None
    need_bytes: int | None = None
    killed: tuple[Ended, ...] = ()


def all_free(states: Iterable[GpuState]) -> bool:
    """Whether every guarded GPU is under its limit."""
    return all(s.ok for s in states)
