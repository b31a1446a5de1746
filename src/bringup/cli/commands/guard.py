"""``bringup guard``: wait until the selected GPUs are free, naming who holds them.

Exit codes: 0 free, 5 timed out (holders listed), 2 usage or unreadable input.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console

from bringup import exit_codes
from bringup.adapters import procinfo
from bringup.adapters.gpus import GpuSource, open_source
from bringup.cli.main import Context
from bringup.cli.options import add_duration
from bringup.core import guard
from bringup.core.gpu import GpuReading
from bringup.errors import UsageError
from bringup.render import guard as render
from bringup.render.console import make_console
from bringup.render.json_out import print_json
from bringup.units import format_bytes, parse_duration, parse_size

EXIT_FREE = exit_codes.EXIT_READY
EXIT_TIMEOUT = exit_codes.EXIT_GPUS_HELD
DEFAULT_MAX_USED = "1000MiB"


@dataclass(frozen=True)
class Options:
    """The guard's flags, parsed into bytes and seconds."""

    gpus: str | None
    threshold: guard.Threshold
    timeout_seconds: float
    interval_seconds: float
    report_seconds: float
    kill_stale: bool
    kill_grace_seconds: float
    service_cmdline: tuple[str, ...]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = "%(prog)s [options] [-- SERVICE COMMAND ...]"
    parser.add_argument(
        "--gpus",
        metavar="LIST",
        help="CUDA indices (within CUDA_VISIBLE_DEVICES when set) or UUIDs, comma-separated; default: all visible",
    )
    limit = parser.add_mutually_exclusive_group()
    limit.add_argument(
        "--max-used",
        metavar="SIZE",
        help=f"free means at most SIZE used (default {DEFAULT_MAX_USED})",
    )
    limit.add_argument("--need", metavar="SIZE", help="free means at least SIZE free")
    add_duration(parser, "--timeout", "give up after this long, exit 5", default="300s")
    add_duration(parser, "--interval", "time between readings", default="1s")
    add_duration(
        parser, "--report-every", "how often to name the holders while waiting", default="5s"
    )
    parser.add_argument(
        "--kill-stale",
        action="store_true",
        help="end holders that are provably earlier instances of this service (same unit or container as the guard, or the command line after --)",
    )
    add_duration(
        parser, "--kill-grace", "wait this long after SIGTERM before SIGKILL", default="10s"
    )
    parser.add_argument(
        "--gpus-from",
        metavar="FILE",
        help="read GPUs from a readings file (re-read each interval) instead of NVML",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the final state as one JSON object"
    )


def run(args: argparse.Namespace, ctx: Context) -> int:
    opts = parse_options(args)
    progress = make_console(ctx.stderr, ctx.environ)
    own: guard.ProcessInfo | None = None
    if opts.kill_stale:
        own = procinfo.inspect(os.getpid())
        _warn_if_nothing_provable(progress, own, opts.service_cmdline)
    result = wait(
        opts, open_source(args.gpus_from), ctx.environ.get("CUDA_VISIBLE_DEVICES"), progress, own
    )
    if args.json:
        print_json(result, ctx.stdout)
    else:
        out = make_console(ctx.stdout, ctx.environ)
        render.print_lines(out, render.format_result(result, opts.threshold, opts.timeout_seconds))
    return EXIT_FREE if result.ok else EXIT_TIMEOUT


def parse_options(args: argparse.Namespace) -> Options:
    """Check the flags and turn human units into bytes and seconds."""
    service = tuple(args.passthrough or ())
    if service and not args.kill_stale:
        raise UsageError(
            "a service command after -- is only used with --kill-stale",
            hint="add --kill-stale or drop the command",
        )
    threshold = (
        guard.Threshold(need_bytes=parse_size(args.need))
        if args.need is not None
        else guard.Threshold(max_used_bytes=parse_size(args.max_used or DEFAULT_MAX_USED))
    )
    interval = parse_duration(args.interval)
    if interval <= 0:
        raise UsageError(f"--interval must be positive, got {args.interval!r}")
    return Options(
        gpus=args.gpus,
        threshold=threshold,
        timeout_seconds=parse_duration(args.timeout),
        interval_seconds=interval,
        report_seconds=parse_duration(args.report_every),
        kill_stale=args.kill_stale,
        kill_grace_seconds=parse_duration(args.kill_grace),
        service_cmdline=service,
    )


