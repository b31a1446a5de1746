"""The options ``run``, ``watch`` and ``up`` share, and ``--retry`` of ``run`` and ``up``:
the flags, the follower's configuration made from them, and each attempt's output."""

from __future__ import annotations

import argparse
import threading
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bringup.cli import report_flags, report_options
from bringup.cli.main import Context
from bringup.cli.report_options import Reporting
from bringup.core.live import ClusterEvent, NodeEvent, Ready
from bringup.core.vocab import Engine
from bringup.errors import UsageError
from bringup.follow.retry import ChildAttempts, run_with_retry
from bringup.follow.types import Observer, StartupConfig
from bringup.render.live import make_observer
from bringup.render.service import RetryReporter
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
        metavar="URL",
        help="server base URL (default: the command's --host/--port, else the engine's default port)",
    )
    parser.add_argument(
        "--model",
        metavar="NAME",
        help="the model the smoke request names (default: the server's /v1/models, else the command's); for Ollama, which loads a model at the first request that names it, the model to load",
    )
    parser.add_argument(
        "--stall",
        metavar="DURATION",
        default="300s",
        help="no phase, progress or GPU memory change for this long = stalled (default 300s; 0 = never)",
    )
    parser.add_argument(
        "--deadline",
        metavar="DURATION",
        default="2h",
        help="the whole startup must be ready within this (default 2h; 0 = none)",
    )
    parser.add_argument(
        "--json", action="store_true", help="JSON Lines events on stdout; human output on stderr"
    )
    parser.add_argument(
        "--api-key",
        metavar="KEY",
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
    report_options.add_live(parser)


def add_retry(parser: argparse.ArgumentParser) -> None:
    """``--retry N``, shared with ``bringup run``."""
    parser.add_argument(
        "--retry",
        type=int,
        default=0,
        metavar="N",
        help="on a failure with a known remedy, change the setting and start again, at most N times",
    )


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
        model=getattr(args, "model", None),
        gpus_from=args.gpus_from,
        notify=getattr(args, "notify", False),
        environ=ctx.environ,
        predictor=_live_prediction,
    )


def _live_prediction(argv: Sequence[str], environ: Mapping[str, str]) -> Any:
    """``follow.startup_time.live_prediction``, imported when a start is followed (it
    brings the planner with it; other commands need not pay for the import)."""
    from bringup.follow.startup_time import live_prediction

    return live_prediction(argv, environ)


def attempt_observers(
    args: argparse.Namespace, ctx: Context, title: str, reporting: Reporting | None = None
) -> Callable[[int], Observer]:
    """The observers of attempt N (its title says which attempt after the first); each also
    feeds ``reporting`` when given (``--markdown``, ``--timeline``, the metrics)."""
    human = report_flags.human_context(args, ctx)

    def make(number: int) -> Observer:
        suffix = f" (attempt {number})" if number > 1 else ""
        observer = make_observer(
            human.stdout,
            human.stderr,
            human.environ,
            as_json=args.json,
            quiet=args.quiet,
            title=title + suffix,
        )
        return reporting.wrap(observer) if reporting is not None else observer

    return make


def retry_reporter(args: argparse.Namespace, ctx: Context) -> RetryReporter:
    """Reports each retry and why the last attempt was not retried."""
    return RetryReporter(
        ctx.stdout, ctx.stderr if args.json else ctx.stdout, as_json=args.json, retries=args.retry
    )


def retry_run(
    args: argparse.Namespace, ctx: Context, config: StartupConfig, reporting: Reporting
) -> int:
    """``bringup run --retry N``: the command line is rewritten before each new attempt."""
    if args.retry < 0:
        raise UsageError(f"--retry {args.retry}: give a count of 0 or more")
    reporter = retry_reporter(args, report_flags.human_context(args, ctx))
    attempts = ChildAttempts(config, attempt_observers(args, ctx, "bringup run", reporting))
    outcome = run_with_retry(
        attempts, config.argv, args.retry, on_retry=reporter.retry, on_stop=reporter.stop
    )
    return outcome.exit_code


def bench_at_ready(
    args: argparse.Namespace, ctx: Context, stop: threading.Event
) -> Callable[[ClusterEvent], None]:
    """The hook that starts the benchmark at the first Ready (rank 0's, with --nodes)."""
    started = threading.Event()

    def bench(url: str) -> None:
        from bringup.cli.commands.bench import run_after_ready

        run_after_ready(url, ctx, api_key=args.api_key, as_json=args.json)
        if args.exit_when_ready:
            stop.set()

    def hook(event: ClusterEvent) -> None:
        if isinstance(event, NodeEvent):
            event = event.inner
        if isinstance(event, Ready) and not started.is_set():
            started.set()
            parts = urllib.parse.urlsplit(event.url or args.url or "")
            threading.Thread(
                target=bench, args=(f"{parts.scheme}://{parts.netloc}",), daemon=True, name="bench"
            ).start()

    return hook
