"""Processes on this host: name, command line, systemd unit or container, and ending them.

The unit or container comes from ``/proc/PID/cgroup``, in any of its layouts::

    0::/system.slice/vllm.service                                  cgroup v2, system unit
    1:name=systemd:/system.slice/vllm.service                      cgroup v1 (hybrid too)
    0::/user.slice/user-1000.slice/user@1000.service/app.slice/llm.service   user unit
    0::/system.slice/docker-<64 hex>.scope                         docker, systemd driver
    12:pids:/docker/<64 hex>                                       docker, cgroupfs driver
    0::/machine.slice/libpod-<64 hex>.scope                        podman
    0::/kubepods.slice/…/cri-containerd-<64 hex>.scope             containerd (Kubernetes)

Ending a process (``terminate``) is SIGTERM, a grace period, then SIGKILL, and only for a
process whose start time still matches what was inspected, so a reused PID is never hit.

Command line equivalent: ``ps -o pid,comm,args -p PID`` and ``cat /proc/PID/cgroup``.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import psutil

from bringup.core.guard import Cgroup, ProcessInfo

_CONTAINER_SCOPES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^docker-([0-9a-f]{12,})\.scope$"), "docker"),
    (re.compile(r"^libpod-(?:conmon-)?([0-9a-f]{12,})\.scope$"), "podman"),
    (re.compile(r"^cri-containerd-([0-9a-f]{12,})\.scope$"), "containerd"),
    (re.compile(r"^crio-(?:conmon-)?([0-9a-f]{12,})\.scope$"), "crio"),
)
_CGROUPFS_RUNTIMES = {"docker": "docker", "libpod_parent": "podman", "kubepods": "kubernetes"}
_HEX_ID = re.compile(r"^(?:[a-z-]+-)?([0-9a-f]{64})(?:\.scope)?$")
_UNIT = re.compile(r"\.(service|scope)$")


def parse_cgroup(text: str) -> Cgroup | None:
    """The cgroup a ``/proc/PID/cgroup`` text places the process in (None if unreadable).

    The v1 ``name=systemd`` hierarchy is preferred, then the v2 ``0::`` line, then the
    first v1 controller with a path other than the root.
    """
    path = _pick_path(text)
    if path is None:
        return None
    segments = [s for s in path.split("/") if s]
    container = _container(segments)
    unit, unit_path, manager = _unit(segments)
    return Cgroup(
        path=path, unit=unit, unit_path=unit_path, user_manager=manager, container=container
    )


def _pick_path(text: str) -> str | None:
    v2: str | None = None
    v1: str | None = None
    for line in text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "name=systemd":
            return path
        if controllers == "" and parts[0] == "0":
            v2 = path
        elif v1 is None and path not in ("", "/"):
            v1 = path
    return v2 if v2 not in (None, "/") or v1 is None else v1


def _container(segments: list[str]) -> str | None:
    for seg in reversed(segments):
        for pattern, runtime in _CONTAINER_SCOPES:
            m = pattern.match(seg)
            if m:
                return f"{runtime}:{m.group(1)[:12]}"
    last = _HEX_ID.match(segments[-1]) if segments else None
    if last is None:
        return None
    for seg in segments[:-1]:
        found = _CGROUPFS_RUNTIMES.get(seg.split(".")[0].split("-")[0])
        if found is not None:
            return f"{found}:{last.group(1)[:12]}"
    return None


def _unit(segments: list[str]) -> tuple[str | None, str | None, str | None]:
    """The innermost systemd unit that is not a container scope, its cgroup, its manager."""
    manager = next((s for s in segments if s.startswith("user@") and s.endswith(".service")), None)
    for i in range(len(segments) - 1, -1, -1):
        seg = segments[i]
        if _UNIT.search(seg) and not any(p.match(seg) for p, _ in _CONTAINER_SCOPES):
            if seg == manager and i < len(segments) - 1:
                continue  # inside the user manager but in no unit of it (e.g. init.scope)
            return seg, "/" + "/".join(segments[: i + 1]), manager
    return None, None, manager


def read_cgroup(pid: int, proc_root: Path = Path("/proc")) -> Cgroup | None:
    """The cgroup of ``pid``, or None when ``/proc`` does not say (gone, no access)."""
    try:
        return parse_cgroup((proc_root / str(pid) / "cgroup").read_text())
    except OSError:
        return None


def inspect(pid: int) -> ProcessInfo | None:
    """What can be learnt about ``pid`` now; None when it is gone or cannot be read."""
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            name = proc.name()
            started = proc.create_time()
            cmdline = _cmdline(proc)
            parents = proc.parents()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except psutil.AccessDenied:
        return ProcessInfo(pid=pid, name="", cgroup=read_cgroup(pid))
    ancestors = tuple((p.pid, _cmdline(p)) for p in parents)
    return ProcessInfo(
        pid=pid,
        name=name,
        cmdline=cmdline,
        cgroup=read_cgroup(pid),
        started_at=started,
        ancestors=ancestors,
    )


def _cmdline(proc: psutil.Process) -> tuple[str, ...]:
    try:
        return tuple(proc.cmdline())
    except (psutil.Error, OSError):
        return ()


def terminate(pid: int, started_at: float | None, grace_seconds: float) -> str:
    """End ``pid``: SIGTERM, wait up to ``grace_seconds``, then SIGKILL.

    Returns what happened: ``"SIGTERM"`` (it exited), ``"SIGKILL"``, ``"gone"`` (already
    gone, or the PID now names another process), ``"denied"`` or ``"survived"``.
    """
    try:
        proc = psutil.Process(pid)
        if started_at is not None and abs(proc.create_time() - started_at) > 0.01:
            return "gone"
        proc.terminate()
        if _wait_gone(proc, grace_seconds):
            return "SIGTERM"
        proc.kill()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return "gone"
    except psutil.AccessDenied:
        return "denied"
    return "SIGKILL" if _wait_gone(proc, max(grace_seconds, 5.0)) else "survived"


def _wait_gone(proc: psutil.Process, timeout_seconds: float) -> bool:
    """Poll until the process has exited (a zombie counts as exited); never reaps it."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
