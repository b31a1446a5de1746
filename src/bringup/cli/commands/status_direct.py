"""``bringup status --url URL`` and ``--pid PID``: one look at a server no unit runs
(started with ``bringup run`` in tmux, say).

``--url``: health, the model list, one smoke request, and the server's ``/metrics`` load
figures when it has them. ``--pid``: the process (alive, whether ``bringup run`` started
it), the phase and failure from its log when its output goes to a file, and the same
probe at the URL its command line names (or ``--url``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from typing import Any

from bringup.adapters import process_look
from bringup.adapters.http_probe import HttpProber, api_key_from
from bringup.cli.main import Context
from bringup.core import engine_args, packs, service
from bringup.core.analyzer import LogAnalyzer
from bringup.core.endpoint import resolve_url, server_api_key
from bringup.core.live import failure_fields
from bringup.core.probes import ProbeKind, ProbeObservation, probe_fields
from bringup.core.server_metrics import parse_metrics
from bringup.core.vocab import Outcome, Phase
from bringup.errors import UsageError


def url_look(url: str, args: argparse.Namespace, ctx: Context) -> dict[str, Any]:
    """``--url``: the server at ``url``, whatever runs it."""
    probe, models, metrics = _ask(url, args.api_key or api_key_from(None, ctx.environ), None)
    verdict, why = _verdict(probe, url)
    return _report({"unit": None}, url, verdict, why, probe, models, metrics)


def pid_look(pid: int, args: argparse.Namespace, ctx: Context) -> dict[str, Any]:
    """``--pid``: the process, its log (when bringup started it) and its server."""
    seen = process_look.look(pid)
    subject: dict[str, Any] = {"unit": None, "pid": pid}
    if seen is None or not seen.alive:
        report = _report(subject, args.url, service.Verdict.UNKNOWN,
                         f"no process {pid} is running", None, None, None)  # fmt: skip
        report["process"] = None
        return report
    argv = list(seen.server_argv)
    engine = engine_args.parse_server_command(argv).engine if argv else None
    url = args.url or resolve_url(None, argv, _port(engine))
    diagnosis, log_phase, log_note = _log(seen, engine)
    key = args.api_key or server_api_key(argv, {}) or api_key_from(None, ctx.environ)
    probe, models, metrics = _ask(url, key, None)
    verdict, why = _verdict(probe, url)
    failure = diagnosis.failure if diagnosis is not None else None
    if failure is not None and diagnosis is not None and diagnosis.outcome is Outcome.FAILED:
        verdict, why = service.Verdict.FAILED, f"{failure.failure_class} during {failure.phase}"
    elif verdict is service.Verdict.UNKNOWN:
        verdict, why = service.Verdict.STARTING, f"process {pid} is alive; {why}"
    report = _report(subject, url, verdict, why, probe, models, metrics)
    report.update(
        {
            "engine": engine.value if engine is not None else None,
            "phase": log_phase.value if log_phase is not None else None,
            "failure": {**failure_fields(failure), "summary": failure.summary} if failure else None,
            "process": {
                "pid": pid,
                "status": seen.status,
                "started_by_bringup": seen.bringup_pid,
                "command": argv,
                "log": seen.log_path,
                "log_note": log_note,
            },
        }
    )
    return report


def _port(engine: Any) -> int:
    try:
        return packs.get(engine).http.default_port if engine is not None else 8000
    except KeyError:
        return 8000


_OWN_PHASE = re.compile(r"^bringup: \[\s*[\d.]+s\] (?:phase ([a-z_]+):|READY: )")


def _log(seen: process_look.ProcessLook, engine: Any) -> tuple[Any, Phase | None, str | None]:
    """The log's diagnosis and furthest phase, or why there is none to read. The phase is
    the furthest of the server's lines and of `bringup run`'s own "phase" lines: bringup run
    read the server's stdout and stderr in order, the file may hold them interleaved."""
    if seen.bringup_pid is None:
        return None, None, "not started by `bringup run`: no log of it to read"
    if seen.log_path is None:
        return (
            None,
            None,
            (
                f"its output goes to {seen.output_to or 'no file'}, not a file: start it with "
                "`bringup run ... > run.log 2>&1` (or tee) to have a log to read"
            ),
        )
    analyzer = LogAnalyzer(engine)
    try:
        text = process_look.read_tail(seen.log_path)
    except OSError as exc:
        return None, None, f"cannot read {seen.log_path}: {exc.strerror or exc}"
    phases: list[Phase] = []
    for line in text.splitlines():
        own = _OWN_PHASE.match(line)
        if own and (own.group(1) or "ready") in Phase.__members__.values():
            phases.append(Phase(own.group(1) or "ready"))  # READY: bringup's smoke answered
        if not service.is_own_line(line):
            analyzer.feed(line)
    diagnosis = analyzer.diagnosis()
    if diagnosis.timeline:
        phases.append(diagnosis.phase)
    return diagnosis, max(phases, key=lambda p: p.order, default=None), None


def _ask(
    url: str, key: str | None, served_model: str | None
) -> tuple[ProbeObservation, list[str] | None, dict[str, Any] | None]:
    """health, the model list, one smoke request; and /metrics when the server has them."""
    prober = HttpProber(url, api_key=key, smoke_timeout_seconds=30.0)
    try:
        obs = prober.probe(ProbeKind.HEALTH)
        if not (obs.ok or obs.status == 404):
            return obs, None, None
        models = _model_ids(prober.get_text("/v1/models"))
        obs = prober.probe(ProbeKind.SMOKE, model=served_model or (models[0] if models else None))
        text = prober.get_text("/metrics")
        metrics = dataclasses.asdict(parse_metrics(text)) if text is not None else None
        return obs, models, metrics
    finally:
        prober.close()


def _model_ids(text: str | None) -> list[str] | None:
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return None
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return None
    return [str(m["id"]) for m in items if isinstance(m, dict) and "id" in m]


def _verdict(probe: ProbeObservation, url: str) -> tuple[service.Verdict, str]:
    if probe.ok:
        return service.Verdict.READY, f"the server at {url} answered a smoke request"
    if probe.refused:
        return service.Verdict.UNKNOWN, f"nothing is listening at {url}"
    return (
        service.Verdict.FAILED,
        f"the server at {url} does not answer: {probe.kind.value} {probe.error}",
    )


def _report(
    subject: dict[str, Any],
    url: str | None,
    verdict: service.Verdict,
    why: str,
    probe: ProbeObservation | None,
    models: list[str] | None,
    metrics: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        **subject,
        "verdict": verdict.value,
        "why": why,
        "state": None,
        "phase": None,
        "failure": None,
        "ready_since": None,
        "engine": None,
        "url": url,
        "probe": probe_fields(probe) if probe is not None else None,
        "models": models,
        "metrics": metrics,
        "gpus": [],
        "gpu_note": None,
        "error": None,
    }


def check_pid_args(args: argparse.Namespace) -> None:
    """``--pid`` looks at a process: the options of a unit or container are refused."""
    if args.name or args.user or args.container:
        raise UsageError(
            "--pid PID looks at a process, not a unit or container",
            hint="drop NAME/--user/--container, or drop --pid",
        )
    if args.pid < 1:
        raise UsageError(f"--pid {args.pid}: not a process id")
