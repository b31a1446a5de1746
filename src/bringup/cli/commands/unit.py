"""``bringup unit NAME -- CMD ARGS...``: a systemd unit that runs the server under bringup.

Exit codes: 0 written (or installed), 2 usage, unreadable input or a failed systemctl.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bringup.adapters.commands import Runner, check, system_runner, write_local
from bringup.cli.commands import unit_files, unit_service
from bringup.cli.main import Context
from bringup.cli.options import add_duration
from bringup.core import engine_args, packs, secrets, wrappers
from bringup.core import systemd_unit as su
from bringup.core.vocab import Engine
from bringup.errors import UsageError
from bringup.render.console import make_console
from bringup.render.json_out import print_json
from bringup.units import parse_duration, parse_size

if TYPE_CHECKING:
    from bringup.core.startup_time.service import ServiceTimeout


@dataclass(frozen=True)
class Written:
    """What ``bringup unit`` produced: the ``--json`` object."""

    name: str
    unit_path: str | None  # None when printed to stdout
    env_file: str | None  # the EnvironmentFile= written, if any
    secrets: tuple[str, ...]  # names moved to the env file (never the values)
    installed: bool
    daemon_reload: bool
    user: bool
    timeout_start: TimeoutStart
    text: str


@dataclass(frozen=True)
class TimeoutStart:
    """The ``TimeoutStartSec=`` written and where it came from (``timeout_start`` in ``--json``)."""

    seconds: float
    source: str  # "option" (--timeout-start), "prediction" (bringup plan's), "default" (20m)
    guard_seconds: float  # of ``seconds``, the guard's part (with the prediction)
    note: str  # the unit's comment over TimeoutStartSec= ("" when none)
    service: ServiceTimeout | None  # the prediction's numbers (plan's ``startup.service``)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = "%(prog)s NAME [options] -- CMD ARGS..."
    parser.add_argument("name", metavar="NAME", help="unit name (NAME.service)")
    parser.add_argument(
        "--user", action="store_true", help="a user unit (systemctl --user, ~/.config/systemd/user)"
    )
    parser.add_argument(
        "--gpus",
        metavar="LIST",
        help="GPU indices or UUIDs: sets CUDA_VISIBLE_DEVICES for the guard and the server",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="set a variable (VALUE from the current environment when omitted); secrets go to the env file",
    )
    parser.add_argument(
        "--env-file",
        metavar="FILE",
        help="write secrets to FILE (mode 0600) for EnvironmentFile= (default: /etc/bringup/NAME.env "
        "with --install, ~/.config/bringup/NAME.env with --user, STEM.env beside --output STEM.service)",
    )
    parser.add_argument("--output", metavar="FILE", help="write the unit to FILE instead of stdout")
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an existing env file that holds other secrets (refused without it)",
    )
    parser.add_argument(
        "--install",
        action="store_true",
        help="write under /etc/systemd/system (or ~/.config/systemd/user) and run systemctl daemon-reload",
    )
    parser.add_argument(
        "--root",
        metavar="DIR",
        help="with --install: treat DIR as the file-system root (packaging, tests)",
    )
    parser.add_argument(
        "--description", metavar="TEXT", help="Description= (default: NAME and the executable)"
    )
    unit_service.add_arguments(parser)
    add_duration(parser, "--restart-sec", "RestartSec=", default="30s")
    add_duration(
        parser,
        "--timeout-start",
        "TimeoutStartSec=",
        note="default: 1.5 x the predicted startup's high end for a vLLM command whose model is "
        "here (bringup plan), else 20m; bringup run extends it while loading progresses",
    )
    add_duration(parser, "--timeout-stop", "TimeoutStopSec=", default="60s")
    add_duration(
        parser, "--watchdog-sec", "WatchdogSec=", note="bringup run sends WATCHDOG=1 while healthy"
    )
    parser.add_argument(
        "--start-limit-burst", type=int, default=5, metavar="N", help="StartLimitBurst= (default 5)"
    )
    add_duration(parser, "--start-limit-interval", "StartLimitIntervalSec=", default="30m")
    parser.add_argument(
        "--max-used",
        default="1000MiB",
        metavar="SIZE",
        help="the guard's limit per GPU (default 1000MiB)",
    )
    add_duration(
        parser, "--guard-timeout", "how long the guard waits for free GPUs", default="300s"
    )
    parser.add_argument(
        "--kill-stale",
        action="store_true",
        help="let the guard end earlier instances running this command line",
    )
    parser.add_argument(
        "--gpus-from",
        metavar="FILE",
        help="the guard and bringup run read GPUs from this readings file instead of NVML (tests, demos)",
    )
    parser.add_argument(
        "--model",
        metavar="NAME",
        help="the model the unit's smoke request names (`bringup run --model`); required for "
        "Ollama, which loads its model at the first request that names it",
    )
    parser.add_argument(
        "--bringup", metavar="PATH", help="the bringup executable the unit runs (default: this one)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print what was written as one JSON object"
    )


def run(args: argparse.Namespace, ctx: Context, runner: Runner | None = None) -> int:
    name = su.unit_name(args.name)
    split = secrets.split_secrets(_command(args, ctx))
    argv, assigned = _peel_assignments(split.argv)
    if not argv:
        raise UsageError(
            "no server command after the assignments",
            hint="bringup unit NAME -- vllm serve MODEL ...",
        )
    argv = _resolve_executables(argv, ctx)
    argv = _absolute_env_files(argv, ctx)
    public, secret = _environment([*assigned, *_env_options(args.env, ctx)], split.env)
    service = unit_service.settings(args, argv, public)
    unit_dir = unit_files.install_dir(args, ctx) if args.install else None
    env_file = unit_files.env_file_paths(args, ctx, name, bool(secret))
    timeout = _timeout_start(args, ctx, argv)
    spec = _spec(
        args, ctx, name, argv, public, secret, env_file.named if env_file else None, timeout
    )
    spec = dataclasses.replace(
        spec,
        run_as_user=service.user,
        run_as_group=service.group,
        working_directory=service.working_directory,
        limit_memlock=service.limit_memlock,
        environment=spec.environment + service.environment,
    )
    text = su.render_unit(spec)
    unit_files.check_no_secret_in(text, secret)
    written = _write(
        args, ctx, name, text, unit_dir, env_file, secret, service.owner, timeout, runner
    )
    if args.json:
        print_json(written, ctx.stdout)
    elif written.unit_path is None:
        ctx.stdout.write(text)
    else:
        _report(ctx, written)
    return 0


def _command(args: argparse.Namespace, ctx: Context) -> list[str]:
    if not args.passthrough:
        raise UsageError(
            "no server command", hint="bringup unit NAME [options] -- vllm serve MODEL ..."
        )
    if args.root and not args.install:
        raise UsageError("--root only applies with --install")
    if args.install and args.output:
        raise UsageError("--install and --output both say where the unit goes; give one")
    return list(args.passthrough)


def _peel_assignments(words: tuple[su.Word, ...]) -> tuple[list[su.Word], list[tuple[str, str]]]:
    """``A=1 vllm …`` and ``env A=1 vllm …`` (``env`` without options): the assignments go to
    ``Environment=``, which is what they mean, and the server is the unit's command."""
    i, pairs = 0, []
    while i < len(words):
        word = words[i]
        if wrappers.is_assignment(word):
            assert isinstance(word, str)
            key, value = word.split("=", 1)
            pairs.append((key, value))
        elif not (wrappers.base_name(word) == "env" and not _is_option(words, i + 1)):
            break
        i += 1
    return list(words[i:]), pairs


