"""``bringup status NAME``: one look at a service, no waiting.

The unit's state (``systemctl show``), the phase reached and the last failure in the
current invocation's journal (``journalctl -u NAME _SYSTEMD_INVOCATION_ID=... -o json
--no-pager``, read by the same analyzer as ``bringup diagnose``), since when it is ready,
the GPUs, and whether the model answers (health, /v1/models and a 1-token completion at
--url, or at the ExecStart's --host/--port).

Exit codes: 0 ready (active and the model answered), 1 failed (the unit failed, the
current run logged a root cause, or it is active and the model does not answer), 3
starting or unknown (activating, auto-restarting, inactive, not loaded), 2 usage.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import os
import tomllib
from collections.abc import Callable
from typing import Any

from bringup.adapters import gpus as gpu_adapter
from bringup.adapters import remote_host
from bringup.adapters.commands import Runner, check, system_runner
from bringup.adapters.http_probe import HttpProber, api_key_from
from bringup.adapters.ssh import SshRunner
from bringup.adapters.systemd import Systemctl
from bringup.cli import remote
from bringup.cli.main import Context
from bringup.core import engine_args, packs, service
from bringup.core.analyzer import LogAnalyzer
from bringup.core.diagnosis import Diagnosis, PhaseEvent
from bringup.core.endpoint import resolve_url
from bringup.core.gpu import select_visible
from bringup.core.live import failure_fields
from bringup.core.probes import ProbeKind, ProbeObservation, probe_fields
from bringup.core.systemd_unit import unit_name
from bringup.core.vocab import Engine, Phase
from bringup.errors import AdapterError, BringupError, UsageError
from bringup.render.json_out import print_json
from bringup.render.service import print_status

MAX_INVENTORY_BYTES = 16 * 1024 * 1024  # an inventory is a few lines per host


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "name", metavar="NAME", nargs="?", help="the systemd unit (NAME or NAME.service)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    remote.add_host_arguments(parser)
    parser.add_argument(
        "--hosts",
        metavar="FILE",
        help="the fleet: every unit of every [[host]] in the TOML FILE, one row each, hosts asked in parallel",
    )
    parser.add_argument(
        "--nodes",
        metavar="FILE",
        help="every node of a `bringup run --nodes FILE` start: alive, last line, GPU memory; rank 0's API",
    )
    parser.add_argument(
        "--container",
        metavar="NAME",
        help="a docker container instead of a unit (docker inspect + the current run's docker logs)",
    )
    parser.add_argument(
        "--user", action="store_true", help="a unit of the user's manager (systemctl --user)"
    )
    parser.add_argument(
        "--url",
        metavar="URL",
        help="server base URL (default: the ExecStart's --host/--port, else the engine's default); "
        "without NAME: look at any server there (health, models, a smoke request, /metrics)",
    )
    parser.add_argument(
        "--pid",
        type=int,
        metavar="PID",
        help="a server process (e.g. started by `bringup run` in tmux): the process, its log "
        "when its output goes to a file, and its API",
    )
    parser.add_argument(
        "--api-key",
        metavar="KEY",
        help="API key for the probe (default: the unit's --api-key or VLLM_API_KEY, from its EnvironmentFile= when it is a ${NAME}, else OPENAI_API_KEY or VLLM_API_KEY)",
    )
    parser.add_argument(
        "--gpus-from", metavar="FILE", help="read GPU memory from a readings file instead of NVML"
    )


def run(args: argparse.Namespace, ctx: Context, runner: Runner | None = None) -> int:
    if args.passthrough:
        raise UsageError("status takes no server command")
    if args.hosts:
        return fleet_status(args, ctx)
    if args.nodes:
        from bringup.cli.commands.status_nodes import nodes_status

        return nodes_status(args, ctx)
    if args.container:
        return container_status(args, ctx, runner)
    if args.pid is not None or (args.url and not args.name):
        return direct_status(args, ctx)
    if not args.name:
        raise UsageError(
            "give a unit NAME (or --url URL or --pid PID for a server no unit runs, "
            "--container NAME, or --hosts FILE for the fleet)"
        )
    unit = unit_name(args.name) + ".service"

    def look_unit() -> dict[str, Any]:
        return look(unit, _runner(args, ctx, runner), args, ctx)

    return _answer(args, ctx, look_unit, {"unit": unit}, "the service manager")


def container_status(args: argparse.Namespace, ctx: Context, runner: Runner | None) -> int:
    """``--container NAME``: the same look, of a docker container."""
    from bringup.cli.commands import status_container

    if args.name or args.user:
        raise UsageError("--container NAME takes no unit NAME and no --user")

    def look_container() -> dict[str, Any]:
        looks = status_container.UnitLooks(_url, _probe, _gpus)
        return status_container.look_container(
            args.container, _runner(args, ctx, runner), args, ctx, looks
        )

    subject = {"container": args.container, "unit": None}
    return _answer(args, ctx, look_container, subject, "docker")


def direct_status(args: argparse.Namespace, ctx: Context) -> int:
    """``--url URL`` or ``--pid PID``: a server no unit runs."""
    from bringup.cli.commands import status_direct

    if args.pid is not None:
        status_direct.check_pid_args(args)
        return _answer(
            args,
            ctx,
            lambda: status_direct.pid_look(args.pid, args, ctx),
            {"unit": None},
            "the process",
        )
    return _answer(
        args, ctx, lambda: status_direct.url_look(args.url, args, ctx), {"unit": None}, "the server"
    )


def _runner(args: argparse.Namespace, ctx: Context, runner: Runner | None) -> Runner:
    return runner or remote.ssh_runner(args, ctx.environ) or system_runner(ctx.environ)


def _answer(
    args: argparse.Namespace,
    ctx: Context,
    look_once: Callable[[], dict[str, Any]],
    subject: dict[str, str | None],
    asked: str,
) -> int:
    """Print one look (JSON or text) and exit with its verdict's code. With ``--json`` an
    error is JSON too: the look's fields, empty, with the reason in ``error``."""
    try:
        report = look_once()
    except BringupError as exc:
        if not args.json:
            raise
        print_json(service.error_report(subject, asked, str(exc)), ctx.stdout)
        ctx.stderr.write(f"bringup: error: {exc}\n")
        return exc.exit_code
    if args.json:
        print_json(report, ctx.stdout)
    else:
        print_status(report, ctx.stdout)
    return service.Verdict(report["verdict"]).exit_code


