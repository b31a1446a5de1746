"""``bringup unit NAME -- CMD ARGS...``: a systemd unit that runs the server under bringup.

Exit codes: 0 written (or installed), 2 usage, unreadable input or a failed systemctl.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from bringup.adapters.commands import Runner, check, system_runner, write_local
from bringup.cli.main import Context
from bringup.cli.options import add_duration
from bringup.core import engine_args, packs
from bringup.core import systemd_unit as su
from bringup.core.vocab import Engine
from bringup.errors import UsageError
from bringup.render.console import make_console
from bringup.render.json_out import print_json
from bringup.units import parse_duration, parse_size


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
    text: str


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
        "--env-file", metavar="FILE", help="write secrets to FILE (mode 0600) for EnvironmentFile="
    )
    parser.add_argument("--output", metavar="FILE", help="write the unit to FILE instead of stdout")
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
    parser.add_argument("--description", metavar="TEXT", help="Description= (default: the command)")
    add_duration(parser, "--restart-sec", "RestartSec=", default="30s")
    add_duration(
        parser,
        "--timeout-start",
        "TimeoutStartSec=",
        default="20m",
        note="bringup run extends it while loading progresses",
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
    command = _command(args, ctx)
    env_pairs = _leading_assignments(command) + _env_options(args.env, ctx)
    argv = command[len(_leading_assignments(command)) :]
    if not argv:
        raise UsageError(
            "no server command after the assignments",
            hint="bringup unit NAME -- vllm serve MODEL ...",
        )
    argv[0] = _resolve_executable(argv[0], ctx)
    secrets = su.split_secrets(argv, env_pairs)
    unit_dir = _install_dir(args, ctx) if args.install else None
    env_file = _env_file_paths(args, name, unit_dir, bool(secrets.secret_environment))
    spec = _spec(args, ctx, name, secrets, env_file[1] if env_file else None)
    text = su.render_unit(spec)
    written = _write(args, ctx, name, text, unit_dir, env_file, secrets, runner)
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


def _leading_assignments(command: list[str]) -> list[tuple[str, str]]:
    """``HF_TOKEN=x vllm serve …``: the NAME=VALUE words before the executable."""
    pairs: list[tuple[str, str]] = []
    for word in command:
        key, sep, value = word.partition("=")
        if not sep or not key.replace("_", "a").isalnum() or key[0].isdigit():
            break
        pairs.append((key, value))
    return pairs


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
    return list(su.environment_pairs(dict(pairs)))


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


def _install_dir(args: argparse.Namespace, ctx: Context) -> Path:
    root = Path(args.root or "/")
    if not args.user:
        return root / "etc/systemd/system"
    config = ctx.environ.get("XDG_CONFIG_HOME") or os.path.join(
        ctx.environ.get("HOME", ""), ".config"
    )
    if not os.path.isabs(config):
        raise UsageError("--user needs HOME (or XDG_CONFIG_HOME) set to an absolute path")
    return root / config.lstrip("/") / "systemd/user"


def _env_file_paths(
    args: argparse.Namespace, name: str, unit_dir: Path | None, has_secrets: bool
) -> tuple[Path, str] | None:
    """(where to write the env file, the path the unit names), or None when not needed."""
    if args.env_file:
        path = Path(os.path.abspath(args.env_file))
        return path, str(path)
    if not has_secrets:
        return None
    if unit_dir is not None:
        path = unit_dir / f"{name}.env"
        return path, "/" + str(path.relative_to(Path(args.root or "/")))
    if args.output:
        path = Path(os.path.abspath(args.output)).parent / f"{name}.env"
        return path, str(path)
    raise UsageError(
        "the command holds secrets (API keys or tokens), which never go into the unit text",
        hint="give --env-file FILE to keep them in a mode-0600 EnvironmentFile=, or use --install/--output",
    )


def _spec(
    args: argparse.Namespace, ctx: Context, name: str, secrets: su.Secrets, env_file: str | None
) -> su.UnitSpec:
    bringup = _bringup_path(args, ctx)
    timeout_start = parse_duration(args.timeout_start)
    guard_timeout = parse_duration(args.guard_timeout)
    if guard_timeout >= timeout_start:
        raise UsageError(
            "--guard-timeout must be shorter than --timeout-start (the guard runs inside it)"
        )
    parse_size(args.max_used)
    if args.start_limit_burst < 1:
        raise UsageError("--start-limit-burst must be at least 1")
    gpus_from = os.path.abspath(args.gpus_from) if args.gpus_from else None
    plain = [w for w in secrets.argv if isinstance(w, str)]
    engine = engine_args.parse_server_command(plain).engine if plain else None
    if not args.model and engine is not None and _loads_on_request(engine):
        raise UsageError(
            f"{engine} loads its model at the first request that names it: the unit's "
            "`bringup run` needs --model to know when it is ready",
            hint="give --model NAME, e.g. `bringup unit ollama --model llama3.2:1b -- ollama serve`",
        )
    return su.UnitSpec(
        name=name,
        description=args.description or _describe(secrets.argv),
        exec_start=su.run_command(bringup, secrets.argv, gpus_from=gpus_from, model=args.model),
        exec_start_pre=su.guard_command(
            bringup,
            max_used=args.max_used,
            timeout=args.guard_timeout,
            kill_stale=args.kill_stale,
            command=secrets.argv,
            gpus_from=gpus_from,
        ),
        environment=su.gpu_environment(args.gpus) + secrets.environment,
        environment_file=env_file,
        secret_names=tuple(k for k, _ in secrets.secret_environment),
        user=args.user,
        restart_seconds=parse_duration(args.restart_sec),
        timeout_start_seconds=timeout_start,
        timeout_stop_seconds=parse_duration(args.timeout_stop),
        watchdog_seconds=parse_duration(args.watchdog_sec) if args.watchdog_sec else None,
        start_limit_interval_seconds=parse_duration(args.start_limit_interval),
        start_limit_burst=args.start_limit_burst,
    )


def _describe(argv: tuple[su.Word, ...]) -> str:
    """``vllm serve meta-llama/Llama-3.1-8B under bringup``: the executable and its first words."""
    words = [Path(str(argv[0])).name]
    for word in argv[1:3]:
        if not isinstance(word, str) or word.startswith("-"):
            break
        words.append(word)
    return " ".join(words) + " under bringup"


def _write(
    args: argparse.Namespace,
    ctx: Context,
    name: str,
    text: str,
    unit_dir: Path | None,
    env_file: tuple[Path, str] | None,
    secrets: su.Secrets,
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
    write = system.write_file if system is not None else write_local
    if env_file is not None:
        write(str(env_file[0]), su.render_env_file(name, secrets.secret_environment), private=True)
    if target is not None:
        write(str(target), text)
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
        env_file=None if env_file is None else str(env_file[0]),
        secrets=tuple(k for k, _ in secrets.secret_environment),
        installed=unit_dir is not None,
        daemon_reload=system is not None,
        user=args.user,
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
