"""``bringup run [options] -- CMD ARGS...``: start a server and follow it to a verified answer.

Exit codes: 0 ready (with --exit-when-ready, or stopped cleanly by Ctrl-C/SIGTERM after
ready), 1 failed (also: the server died after ready), 4 stalled or past --deadline,
2 usage (no command, a command that does not exist), 128+N interrupted by signal N before
a verdict.
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import threading
import urllib.parse
from collections.abc import Callable

from bringup.cli.main import Context
from bringup.core.live import LiveEvent, Ready
from bringup.core.vocab import Engine
from bringup.errors import UsageError
from bringup.follow.types import StartupConfig
from bringup.follow.wiring import follow_local
from bringup.render.live import make_observer
from bringup.units import parse_duration

ENGINES = ("auto", *(e.value for e in Engine))


def add_common(parser: argparse.ArgumentParser) -> None:
    """Flags shared by ``run`` and ``watch``."""
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="auto",
        help="engine knowledge pack (default: from the command or log)",
    )
    parser.add_argument(
        "--url",
        help="server base URL (default: the command's --host/--port, else the engine's default port)",
    )
    parser.add_argument(
        "--stall",
        default="300s",
        help="no phase, progress or GPU memory change for this long = stalled (default 300s; 0 = never)",
    )
    parser.add_argument(
        "--deadline",
        default="2h",
        help="the whole startup must be ready within this (default 2h; 0 = none)",
    )
    parser.add_argument(
        "--json", action="store_true", help="JSON Lines events on stdout; human output on stderr"
    )
    parser.add_argument(
        "--api-key",
        help="API key for the probes (default: OPENAI_API_KEY or VLLM_API_KEY, else the server's own --api-key; for up, the unit's command and EnvironmentFile=)",
    )
    parser.add_argument(
        "--gpus-from", metavar="FILE", help="read GPU memory from a readings file instead of NVML"
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="do not echo the server's own log lines (plain output only)",
    )


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
        default="10s",
        help="SIGTERM to SIGKILL grace when stopping the server (default 10s)",
    )
    parser.add_argument(
        "--retry",
        type=int,
        default=0,
        metavar="N",
        help="on a failure with a known remedy, change the flag and start again, at most N times",
    )
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
        default="120s",
        help="with --nodes: a node that has not joined the group this long after the start fails (default 120s; 0 = never)",
    )
    parser.epilog = "the server command goes after `--`, e.g. bringup run -- vllm serve Qwen/Qwen3-8B --port 8000"


def config_from(args: argparse.Namespace, ctx: Context, argv: tuple[str, ...]) -> StartupConfig:
    """The supervisor configuration from the parsed flags."""
    stall = parse_duration(args.stall)
    deadline = parse_duration(args.deadline)
    return StartupConfig(
        argv=argv,
        engine=None if args.engine == "auto" else Engine(args.engine),
        url=args.url,
        stall_seconds=stall or None,
        deadline_seconds=deadline or None,
        grace_seconds=parse_duration(getattr(args, "grace", "10s")),
        keep=getattr(args, "keep", False),
        exit_when_ready=getattr(args, "exit_when_ready", False),
        api_key=args.api_key,
        gpus_from=args.gpus_from,
        notify=getattr(args, "notify", False),
        environ=ctx.environ,
    )


def run(args: argparse.Namespace, ctx: Context) -> int:
    if not args.passthrough:
        raise UsageError(
            "no server command given",
            hint="put it after `--`, e.g. `bringup run -- vllm serve MODEL`",
        )
    if args.nodes:
        from bringup.cli.commands.run_nodes import run_nodes

        return run_nodes(args, ctx)
    if args.preflight:
        raise UsageError("--preflight checks the nodes of --nodes FILE", hint="add --nodes FILE")
    config = config_from(args, ctx, tuple(args.passthrough))
    if args.retry:
        from bringup.cli.commands.up import retry_run

        return retry_run(args, ctx, config)
    observer = make_observer(
        ctx.stdout,
        ctx.stderr,
        ctx.environ,
        as_json=args.json,
        quiet=args.quiet,
        title="bringup run",
    )
    if args.bench:
        # the server must stay up for the benchmark: supervise on, and stop it afterwards
        # (as --exit-when-ready would have) through the same path as a SIGTERM after ready
        config = dataclasses.replace(config, exit_when_ready=False)
        result = follow_local(config, observer=observer, on_event=_bench_at_ready(args, ctx))
    else:
        result = follow_local(config, observer=observer)
    return result.exit_code


def _bench_at_ready(args: argparse.Namespace, ctx: Context) -> Callable[[LiveEvent], None]:
    started = threading.Event()

    def bench(url: str) -> None:
        from bringup.cli.commands.bench import run_after_ready

        run_after_ready(url, ctx, api_key=args.api_key, as_json=args.json)
        if args.exit_when_ready:
            signal.raise_signal(signal.SIGTERM)

    def hook(event: LiveEvent) -> None:
        if isinstance(event, Ready) and not started.is_set():
            started.set()
            parts = urllib.parse.urlsplit(event.url or args.url or "")
            threading.Thread(
                target=bench, args=(f"{parts.scheme}://{parts.netloc}",), daemon=True, name="bench"
            ).start()

    return hook