def _is_option(words: tuple[su.Word, ...], i: int) -> bool:
    return i < len(words) and isinstance(words[i], str) and str(words[i]).startswith("-")


def _environment(
    pairs: list[tuple[str, str]], moved: dict[str, str]
) -> tuple[tuple[tuple[str, str], ...], dict[str, str]]:
    """(``Environment=`` pairs, the env file's variables): secret-named variables and
    token-shaped values go to the env file, whichever way they were given."""
    secret, public = dict(moved), []
    for key, value in su.environment_pairs(dict(pairs)):
        if secrets.is_secret_name(key) or secrets.is_token(value):
            if secret.get(key, value) != value:
                raise UsageError(f"{key} is given twice with different values", hint="keep one")
            secret[key] = value
        else:
            public.append((key, value))
    return tuple(public), secret


def _env_options(items: list[str], ctx: Context) -> list[tuple[str, str]]:
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            if key not in ctx.environ:
                raise UsageError(
                    f"--env {key}: not set in the current environment",
                    hint=f"use --env {key}=VALUE",
                )
            value = ctx.environ[key]
        pairs.append((key, value))
    return pairs


def _resolve_executables(words: list[su.Word], ctx: Context) -> list[su.Word]:
    """Every executable the command runs here (the first word, and the command after
    ``env``, ``sudo -u``, ``nice``, ``taskset``, ``numactl``…) as an absolute path."""
    out = list(words)
    for i in wrappers.executables(out):
        word = out[i]
        if isinstance(word, str):
            out[i] = _resolve_executable(word, ctx)
    return out


