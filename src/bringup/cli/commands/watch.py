"""``bringup watch (--unit NAME | --container NAME | --log FILE | --pid PID)``: follow a server
bringup did not start, to the same verdict as ``run``. It never signals that server.

Exit codes: 0 ready (or, with --follow, stopped watching by Ctrl-C after ready), 1 failed,
4 stalled or past --deadline, 2 usage or a source that cannot be followed, 128+N
interrupted by signal N before a verdict.
"""

from __future__ import annotations

import argparse

from bringup.adapters.sources.container import ContainerSource
from bringup.adapters.sources.items import Source
from bringup.adapters.sources.logfile import FileSource
from bringup.adapters.sources.pid import PidSource
from bringup.adapters.sources.remote_file import RemoteFileSource
from bringup.adapters.sources.unit import UnitSource
from bringup.cli import remote, report_flags, report_options
from bringup.cli.follow_options import add_common, config_from
from bringup.cli.main import Context
from bringup.errors import UsageError
from bringup.follow.wiring import follow_local
from bringup.render.live import make_observer


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--unit",
        metavar="NAME",
        help="a systemd unit (systemctl show + journalctl -u NAME -o json -f)",
    )
    what.add_argument(
        "--container", metavar="NAME", help="a docker container (docker inspect + docker logs -f)"
    )
    what.add_argument(
        "--log", metavar="FILE", help="a log file, followed like tail -F (renames, truncation)"
    )
    what.add_argument("--pid", metavar="PID", type=int, help="a process id: liveness only, no log")
    add_common(parser)
    parser.add_argument(
        "--from-end",
        action="store_true",
        help="with --log: only the lines written from now on (default: the newest attempt the file holds)",
    )
    parser.add_argument(
        "--from-start",
        action="store_true",
        help="with --log: every attempt the file holds, from its first line",
    )
    parser.add_argument(
        "--follow",
        action="store_true",
        help="keep watching after ready until the server dies (exit 1) or Ctrl-C (exit 0)",
    )
    remote.add_host_arguments(parser)


def make_source(args: argparse.Namespace, ctx: Context) -> Source:
    """The source named by the flags (over ssh with --host)."""
    runner = remote.ssh_runner(args, ctx.environ)
    if (args.from_end or args.from_start) and not args.log:
        raise UsageError("--from-end and --from-start apply to --log FILE only")
    if args.unit:
        return UnitSource(args.unit, ctx.environ, runner=runner)
    if args.container:
        return ContainerSource(args.container, ctx.environ, runner=runner)
    if args.log:
        if args.from_end and args.from_start:
            raise UsageError("--from-end and --from-start both say where to begin; give one")
        start = "end" if args.from_end else "beginning" if args.from_start else "newest"
        if runner is None:
            return FileSource(args.log, start=start)
        return RemoteFileSource(args.log, runner, start=start)
    if runner is not None:
        raise UsageError(
            "--pid cannot be watched on a remote host",
            hint="use --unit, --container or --log with --host",
        )
    return PidSource(args.pid)


def run(args: argparse.Namespace, ctx: Context) -> int:
    if args.passthrough:
        raise UsageError(
            "watch takes no server command", hint="use `bringup run -- CMD` to start one"
        )
    report_flags.check(args)
    config = config_from(args, ctx, ())
    source = make_source(args, ctx)
    title = f"bringup watch {source.description}"
    human = report_flags.human_context(args, ctx)
    observer = make_observer(
        human.stdout,
        human.stderr,
        human.environ,
        as_json=args.json,
        quiet=args.quiet,
        title=title,
    )
    reporting = report_options.Reporting(args, ctx, title)
    try:
        followed = reporting.wrap(observer)
        result = follow_local(config, source=source, observer=followed, follow=args.follow)
    finally:
        reporting.close()
    return result.exit_code
