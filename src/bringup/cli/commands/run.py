"""``bringup run [options] -- CMD ARGS...``: start a server and follow it to a verified answer.

Exit codes: 0 ready (with --exit-when-ready, or stopped cleanly by Ctrl-C/SIGTERM after
ready), 1 failed (also: the server died after ready), 4 stalled or past --deadline,
2 usage (no command, a command that does not exist), 128+N interrupted by signal N before
a verdict.
"""

from __future__ import annotations

import argparse
import dataclasses
import threading

from bringup.cli import report_flags, report_options
from bringup.cli.follow_options import (
    add_common,
    add_retry,
    bench_at_ready,
    config_from,
    retry_run,
)
from bringup.cli.main import Context
from bringup.errors import UsageError
from bringup.follow.types import StartupConfig
from bringup.follow.wiring import follow_local, loads_on_request
from bringup.render.live import make_observer


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common(parser)
    parser.add_argument(
        "--keep",
        action="store_true",
        help="leave the server running on failure (and, with --exit-when-ready, when ready)",
    )
    parser.add_argument(
        "--exit-when-ready",
        action="store_true",
        help="exit 0 at ready; the server is stopped unless --keep",
    )
    parser.add_argument(
        "--notify",
        action="store_true",
        help="speak sd_notify (STATUS, EXTEND_TIMEOUT_USEC, READY=1 after the smoke request, WATCHDOG)",
    )
    parser.add_argument(
        "--grace",
        metavar="DURATION",
        default="10s",
        help="SIGTERM to SIGKILL grace when stopping the server (default 10s)",
    )
    add_retry(parser)
    parser.add_argument(
        "--bench",
        action="store_true",
        help="when ready, run `bringup bench` against the server (30 s, concurrency 1 and 4), then go on as without it",
    )
    parser.add_argument(
        "--nodes",
        metavar="FILE",
        help="one model over several machines: FILE lists the nodes in rank order ([user@]host[:port] NAME=value ...); each gets its own command over ssh",
    )
    parser.add_argument(
        "--preflight",
        action="store_true",
        help="with --nodes: check every node (versions, model, GPUs, master port, interfaces) and exit, starting nothing",
    )
    parser.add_argument(
        "--join-timeout",
        metavar="DURATION",
        default="60s",
        help="with --nodes: a node that has not joined the group this long after node 0 waits for the others fails (default 60s; one at the rendezvous with node 0 fails after 30s at most; 0 = never)",
    )
    parser.add_argument(
        "--ray-port",
        metavar="PORT",
        type=int,
        default=6379,
        help="with --nodes and --distributed-executor-backend ray: the Ray head's port on node 0 (default 6379)",
    )
    parser.add_argument(
        "--ray-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="with --nodes and the Ray backend: one more word for every node's `ray start` (repeat it: --ray-arg=--num-cpus=8); --num-gpus is what the pre-flight counts",
    )
    parser.epilog = "the server command goes after `--`, e.g. bringup run -- vllm serve Qwen/Qwen3-8B --port 8000"


def run(args: argparse.Namespace, ctx: Context) -> int:
    if not args.passthrough:
        raise UsageError(
            "no server command given",
            hint="put it after `--`, e.g. `bringup run -- vllm serve MODEL`",
        )
    if args.nodes:
        from bringup.cli.commands.run_nodes import run_nodes

        if report_flags.markdown_target(args):
            raise UsageError(
                "--markdown reports one server's start; a node's run folder has its own report",
                hint="drop --markdown, then `bringup report RUN_DIR` with the failed rank's folder",
            )
        nodes_reporting = report_options.Reporting(args, ctx, "bringup run --nodes")
        try:
            return run_nodes(args, ctx, nodes_reporting)
        finally:
            nodes_reporting.close()
    if args.preflight:
        raise UsageError("--preflight checks the nodes of --nodes FILE", hint="add --nodes FILE")
    config = config_from(args, ctx, tuple(args.passthrough))
    if loads_on_request(config) and not config.model:
        raise UsageError(
            "this server loads its model at the first request that names it, and none is named",
            hint="give the model to load and ask with --model NAME (one `ollama list` shows), "
            "e.g. `bringup run --model llama3.2:1b -- ollama serve`",
        )
    report_flags.check(args)
    reporting = report_options.Reporting(args, ctx, "bringup run")
    try:
        return _run(args, ctx, config, reporting)
    finally:
        reporting.close()


def _run(
    args: argparse.Namespace,
    ctx: Context,
    config: StartupConfig,
    reporting: report_options.Reporting,
) -> int:
    reporting.argv = config.argv
    if args.retry:
        return retry_run(args, ctx, config, reporting)
    human = report_flags.human_context(args, ctx)
    observer = make_observer(
        human.stdout,
        human.stderr,
        human.environ,
        as_json=args.json,
        quiet=args.quiet,
        title="bringup run",
    )
    followed = reporting.wrap(observer, config.argv)
    if args.bench:
        # the server must stay up for the benchmark: supervise on, and stop it afterwards
        # (as --exit-when-ready would have): a stop on request, as a SIGTERM after ready is
        config = dataclasses.replace(config, exit_when_ready=False)
        stop = threading.Event()
        hook = bench_at_ready(args, ctx, stop)
        result = follow_local(config, observer=followed, on_event=hook, stop=stop)
    else:
        result = follow_local(config, observer=followed)
    return result.exit_code
