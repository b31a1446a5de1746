"""``bringup run --nodes FILE [--preflight] -- CMD``: one model over several machines.

From the one command, each node's own (the engine pack's multi-node flags); then the
pre-flight on every node at once, over ssh (seconds, where a misfit node otherwise costs
torch's 30-minute timeout); then every node started and followed as one startup.

Exit codes: 0 ready (with --exit-when-ready; or stopped by Ctrl-C/SIGTERM after ready;
with --preflight: every check passed), 1 the pre-flight found problems (nothing was
started) or the startup failed (a node named), 4 stalled or past --deadline, 2 usage
(a bad nodes file, a command that cannot be spread over the nodes), 128+N interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from bringup import exit_codes
from bringup.adapters import files
from bringup.adapters import nodes as node_adapter
from bringup.adapters.clock import SystemClock
from bringup.adapters.http_probe import HttpProber, api_key_from
from bringup.adapters.node_process import RUN_ROOT, RUN_ROOT_VARIABLE, RemoteServer, run_folder
from bringup.adapters.sd_notify import Notifier
from bringup.adapters.ssh import SshTarget, target_from
from bringup.cli.follow_options import bench_at_ready, retry_reporter
from bringup.cli.main import Context
from bringup.core import engine_args, packs
from bringup.core.attempts import AttemptRecord
from bringup.core.live import ClusterEvent, NodesResult
from bringup.core.nodes import (
    DEFAULT_RAY_PORT,
    ClusterPlan,
    Node,
    NodeFacts,
    parse_nodes,
    plan_cluster,
    preflight,
    uses_ray,
)
from bringup.core.packs.types import MultiNodeSpec, Pack
from bringup.core.vocab import Engine
from bringup.errors import UsageError
from bringup.follow.nodes import RAY, NodesConfig, NodesObserver, follow_nodes
from bringup.follow.nodes_retry import DeferredSummary, retry_nodes
from bringup.render.json_out import write_line
from bringup.render.nodes import (
    BothObservers,
    JsonNodesObserver,
    PlainNodesObserver,
    plan_lines,
    problem_lines,
)
from bringup.units import parse_duration

NODES_FILE_LIMIT = 1 << 20
EXIT_PREFLIGHT = exit_codes.EXIT_FAILED  # a node cannot serve: the bring-up failed before it began


def run_nodes(args: argparse.Namespace, ctx: Context, reporting: Any = None) -> int:
    """``run --nodes``: plan, pre-flight, then start and follow every node."""
    argv = list(args.passthrough or [])
    if not argv:
        raise UsageError(
            "no server command given",
            hint="put it after `--`, e.g. `bringup run --nodes nodes.txt -- vllm serve MODEL -tp 2`",
        )
    if args.keep:
        raise UsageError(
            "--keep does not work with --nodes: a node's server lives as long as bringup's ssh "
            "session to it, so nothing would stop the servers left behind",
            hint="run `bringup run --nodes` itself under systemd or tmux to keep serving",
        )
    if args.retry < 0:
        raise UsageError(f"--retry {args.retry}: give a count of 0 or more")
    text = files.read_text(args.nodes, limit=NODES_FILE_LIMIT, what="nodes file")
    nodes = parse_nodes(text, source=files.shown(args.nodes))
    parsed = engine_args.parse_server_command(argv)
    engine = Engine(args.engine) if args.engine != "auto" else parsed.engine
    if engine is None:
        raise UsageError(
            f"cannot tell which engine `{' '.join(argv[:3])}` starts",
            hint="give --engine vllm, or start it as `vllm serve MODEL`",
        )
    pack = packs.get(engine)
    spec = pack.multinode
    if spec is None:
        raise UsageError(
            f"bringup cannot spread {engine.value} over several nodes",
            hint="--nodes knows vLLM's multi-node runtime (--nnodes/--node-rank)",
        )
    run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    ray_args = [word for arg in args.ray_arg for word in shlex.split(arg)]
    if (args.ray_arg or args.ray_port != DEFAULT_RAY_PORT) and not uses_ray(argv, spec):
        raise UsageError(
            "--ray-port and --ray-arg are for the Ray backend",
            hint=f"add {spec.ray.backend_flag if spec.ray else '--distributed-executor-backend'} ray to the command, or leave them out",
        )
    if not 0 < args.ray_port < 65536:
        raise UsageError(f"--ray-port {args.ray_port} is not a port", hint="1-65535")
    plan = plan_cluster(
        argv,
        nodes,
        spec,
        default_http_port=pack.http.default_port,
        ray_port=args.ray_port,
        ray_args=ray_args,
        ray_tag=f"{os.getpid():x}{int(time.time()) % 0x10000:04x}",
    )
    human: TextIO = ctx.stderr if args.json else ctx.stdout

    def say(line: str) -> None:
        human.write(f"bringup: {line}\n")
        human.flush()

    for line in plan_lines(plan):
        say(line)
    if plan.problems:
        for line in problem_lines(plan.problems):
            say(line)
        _json(
            args,
            ctx,
            {"event": "preflight", "ok": False, "problems": [p.to_json() for p in plan.problems]},
        )
        raise UsageError(f"the command cannot be spread over {len(nodes)} nodes (see above)")

    def target_for(node: Node) -> SshTarget:
        return target_from(
            node.address,
            accept_new_host_key=getattr(args, "accept_new_host_key", False),
            environ=ctx.environ,
        )

    started = time.monotonic()
    facts, listen = node_adapter.gather(plan, target_for, packages=spec.packages)
    problems = preflight(plan, facts, spec, listen=listen, ray_args=ray_args)
    seconds = time.monotonic() - started
    for node, f in zip(plan.nodes, facts, strict=True):
        say(f"{node.label}: {_facts_line(f)}")
    for line in problem_lines(problems):
        say(line)
    errors = [p for p in problems if p.severity == "error"]
    _json(
        args,
        ctx,
        {
            "event": "preflight",
            "ok": not errors,
            "seconds": round(seconds, 3),
            "problems": [p.to_json() for p in problems],
        },
    )
    if errors:
        say(
            f"pre-flight: {len(errors)} problem{'s' if len(errors) != 1 else ''} in {seconds:.1f}s; nothing was started"
        )
        return EXIT_PREFLIGHT
    say(f"pre-flight passed on {len(nodes)} nodes in {seconds:.1f}s")
    if args.preflight:
        return 0
    stall = parse_duration(args.stall)
    deadline = parse_duration(args.deadline)
    join = parse_duration(args.join_timeout)
    config = NodesConfig(
        plan=plan,
        spec=spec,
        engine=engine,
        grace_seconds=parse_duration(args.grace),
        join_seconds=join or None,
        stall_seconds=stall or None,
        deadline_seconds=deadline or None,
        exit_when_ready=args.exit_when_ready,
    )
    root = ctx.environ.get(RUN_ROOT_VARIABLE) or RUN_ROOT
    grace = config.grace_seconds
    notify = Notifier(ctx.environ) if args.notify else None
    stop: threading.Event | None = None
    hook = None
    if args.bench:
        # the servers must stay up for the benchmark: follow on, and stop them afterwards
        # (as --exit-when-ready would have): a stop on request, as a SIGTERM after ready is
        stop = threading.Event()
        hook = bench_at_ready(args, ctx, stop)
        config = dataclasses.replace(config, exit_when_ready=False)

    def attempt(number: int, attempt_plan: ClusterPlan, observer: NodesObserver) -> NodesResult:
        if reporting is not None:  # --timeline, the metrics: they see what the observer sees
            observer = reporting.wrap_nodes(observer)
        folder_id = f"{run_id}-a{number}" if args.retry else run_id
        server_for = server_factory(
            attempt_plan, target_for, root=root, run_id=folder_id, grace_seconds=grace
        )
        prober = HttpProber(attempt_plan.rank0_url, api_key=api_key_from(args.api_key, ctx.environ))
        return follow_nodes(
            dataclasses.replace(config, plan=attempt_plan),
            observer,
            server_for=server_for,
            prober=prober,
            clock=SystemClock(),
            notify=notify,
            on_event=hook,
            stop=stop,
        )

    plain = PlainNodesObserver(human, echo=not args.quiet)
    if not args.retry:
        observer = BothObservers(JsonNodesObserver(ctx.stdout), plain) if args.json else plain
        return attempt(1, plan, observer).exit_code
    return _retry(args, ctx, argv, plan, pack, spec, plain, attempt, ray_args)


def _retry(
    args: argparse.Namespace,
    ctx: Context,
    argv: list[str],
    first: ClusterPlan,
    pack: Pack,
    spec: MultiNodeSpec,
    plain: PlainNodesObserver,
    attempt: Callable[[int, ClusterPlan, NodesObserver], NodesResult],
    ray_args: list[str],
) -> int:
    """``run --nodes --retry N``: a remedy rewrites the one command; every node's command is
    planned from it again and every node started again (the pre-flight is not repeated: a
    remedy changes engine flags, not the nodes)."""
    reporter = retry_reporter(args, ctx)
    json_observer = JsonNodesObserver(ctx.stdout) if args.json else None
    current: list[DeferredSummary] = []

    def plan_for(words: tuple[str, ...]) -> ClusterPlan:
        if list(words) == argv:
            return first
        return plan_cluster(
            words,
            first.nodes,
            spec,
            default_http_port=pack.http.default_port,
            ray_port=args.ray_port,
            ray_args=ray_args,
            ray_tag=first.ray_temp_dirs[0].rsplit("-", 2)[-2] if first.is_ray else "run",
        )

    def one(number: int, attempt_plan: ClusterPlan) -> NodesResult:
        if number > 1:
            for line in plan_lines(attempt_plan)[1 : len(attempt_plan.nodes) + 1]:
                reporter.note(line)
        deferred = DeferredSummary(json_observer or _Silent(), human=plain)
        current[:] = [deferred]
        return attempt(number, attempt_plan, deferred)

    def close(_: NodesResult, records: Sequence[AttemptRecord], final: bool) -> None:
        current[0].release(records, final=final)

    outcome = retry_nodes(
        argv,
        args.retry,
        pack=pack,
        plan_for=plan_for,
        attempt=one,
        close=close,
        on_retry=reporter.retry,
        on_stop=reporter.stop,
    )
    return outcome.exit_code


class _Silent:
    """No JSON: the deferred summary has nowhere to go."""

    def event(self, event: ClusterEvent) -> None: ...
    def line(self, rank: int, text: str) -> None: ...
    def note(self, text: str) -> None: ...
    def close(self, result: NodesResult) -> None: ...


def server_factory(
    plan: ClusterPlan,
    target_for: Callable[[Node], SshTarget],
    *,
    root: str,
    run_id: str,
    grace_seconds: float,
) -> Callable[[Node, tuple[str, ...], str], RemoteServer]:
    """How each node's server is made: over ssh in the node wrapper, its run folder under
    ``root``; with the Ray backend node 0's Ray head gets a folder beside its engine's
    (``-rank0-ray``), every ``ray start`` its ``--temp-dir`` removed after the stop, and the
    engine the cluster's address."""

    def server_for(node: Node, argv: tuple[str, ...], role: str) -> RemoteServer:
        folder = run_folder(root, run_id, node.rank)
        env = list(node.env)
        remove_after = None
        if role == RAY:  # node 0's Ray head beside its engine; elsewhere Ray is all there is
            folder += "-ray" if node.rank == 0 else ""
            env += [("PYTHONUNBUFFERED", "1")]  # its lines as they come, through the pipe
            remove_after = plan.ray_temp_dirs[node.rank]
        elif plan.is_ray:
            env += list(plan.serve_env)
        return RemoteServer(
            target_for(node),
            argv,
            env,
            folder,
            grace_seconds=grace_seconds,
            remove_after=remove_after,
        )

    return server_for


def _facts_line(f: NodeFacts) -> str:
    if not f.reached:
        return f"not reached ({f.error})"
    versions = ", ".join(
        f"{k} {v}" for k, v in f.packages.items() if v and not (f.asked_ray and k == "ray")
    )
    model = "no model" if f.model_files is None else f"model {len(f.model_files)} files"
    if f.gpu_count is not None:
        gpus = f"{f.gpu_count} GPU{'s' if f.gpu_count != 1 else ''}"
    else:
        gpus = "CPU build" if "+cpu" in (f.packages.get("torch") or "") else "GPUs unknown"
    ray = ""
    if f.asked_ray:
        ray = (
            f"; ray {f.ray_packages.get('ray') or '?'} (Python {f.ray_python_version or '?'})"
            if f.ray_path
            else "; no ray"
        )
    return f"Python {f.python_version or '?'}, {versions or 'no engine'}{ray}; {model}; {gpus}; {'Ray head' if f.asked_ray else 'master'} port {'reachable' if f.connect_ok else 'not reachable' if f.connect_ok is False else 'not tried'}"


def _json(args: argparse.Namespace, ctx: Context, obj: dict[str, object]) -> None:
    if args.json:
        write_line(obj, ctx.stdout)