def _absolute_env_files(words: list[su.Word], ctx: Context) -> list[su.Word]:
    """``docker run --env-file FILE``: FILE made absolute (systemd starts the unit in ``/``),
    and a warning when others can read the secrets in it."""
    out = list(words)
    for i in secrets.env_files(out):
        word = out[i]
        assert isinstance(word, str)
        prefix = "--env-file=" if word.startswith("--env-file=") else ""
        path = os.path.abspath(word[len(prefix) :])
        out[i] = prefix + path
        with contextlib.suppress(OSError):
            mode = os.stat(path).st_mode & 0o777
            if mode & 0o077:
                ctx.stderr.write(
                    f"bringup: warning: {path} (docker --env-file) is readable by others "
                    f"(mode {mode:04o}); chmod 600 {shlex.quote(path)}\n"
                )
    return out


def _resolve_executable(word: str, ctx: Context) -> str:
    """The command's executable as an absolute path (systemd requires one that exists)."""
    if "/" in word:
        path = os.path.abspath(word)
        if not os.access(path, os.X_OK) or os.path.isdir(path):
            raise UsageError(f"{word}: not an executable file")
        return path
    found = shutil.which(word, path=ctx.environ.get("PATH", os.defpath))
    if found is None:
        raise UsageError(
            f"cannot find {word!r} on PATH", hint="give its absolute path, e.g. /opt/venv/bin/vllm"
        )
    return os.path.abspath(found)


def _bringup_path(args: argparse.Namespace, ctx: Context) -> str:
    """The bringup console script: --bringup, next to this Python, or on PATH."""
    if args.bringup:
        return _resolve_executable(args.bringup, ctx)
    beside = Path(sys.executable).parent / "bringup"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside.absolute())
    found = shutil.which("bringup", path=ctx.environ.get("PATH", os.defpath))
    if found is None:
        raise UsageError("cannot find the bringup executable", hint="pass --bringup PATH")
    return os.path.abspath(found)


def _spec(
    args: argparse.Namespace,
    ctx: Context,
    name: str,
    argv: list[su.Word],
    public: tuple[tuple[str, str], ...],
    secret: dict[str, str],
    env_file: str | None,
    timeout: TimeoutStart,
) -> su.UnitSpec:
    bringup = _bringup_path(args, ctx)
    guard_timeout = parse_duration(args.guard_timeout)
    if guard_timeout >= timeout.seconds:
        raise UsageError(
            "--guard-timeout must be shorter than --timeout-start (the guard runs inside it)"
        )
    parse_size(args.max_used)
    if args.start_limit_burst < 1:
        raise UsageError("--start-limit-burst must be at least 1")
    gpus_from = os.path.abspath(args.gpus_from) if args.gpus_from else None
    _check_model(args, argv)
    return su.UnitSpec(
        name=name,
        description=args.description or _describe(name, argv),
        exec_start=su.run_command(bringup, argv, gpus_from=gpus_from, model=args.model),
        exec_start_pre=su.guard_command(
            bringup,
            max_used=args.max_used,
            timeout=args.guard_timeout,
            kill_stale=args.kill_stale,
            command=argv,
            gpus_from=gpus_from,
        ),
        environment=su.gpu_environment(args.gpus) + public,
        environment_file=env_file,
        secret_names=tuple(secret),
        user=args.user,
        restart_seconds=parse_duration(args.restart_sec),
        timeout_start_seconds=timeout.seconds,
        timeout_start_note=timeout.note,
        timeout_stop_seconds=parse_duration(args.timeout_stop),
        watchdog_seconds=parse_duration(args.watchdog_sec) if args.watchdog_sec else None,
        start_limit_interval_seconds=parse_duration(args.start_limit_interval),
        start_limit_burst=args.start_limit_burst,
    )