def look(unit: str, runner: Runner, args: argparse.Namespace, ctx: Context) -> dict[str, Any]:
    """Gather the facts and derive the verdict: the ``--json`` object."""
    user = ["--user"] if args.user else []
    shown = runner.run(
        ["systemctl", *user, "show", unit, "--property=" + ",".join(service.SHOW_PROPERTIES)]
    )
    no_manager = service.no_service_manager(shown.stderr) if shown.returncode else None
    if no_manager is not None:
        raise AdapterError(
            f"no systemd to ask here: {no_manager}",
            hint="for a server no unit runs, use `bringup status --url URL` or `--pid PID`",
        )
    props = service.parse_show(check(shown).stdout)
    state = service.UnitState.from_show(props)
    argv = _server_argv(runner, user, unit, props)
    engine = engine_args.parse_server_command(argv).engine if argv else None
    diagnosis, ready_us = _journal(runner, user, unit, state, engine)
    url = (
        remote_host.probe_url(_url(args.url, argv, engine), runner)
        if not args.url
        else _url(args.url, argv, engine)
    )
    asked = (args.url or state.active_state == "active") and state.load_state != "not-found"
    probe = _probe(url, args, ctx, *_identity(runner, args.user, unit, argv)) if asked else None
    verdict, why = service.derive(
        service.Look(state, diagnosis, probe.ok if probe is not None else None)
    )
    failure = diagnosis.failure if diagnosis is not None else None
    if isinstance(runner, SshRunner) and not args.gpus_from:
        gpus, gpu_note = remote_host.remote_gpus(runner)
    else:
        gpus, gpu_note = _gpus(args.gpus_from, props.get("Environment", ""))
    return {
        "unit": unit,
        "verdict": verdict.value,
        "why": why,
        "state": {
            "active_state": state.active_state,
            "sub_state": state.sub_state,
            "main_pid": state.main_pid,
            "n_restarts": state.n_restarts,
            "result": state.result,
            "exec_main_status": state.exec_main_status,
        },
        "phase": diagnosis.phase.value if diagnosis is not None and diagnosis.timeline else None,
        "failure": {**failure_fields(failure), "summary": failure.summary}
        if failure is not None
        else None,
        "ready_since": _iso(ready_us)
        if ready_us is not None and verdict is service.Verdict.READY
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


def _server_argv(runner: Runner, user: list[str], unit: str, props: dict[str, str]) -> list[str]:
    cat = runner.run(["systemctl", *user, "cat", unit])
    words = service.exec_start_from_cat(cat.stdout) if cat.returncode == 0 else None
    words = words or service.exec_start_from_show(props.get("ExecStart", ""))
    return service.server_argv(words) if words else []


def _journal(
    runner: Runner, user: list[str], unit: str, state: service.UnitState, engine: Engine | None
) -> tuple[Diagnosis | None, int | None]:
    """The current invocation's journal, analysed; and when it reached ready (µs since the epoch)."""
    if not state.invocation_id:
        return None, None
    which = ["--user-unit", unit] if user else ["-u", unit]
    result = runner.run(
        [
            "journalctl",
            *which,
            f"_SYSTEMD_INVOCATION_ID={state.invocation_id}",
            "-o",
            "json",
            "--no-pager",
        ]
    )
    if result.returncode != 0:
        return None, None
    analyzer = LogAnalyzer(engine)
    ready_us: int | None = None
    for entry in service.parse_journal(result.stdout):
        for line in entry.message.split("\n"):
            if service.is_own_line(line):
                if ready_us is None and "READY: " in line:
                    ready_us = entry.realtime_us
                continue  # bringup run's own report, not the server's evidence
            events = analyzer.feed(line)
            reached = any(
                isinstance(e, PhaseEvent) and e.entry.phase is Phase.READY for e in events
            )
            if ready_us is None and reached:
                ready_us = entry.realtime_us
    running = state.active_state in ("active", "activating", "reloading", "deactivating")
    return (analyzer.diagnosis() if running else analyzer.finish(state.exec_main_status)), ready_us


def _url(url: str | None, argv: list[str], engine: Any) -> str:
    try:
        port = packs.get(engine).http.default_port if engine is not None else 8000
    except KeyError:
        port = 8000
    return resolve_url(url, argv, port)


def _identity(
    runner: Runner, user: bool, unit: str, argv: list[str]
) -> tuple[str | None, str | None]:
    """The server's API key and served model name, from its command and the unit's environment."""
    try:
        return Systemctl(runner, user=user).server_identity(unit, argv)
    except BringupError:
        return None, None  # the look goes on: the probe then says what the server answers


def _probe(
    url: str,
    args: argparse.Namespace,
    ctx: Context,
    server_key: str | None = None,
    served_model: str | None = None,
) -> ProbeObservation:
    """health, then /v1/models, then a 1-token completion; the first that fails is the answer."""
    key = args.api_key or server_key or api_key_from(None, ctx.environ)
    prober = HttpProber(url, api_key=key, smoke_timeout_seconds=30.0)
    try:
        obs = prober.probe(ProbeKind.HEALTH)
        if not (obs.ok or obs.status == 404):
            return obs
        models = prober.probe(ProbeKind.MODELS)
        return prober.probe(ProbeKind.SMOKE, model=served_model or models.model)
    finally:
        prober.close()


def _gpus(gpus_from: str | None, environment: str) -> tuple[list[dict[str, Any]], str | None]:
    visible = next(
        (w.split("=", 1)[1] for w in environment.split() if w.startswith("CUDA_VISIBLE_DEVICES=")),
        None,
    )
    try:
        readings = select_visible(gpu_adapter.open_source(gpus_from).read(), visible)
    except BringupError as exc:
        return [], f"not read: {exc}"
    return [
        {
            "index": g.index,
            "name": g.name,
            "used_bytes": g.memory_used_bytes,
            "total_bytes": g.memory_total_bytes,
        }
        for g in readings
    ], None


def _iso(realtime_us: int) -> str:
    return dt.datetime.fromtimestamp(realtime_us / 1e6, tz=dt.UTC).isoformat(timespec="seconds")


def fleet_status(args: argparse.Namespace, ctx: Context) -> int:
    """``--hosts FILE``: one row per unit of every host; hosts are asked in parallel threads."""
    from bringup.core import fleet
    from bringup.render.fleet import print_fleet

    hosts = fleet.parse_inventory(_read_toml(args.hosts), source=args.hosts)
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(hosts))) as pool:
        per_host = list(pool.map(lambda h: _host_rows(h, args, ctx), hosts))
    rows = [row for rows in per_host for row in rows]
    if args.json:
        print_json([fleet.row_json(r) for r in rows], ctx.stdout)
    else:
        print_fleet(rows, ctx.stdout, ctx.environ)
    return fleet.fleet_exit_code(rows)


