"""``bringup status --container NAME``: one look at a docker container, no waiting.

Its state (``docker inspect NAME``), the phase reached and the root cause in the current run's
log (``docker logs --timestamps --since STARTED_AT NAME``: this run only, or the last one when
it has stopped or is waiting to restart), read by the same analyzer as ``bringup diagnose``,
and whether the model answers at the ``--host``/``--port`` of the container's command (a
published port is asked on the host). Verdicts and exit codes are those of a unit.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any, NamedTuple

from bringup.adapters.commands import Runner
from bringup.adapters.remote_host import probe_url
from bringup.adapters.ssh import SshRunner
from bringup.cli.main import Context
from bringup.core import container, engine_args
from bringup.core.analyzer import LogAnalyzer
from bringup.core.diagnosis import Diagnosis, PhaseEvent
from bringup.core.endpoint import server_api_key
from bringup.core.live import failure_fields
from bringup.core.probes import probe_fields
from bringup.core.service import is_own_line
from bringup.core.vocab import Engine, Phase
from bringup.errors import AdapterError, InputError

LOG_TIMEOUT_SECONDS = 60.0
SNAPSHOT_TRIES = 3  # looks until the state is the same before and after the log


class UnitLooks(NamedTuple):
    """The looks ``status`` takes of a unit that a container gets too (the server URL, the
    model's answer, the GPUs): passed in by ``status``, which dispatches here, so this module
    does not import it back."""

    url: Callable[..., Any]
    probe: Callable[..., Any]
    gpus: Callable[..., Any]


def look_container(
    name: str, runner: Runner, args: argparse.Namespace, ctx: Context, looks: UnitLooks
) -> dict[str, Any]:
    """Gather the facts and derive the verdict: the ``--json`` object."""
    _url, _probe, _gpus = looks
    data = inspect(name, runner)
    for _ in range(SNAPSHOT_TRIES):
        state = container.ContainerState.from_inspect(data)
        argv = container.command(data)
        engine = engine_args.parse_server_command(argv).engine if argv else None
        diagnosis, ready_at = _log(runner, name, state, engine)
        # a run that began while the log was read would lend it its first lines: look again
        again = inspect(name, runner)
        if container.ContainerState.from_inspect(again) == state:
            break
        data = again
    url = (
        _url(args.url, argv, engine)
        if args.url
        else probe_url(container.host_url(_url(None, argv, engine), data), runner)
    )
    probe = None
    if state.running and not state.restarting and state.status != "paused":
        env = dict(w.partition("=")[::2] for w in (data.get("Config") or {}).get("Env") or [])
        key = server_api_key(argv, env)
        probe = _probe(url, args, ctx, key, engine_args.get_flag(argv, "--served-model-name"))
    verdict, why = container.derive(state, diagnosis, probe.ok if probe is not None else None)
    failure = diagnosis.failure if diagnosis is not None else None
    if isinstance(runner, SshRunner) and not args.gpus_from:
        from bringup.adapters.remote_host import remote_gpus

        gpus, gpu_note = remote_gpus(runner)
    else:
        gpus, gpu_note = _gpus(
            args.gpus_from, " ".join((data.get("Config") or {}).get("Env") or [])
        )
    return {
        "container": name,
        "unit": None,
        "verdict": verdict.value,
        "why": why,
        "state": {
            "status": state.status,
            "running": state.running,
            "restarting": state.restarting,
            "pid": state.pid,
            "exit_code": state.exit_code,
            "oom_killed": state.oom_killed,
            "restart_count": state.restart_count,
            "restart_policy": state.restart_policy,
            "started_at": state.started_at,
            "finished_at": state.finished_at,
            "health": state.health,
            "error": state.error or None,
        },
        "phase": diagnosis.phase.value if diagnosis is not None and diagnosis.timeline else None,
        "failure": {**failure_fields(failure), "summary": failure.summary}
        if failure is not None
        else None,
        "ready_since": container.iso_seconds(ready_at)
        if ready_at and verdict.value == "ready"
        else None,
        "engine": engine.value
        if engine is not None
        else (diagnosis.engine if diagnosis is not None else None),
        "url": url,
        "probe": probe_fields(probe) if probe is not None else None,
        "gpus": gpus,
        "gpu_note": gpu_note,
        "error": None,
    }


def inspect(name: str, runner: Runner) -> dict[str, Any]:
    """``docker inspect NAME`` (its one object); an error names what docker said."""
    result = runner.run(["docker", "inspect", "--type", "container", name])
    if result.returncode != 0:
        said = (result.stderr.strip().splitlines() or [f"exit code {result.returncode}"])[-1]
        if "no such" in said.lower():
            raise InputError(
                f"no container {name}: {said}", hint="check the name with `docker ps -a`"
            )
        raise AdapterError(
            f"`docker inspect {name}` failed with exit code {result.returncode}: {said}"
        )
    try:
        return dict(json.loads(result.stdout)[0])
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        raise AdapterError(f"`docker inspect {name}`: unexpected output") from exc


def _log(
    runner: Runner, name: str, state: container.ContainerState, engine: Engine | None
) -> tuple[Diagnosis | None, str | None]:
    """The current (or last) run's log, analysed, and the timestamp of its ready line."""
    start = container.run_start(state)
    if start is None:
        return None, None
    result = runner.run(
        ["docker", "logs", "--timestamps", "--since", container.since(start), name],
        timeout_seconds=LOG_TIMEOUT_SECONDS,
    )
    if result.returncode != 0:
        return None, None
    analyzer = LogAnalyzer(engine)
    ready_at: str | None = None
    for ts, message in container.run_lines(
        result.stdout, result.stderr, start, container.run_end(state)
    ):
        if is_own_line(message):
            continue
        events = analyzer.feed(message)
        if ready_at is None and any(
            isinstance(e, PhaseEvent) and e.entry.phase is Phase.READY for e in events
        ):
            ready_at = ts
    running = state.running and not state.restarting
    return (analyzer.diagnosis() if running else analyzer.finish(state.exit_code)), ready_at