def wait(
    opts: Options,
    source: GpuSource,
    cuda_visible_devices: str | None,
    progress: Console,
    own: guard.ProcessInfo | None,
) -> guard.GuardResult:
    """Sample until every selected GPU is free or the timeout passes."""
    start = time.monotonic()
    next_report = start
    killed: dict[int, guard.Ended] = {}
    first = True
    while True:
        selected = guard.select_gpus(source.read(), cuda_visible_devices, opts.gpus)
        if first:
            _refuse_impossible(selected, opts.threshold)
            first = False
        infos = _inspect_holders(selected)
        states = guard.evaluate(selected, opts.threshold, infos)
        now = time.monotonic()
        if guard.all_free(states):
            break
        if opts.kill_stale and _end_stale(opts, infos, own, killed, progress):
            continue  # sample again at once: the memory may be free now
        if now - start >= opts.timeout_seconds:
            break
        if now >= next_report:
            render.print_lines(
                progress,
                render.format_waiting(states, opts.threshold, now - start, opts.timeout_seconds),
            )
            next_report = now + opts.report_seconds
        time.sleep(max(0.01, min(opts.interval_seconds, start + opts.timeout_seconds - now)))
    return guard.GuardResult(
        ok=guard.all_free(states),
        waited_seconds=round(now - start, 3),
        gpus=states,
        max_used_bytes=opts.threshold.max_used_bytes,
        need_bytes=opts.threshold.need_bytes,
        killed=tuple(killed.values()),
    )


def _refuse_impossible(selected: Sequence[GpuReading], threshold: guard.Threshold) -> None:
    """``--need`` above a GPU's total memory: exit 2 now, not after the whole --timeout."""
    short = guard.impossible_need(selected, threshold)
    if not short or threshold.need_bytes is None:
        return
    largest = max(short, key=lambda g: g.memory_total_bytes)
    smallest_total = min(g.memory_total_bytes for g in selected)
    raise UsageError(
        f"--need {format_bytes(threshold.need_bytes)} can never be free: "
        + ", ".join(f"GPU {g.index}" for g in short)
        + f" {'has' if len(short) == 1 else 'have'} {format_bytes(largest.memory_total_bytes)}"
        + (" in total" if len(short) == 1 else " or less in total"),
        hint=f"give --need below {format_bytes(smallest_total)}, choose GPUs with --gpus LIST, "
        "or use --max-used SIZE",
    )


def _inspect_holders(selected: Sequence[GpuReading]) -> dict[int, guard.ProcessInfo]:
    infos: dict[int, guard.ProcessInfo] = {}
    for pid in {p.pid for g in selected for p in g.processes}:
        info = procinfo.inspect(pid)
        if info is not None:
            infos[pid] = info
    return infos


def _end_stale(
    opts: Options,
    infos: dict[int, guard.ProcessInfo],
    own: guard.ProcessInfo | None,
    killed: dict[int, guard.Ended],
    progress: Console,
) -> bool:
    """End stale holders not tried before; True when one was tried."""
    fresh = [
        s
        for s in guard.find_stale(infos.values(), own, opts.service_cmdline)
        if s.pid not in killed
    ]
    for stale in fresh:
        outcome = procinfo.terminate(stale.pid, stale.started_at, opts.kill_grace_seconds)
        ended = guard.Ended(stale.pid, stale.name, stale.reason, outcome)
        killed[stale.pid] = ended
        render.print_lines(progress, [render.format_ended(ended)])
    return bool(fresh)


def _warn_if_nothing_provable(
    progress: Console, own: guard.ProcessInfo | None, service: tuple[str, ...]
) -> None:
    cg = own.cgroup if own else None
    in_service = cg is not None and (
        cg.container is not None or (cg.unit is not None and guard.is_service_unit(cg.unit))
    )
    if not service and not in_service:
        progress.print(
            "--kill-stale: not running in a service unit or container and no service command "
            "after --, so no holder can be proved stale; holders are only reported",
            markup=False,
            highlight=False,
        )