def _host_rows(host: Any, args: argparse.Namespace, ctx: Context) -> list[Any]:
    from bringup.adapters.ssh import target_from
    from bringup.core import fleet

    try:
        runner = SshRunner(
            target_from(
                host.address, accept_new_host_key=host.accept_new_host_key, environ=ctx.environ
            )
        )
        runner.check(["true"])
    except BringupError as exc:
        return fleet.rows_for_error(
            host.address, [unit_name(u) + ".service" for u in host.units], str(exc)
        )
    look_args = argparse.Namespace(user=args.user, url=None, api_key=args.api_key, gpus_from=None)
    rows = []
    for name in host.units:
        unit = unit_name(name) + ".service"
        try:
            rows.append(fleet.row_from_status(host.address, look(unit, runner, look_args, ctx)))
        except BringupError as exc:
            rows.extend(fleet.rows_for_error(host.address, [unit], str(exc)))
    return rows


def _read_toml(path: str) -> dict[str, Any]:
    from bringup.adapters import files

    hint = "give a TOML file of [[host]] tables"
    if not os.path.lexists(path):
        raise UsageError(f"inventory not found: {files.shown(path)}", hint=hint)
    data = files.read_bytes(path, limit=MAX_INVENTORY_BYTES, what="inventory", hint=hint)
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{files.shown(path)} is not valid TOML: invalid UTF-8 at byte {exc.start}", hint=hint
        ) from None
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise UsageError(f"{files.shown(path)} is not valid TOML: {reason}", hint=hint) from None
