"""A docker container as values: its state from ``docker inspect``, the server command inside
it, where its port answers on the host, and the one pure function that says where it stands
(``bringup status --container``; the verdicts and exit codes are the unit's,
:class:`bringup.core.service.Verdict`).

``docker inspect`` shapes (Docker Engine API, ``ContainerJSON``): ``State`` holds ``Status``
(created | running | paused | restarting | removing | exited | dead), ``Running``,
``Restarting``, ``OOMKilled``, ``Pid``, ``ExitCode``, ``Error``, ``StartedAt``,
``FinishedAt`` and, with a HEALTHCHECK, ``Health.Status``; ``RestartCount`` and
``HostConfig.RestartPolicy.Name`` are beside it; ``NetworkSettings.Ports`` maps
``"8000/tcp"`` to ``[{"HostIp": "0.0.0.0", "HostPort": "18000"}]``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bringup.core.diagnosis import Diagnosis
from bringup.core.service import Verdict
from bringup.core.vocab import Outcome

_ZERO_TIME = "0001-01-01T00:00:00Z"  # docker's "never"


@dataclass(frozen=True, slots=True)
class ContainerState:
    """The container's state as docker reports it."""

    status: str  # created | running | paused | restarting | removing | exited | dead
    running: bool
    restarting: bool
    oom_killed: bool
    pid: int | None
    exit_code: int | None
    error: str
    started_at: str | None  # RFC 3339 (nanoseconds), None when it never started
    finished_at: str | None
    restart_count: int
    restart_policy: str  # no | always | unless-stopped | on-failure
    health: str | None  # starting | healthy | unhealthy, None without a HEALTHCHECK

    @classmethod
    def from_inspect(cls, data: Mapping[str, Any]) -> ContainerState:
        """From the first object of ``docker inspect NAME``."""
        state = data.get("State") or {}
        policy = (data.get("HostConfig") or {}).get("RestartPolicy") or {}
        health = state.get("Health") or {}
        return cls(
            status=str(state.get("Status", "")),
            running=bool(state.get("Running")),
            restarting=bool(state.get("Restarting")),
            oom_killed=bool(state.get("OOMKilled")),
            pid=_int(state.get("Pid")) or None,
            exit_code=_int(state.get("ExitCode")),
            error=str(state.get("Error") or ""),
            started_at=_time(state.get("StartedAt")),
            finished_at=_time(state.get("FinishedAt")),
            restart_count=_int(data.get("RestartCount")) or 0,
            restart_policy=str(policy.get("Name") or "no"),
            health=str(health["Status"]) if health.get("Status") else None,
        )


def command(data: Mapping[str, Any]) -> list[str]:
    """The command the container runs: its entrypoint, then its cmd."""
    config = data.get("Config") or {}
    return [str(w) for w in (*(config.get("Entrypoint") or []), *(config.get("Cmd") or []))]


def host_url(url: str, data: Mapping[str, Any]) -> str:
    """``url`` (the server's own address inside the container) as reached from the docker host:
    a published port becomes its host port (``0.0.0.0``/``::`` bindings on 127.0.0.1); with
    ``--network=host`` or an unpublished port the URL is kept.

    >>> ports = {"NetworkSettings": {"Ports": {"8000/tcp": [{"HostIp": "0.0.0.0", "HostPort": "18000"}]}}}
    >>> host_url("http://127.0.0.1:8000", ports)
    'http://127.0.0.1:18000'
    """
    if "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    hostport, _, _path = rest.partition("/")
    port = hostport.rsplit(":", 1)[-1] if ":" in hostport else ""
    ports = (data.get("NetworkSettings") or {}).get("Ports") or {}
    bindings = ports.get(f"{port}/tcp") if port else None
    if not bindings:
        return url
    first = bindings[0]
    host = str(first.get("HostIp") or "")
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    elif ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{first.get('HostPort', port)}"