def _timeout_start(args: argparse.Namespace, ctx: Context, argv: list[su.Word]) -> TimeoutStart:
    """--timeout-start, else from the startup prediction of the server command, else 20m."""
    if args.timeout_start:
        return TimeoutStart(parse_duration(args.timeout_start), "option", 0.0, "", None)
    from bringup.core.startup_time.systemd import start_timeout
    from bringup.follow.startup_time import live_prediction

    start = wrappers.command_start(argv) or 0
    found = live_prediction([w for w in argv[start:] if isinstance(w, str)], ctx.environ)
    if found is None:
        return TimeoutStart(DEFAULT_TIMEOUT_START, "default", 0.0, "", None)
    guard = parse_duration(args.guard_timeout)
    seconds, note = start_timeout(found[0], guard)
    return TimeoutStart(seconds, "prediction", guard, note, found[0].service)


DEFAULT_TIMEOUT_START = 1200.0  # 20 minutes: no prediction for the command


def _check_model(args: argparse.Namespace, argv: list[su.Word]) -> None:
    """An engine that loads its model on request (Ollama) needs ``--model``."""
    start = wrappers.command_start(argv) or 0
    plain = [w for w in argv[start:] if isinstance(w, str)]
    engine = engine_args.parse_server_command(plain).engine if plain else None
    if not args.model and engine is not None and _loads_on_request(engine):
        raise UsageError(
            f"{engine} loads its model at the first request that names it: the unit's "
            "`bringup run` needs --model to know when it is ready",
            hint="give --model NAME, e.g. `bringup unit ollama --model llama3.2:1b -- ollama serve`",
        )


def _describe(name: str, argv: list[su.Word]) -> str:
    """``vllm-a: vllm under bringup``: the unit and the server's executable, never its
    arguments (they may hold a model path a reader need not see, or a secret)."""
    start = wrappers.command_start(argv)
    exe = wrappers.base_name(argv[start]) if start is not None else ""
    return f"{name}: {exe or wrappers.base_name(argv[0])} under bringup"


def _write(
    args: argparse.Namespace,
    ctx: Context,
    name: str,
    text: str,
    unit_dir: Path | None,
    env_file: unit_files.EnvFile | None,
    secret: dict[str, str],
    owner: str | None,
    timeout: TimeoutStart,
    runner: Runner | None,
) -> Written:
    """Write the files. ``--install`` writes through the command runner, where the service
    manager reads (``BRINGUP_COMMAND_PREFIX`` honoured), then reloads it; ``--install --root``
    writes under DIR on this machine and never touches a live manager."""
    live = unit_dir is not None and not args.root
    target = (
        unit_dir / f"{name}.service" if unit_dir else (Path(args.output) if args.output else None)
    )
    system = (runner or system_runner(ctx.environ)) if live else None
    if env_file is not None:
        unit_files.guard_existing(env_file, secret, args.force, system)
        body = su.render_env_file(name, tuple(secret.items()))
        unit_files.write_env_file(env_file, body, system, owner, ctx)
    if target is not None:
        if system is not None:
            system.write_file(str(target), text)
        else:
            write_local(str(target), text)
    if system is not None:
        reload = (
            ["systemctl", "--user", "daemon-reload"]
            if args.user
            else ["systemctl", "daemon-reload"]
        )
        check(system.run(reload))
    return Written(
        name=name,
        unit_path=None if target is None else str(target),
        env_file=None if env_file is None else str(env_file.path),
        secrets=tuple(secret),
        installed=unit_dir is not None,
        daemon_reload=system is not None,
        user=args.user,
        timeout_start=timeout,
        text=text,
    )


def _report(ctx: Context, written: Written) -> None:
    console = make_console(ctx.stdout, ctx.environ)
    lines = [f"wrote {written.unit_path}"]
    if written.env_file:
        names = ", ".join(written.secrets) or "no secrets"
        lines.append(f"wrote {written.env_file} (mode 0600: {names})")
    user = " --user" if written.user else ""
    if written.daemon_reload:
        lines.append(f"ran systemctl{user} daemon-reload")
        lines.append(f"start it with: systemctl{user} start {shlex.quote(written.name)}.service")
    elif written.installed:
        lines.append(
            f"--root: no service manager was reloaded (run systemctl{user} daemon-reload there)"
        )
    for line in lines:
        console.print(line, markup=False, highlight=False)


def _loads_on_request(engine: Engine) -> bool:
    try:
        return packs.get(engine).http.model_on_request
    except KeyError:
        return False
