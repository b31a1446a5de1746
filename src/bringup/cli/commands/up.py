"""``bringup up NAME [--retry N]``: start a systemd unit and follow it to a verdict.

``systemctl start --no-block NAME``, then the unit is followed like ``bringup watch --unit
NAME`` (the current invocation's journal, state from ``systemctl show``). With ``--retry N``
a retryable failure is remedied: the changed command line goes into the drop-in
``NAME.service.d/bringup-retry.conf`` (under /etc/systemd/system, or
~/.config/systemd/user with --user), then ``daemon-reload`` and ``restart``, at most N times.
With ``--host`` every step runs on the host over ssh: the drop-in is written there, and the
change is checked in that systemd's ``show -p ExecStart,DropInPaths`` and the new run's
``/proc/MAINPID/cmdline`` there before it is announced; GPU waits read its ``nvidia-smi``.

Exit codes: 0 ready (the model answered), 1 failed, 4 stalled or past --deadline, 2 usage
or a unit that cannot be started or followed, 128+N interrupted by signal N.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path

from bringup.adapters import remote_host
from bringup.adapters.commands import Runner, system_runner
from bringup.adapters.ssh import SshRunner
from bringup.adapters.systemd import Systemctl
from bringup.cli import remote, report_flags, report_options
from bringup.cli.follow_options import (
    add_common,
    add_retry,
    attempt_observers,
    config_from,
    retry_reporter,
)
from bringup.cli.main import Context
from bringup.core.systemd_unit import unit_name
from bringup.errors import BringupError, UsageError
from bringup.follow.retry import UnitAttempts, run_with_retry
from bringup.units import parse_duration


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help="the systemd unit (NAME or NAME.service)")
    add_retry(parser)
    add_common(parser)
    parser.add_argument(
        "--user", action="store_true", help="a unit of the user's manager (systemctl --user)"
    )
    parser.add_argument(
        "--root",
        metavar="DIR",
        help="treat DIR as the file-system root for the retry drop-in (packaging, tests)",
    )
    parser.add_argument(
        "--start-timeout",
        metavar="DURATION",
        default="60s",
        help="how long the unit may take to begin a new run after start/restart (default 60s)",
    )
    parser.add_argument(
        "--bench",
        action="store_true",
        help="when ready, run `bringup bench` against the server (its report on the human stream)",
    )
    remote.add_host_arguments(parser)


def unit_dir(user: bool, root: str | None, environ: dict[str, str] | None) -> Path:
    """/etc/systemd/system, or ~/.config/systemd/user (XDG_CONFIG_HOME honoured), under ``root``."""
    base = Path(root or "/")
    if not user:
        return base / "etc/systemd/system"
    env = environ or {}
    config = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME", ""), ".config")
    if not os.path.isabs(config):
        raise UsageError("--user needs HOME (or XDG_CONFIG_HOME) set to an absolute path")
    return base / config.lstrip("/") / "systemd/user"


def run(args: argparse.Namespace, ctx: Context, runner: Runner | None = None) -> int:
    if args.passthrough:
        raise UsageError(
            "up takes no server command",
            hint="the unit's ExecStart= is the command; write it with `bringup unit`",
        )
    if args.retry < 0:
        raise UsageError(f"--retry {args.retry}: give a count of 0 or more")
    name = unit_name(args.name) + ".service"
    if args.host and args.root:
        raise UsageError(
            "--root names a folder on this machine; with --host the drop-in goes where the host's systemd reads it",
            hint="drop --root (or run `bringup up --root DIR` on the host itself)",
        )
    report_flags.check(args)
    reporting = report_options.Reporting(args, ctx, f"bringup up {name}")
    try:
        return _up(args, ctx, name, runner, reporting)
    finally:
        reporting.close()


def _up(
    args: argparse.Namespace,
    ctx: Context,
    name: str,
    runner: Runner | None,
    reporting: report_options.Reporting,
) -> int:
    runner = runner or remote.ssh_runner(args, ctx.environ)
    config = config_from(args, ctx, ())
    reporter = retry_reporter(args, report_flags.human_context(args, ctx))
    remote_runner = runner if isinstance(runner, SshRunner) else None
    attempts = UnitAttempts(
        name,
        Systemctl(runner or system_runner(ctx.environ), user=args.user),
        config,
        attempt_observers(args, ctx, f"bringup up {name}", reporting),
        # with --host the drop-in is written there, through ssh: its unit folder, its HOME
        unit_dir=unit_dir(
            args.user,
            args.root,
            remote_home(remote_runner)
            if remote_runner and args.user and args.retry
            else dict(ctx.environ),
        ),
        start_timeout_seconds=parse_duration(args.start_timeout),
        on_note=reporter.note,
        local_dropin=bool(args.root),
        gpus=remote_host.RemoteGpus(remote_runner)
        if remote_runner and not args.gpus_from
        else None,
    )
    argv = attempts.server_argv()
    reporting.argv = tuple(argv)
    key, model = attempts.systemctl.server_identity(name, list(argv))
    attempts.config = dataclasses.replace(
        attempts.config, api_key=args.api_key or key, model=args.model or model
    )
    if isinstance(runner, SshRunner) and not args.url:
        attempts.config = dataclasses.replace(
            attempts.config, url=remote_host.server_url(argv, runner)
        )
    outcome = run_with_retry(
        attempts, argv, args.retry, on_retry=reporter.retry, on_stop=reporter.stop
    )
    if outcome.exit_code == 0:
        wait_until_active(attempts.systemctl, name, reporter.note)
    if args.bench and outcome.exit_code == 0:
        from bringup.cli.commands.bench import run_after_ready

        run_after_ready(outcome.result.url, ctx, api_key=args.api_key, as_json=args.json)
    return outcome.exit_code


def remote_home(runner: SshRunner) -> dict[str, str]:
    """HOME and XDG_CONFIG_HOME on the host, for the user manager's unit folder there."""
    result = runner.check(["sh", "-c", 'printf "%s\\n%s\\n" "$HOME" "${XDG_CONFIG_HOME:-}"'])
    home, _, config = result.stdout.partition("\n")
    env = {"HOME": home.strip()}
    if config.strip():
        env["XDG_CONFIG_HOME"] = config.strip()
    return env


def wait_until_active(
    systemctl: Systemctl, unit: str, note: Callable[[str], None], seconds: float = 15.0
) -> None:
    """The model answered; a Type=notify unit turns active a moment later, when the unit's own
    ``bringup run`` sends READY=1 after its smoke request. Wait for that (bounded), so that
    ``up``'s verdict and ``systemctl is-active`` agree when ``up`` returns; say so if not."""
    end = time.monotonic() + seconds
    state = ""
    while True:
        try:
            state = systemctl.show(unit).get("ActiveState", "")
        except BringupError:
            return  # the verdict stands; status can be asked later
        if state != "activating" or time.monotonic() >= end:
            break
        time.sleep(0.2)
    if state and state != "active":
        note(f"the model answered, but {systemctl.name} says {unit} is {state}")