def derive(
    state: ContainerState, diagnosis: Diagnosis | None, answers: bool | None
) -> tuple[Verdict, str]:
    """The verdict and one line saying why, from the state, the current (or, stopped, the
    last) run's log and whether the model answered a smoke request (None: not asked)."""
    failure = diagnosis.failure if diagnosis is not None else None
    failed = failure is not None and diagnosis is not None and diagnosis.outcome is Outcome.FAILED
    restarts = f", restart {state.restart_count}" if state.restart_count else ""
    if state.restarting:
        if failed and failure is not None:
            return Verdict.FAILED, (
                f"{failure.failure_class} during {failure.phase} in the last run; "
                f"docker is restarting it (policy {state.restart_policy}{restarts})"
            )
        return Verdict.STARTING, (
            f"restarting after exit code {state.exit_code} "
            f"(policy {state.restart_policy}{restarts})"
        )
    if state.status in ("exited", "dead"):
        if state.oom_killed:
            return Verdict.FAILED, "the container was killed for memory (OOMKilled)"
        if failed and failure is not None:
            return (
                Verdict.FAILED,
                f"exited ({state.exit_code}): {failure.failure_class} during {failure.phase}",
            )
        if state.exit_code:
            return Verdict.FAILED, f"exited with code {state.exit_code}"
        return Verdict.UNKNOWN, f"not running ({state.status}, exit code {state.exit_code})"
    if state.status == "created":
        return Verdict.UNKNOWN, "created, never started"
    if failed and failure is not None:
        return Verdict.FAILED, f"{failure.failure_class} during {failure.phase} in the current run"
    if state.status == "paused":
        return Verdict.UNKNOWN, "paused (docker unpause it)"
    if state.running:
        if answers is True:
            return Verdict.READY, "running, and the model answered a smoke request"
        if answers is False:
            if diagnosis is None or diagnosis.outcome is not Outcome.READY:
                reached = diagnosis.phase.value if diagnosis is not None else "no log yet"
                return Verdict.STARTING, f"running, still starting ({reached})"
            return Verdict.FAILED, "running and its log says ready, but the model does not answer"
        return Verdict.UNKNOWN, "running; the model was not asked"
    return Verdict.UNKNOWN, f"not running ({state.status or 'no state'})"


def instant(timestamp: str) -> tuple[int, int] | None:
    """An RFC 3339 timestamp as (seconds since the epoch, nanoseconds), comparable whatever
    its precision (``docker inspect`` trims trailing zeros, ``docker logs`` pads to nine
    digits); None when it is not one.

    >>> instant("2026-12-01T12:00:00.1Z") == instant("2026-12-01T12:00:00.100000000Z")
    True
    """
    head, dot, rest = timestamp.partition(".")
    digits = ""
    if dot:
        while rest and rest[0].isdigit():
            digits, rest = digits + rest[0], rest[1:]
    try:
        when = dt.datetime.fromisoformat(head + (rest if dot else ""))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp()), int((digits + "000000000")[:9])


RESTART_DELAY_NS = 100_000_000  # docker's first (and smallest) wait before a restart: 100 ms


def run_start(state: ContainerState) -> tuple[int, int] | None:
    """Where the log of the current (or, stopped, the last) run begins. ``StartedAt`` is set
    once the process already runs, so its first lines can be stamped a little before it
    (measured: 1.6 ms before, for a run that wrote its root cause at once). Running, the
    previous run's ``FinishedAt`` bounds it exactly; otherwise ``StartedAt`` less docker's
    smallest restart delay, before which the previous run had ended."""
    start = instant(state.started_at) if state.started_at else None
    if start is None:
        return None
    finished = instant(state.finished_at) if state.finished_at else None
    if state.running and not state.restarting and finished is not None and finished < start:
        return finished
    ns = start[0] * 1_000_000_000 + start[1] - RESTART_DELAY_NS
    return divmod(ns, 1_000_000_000)


def run_end(state: ContainerState) -> tuple[int, int] | None:
    """Where the log of a stopped (or restart-waiting) run ends: its ``FinishedAt``, which
    docker sets once the run's output streams are drained; None while it runs."""
    if state.running and not state.restarting:
        return None
    finished = instant(state.finished_at) if state.finished_at else None
    start = instant(state.started_at) if state.started_at else None
    return finished if finished is not None and (start is None or finished >= start) else None


def since(start: tuple[int, int]) -> str:
    """``docker logs --since`` of an instant (its seconds.nanoseconds form)."""
    return f"{start[0]}.{start[1]:09d}"


def run_lines(
    stdout: str, stderr: str, start: tuple[int, int], end: tuple[int, int] | None = None
) -> list[tuple[str, str]]:
    """``docker logs --timestamps`` output (stdout and stderr come apart) as (timestamp,
    message) pairs after ``start`` (:func:`run_start`) and up to ``end`` (:func:`run_end`;
    a run docker began since belongs to another look), in the order they were written."""
    stamped: list[tuple[tuple[int, int], int, str, str]] = []
    for i, line in enumerate((stdout + "\n" + stderr).splitlines()):
        ts, _, message = line.partition(" ")
        when = instant(ts)
        if when is not None and when > start and (end is None or when <= end):
            stamped.append((when, i, ts, message))
    stamped.sort()
    return [(ts, message) for _, _, ts, message in stamped]


def iso_seconds(timestamp: str) -> str | None:
    """``2026-12-01T12:00:03+00:00`` (as ``status`` prints ``ready_since``) from RFC 3339."""
    when = instant(timestamp)
    if when is None:
        return None
    return dt.datetime.fromtimestamp(when[0], tz=dt.UTC).isoformat(timespec="seconds")


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _time(value: Any) -> str | None:
    text = str(value or "")
    return None if not text or text == _ZERO_TIME else text
