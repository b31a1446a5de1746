"""Follow one startup over several nodes (``bringup run --nodes FILE -- CMD``).

Its dependencies are passed in: a factory of node servers (over ssh:
``adapters.node_process.RemoteServer``), the prober of rank 0's API, the clock (every
*when* is decided from it: in-process tests pass a fake one), and sd_notify (``--notify``).

Every node's server is started over ssh at once (``adapters.node_process``); each node's
lines go to its own analyzer; ``core.nodes.ClusterMachine`` decides: ready only when rank
0 answered the smoke request and every node is alive; the first node to fail (an error
line, an exit, or never joining) is named with its own root-cause line, and then every
node is stopped (SIGTERM, SIGKILL after the grace, /dev/shm leftovers removed). After
ready it keeps following until a node ends (reported at once, even while idle) or the
user stops it.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from bringup import exit_codes
from bringup.adapters.clock import Clock
from bringup.core.analyzer import LogAnalyzer
from bringup.core.diagnosis import Failure, Remedy
from bringup.core.live import (
    ClusterEvent,
    FailureFound,
    NodeEvent,
    NodesResult,
    PhaseReached,
    Progress,
    Ready,
    failure_fields,
)
from bringup.core.nodes import ClusterMachine, ClusterPlan, Node
from bringup.core.packs.types import MultiNodeSpec
from bringup.core.phase_words import status_text
from bringup.core.startup import StartupPolicy, timeline_json
from bringup.core.verdict import State
from bringup.core.vocab import Engine, FailureClass
from bringup.core.words import count
from bringup.follow.samplers import Inbox, InlineLane, Lane, ProbeItem, ThreadLane, probe_once
from bringup.follow.service_notes import ServiceNotes
from bringup.follow.types import Notify, Prober

TICK_SECONDS = 0.1  # the longest the loop waits for an item before it looks at the clock
EXIT_READY, EXIT_FAILED, EXIT_STALLED = (
    exit_codes.EXIT_READY,
    exit_codes.EXIT_FAILED,
    exit_codes.EXIT_STALLED,
)


class NodeServer(Protocol):
    """One node's server (``adapters.node_process.RemoteServer``)."""

    def start(
        self, on_line: Callable[[str], None], on_exit: Callable[[int | None, str | None], None]
    ) -> None: ...
    def stop(self) -> None: ...
    @property
    def running(self) -> bool: ...


# node, its command, its role ("engine": the engine's server; "ray": the node's `ray start`)
ServerFactory = Callable[[Node, tuple[str, ...], str], NodeServer]
ENGINE, RAY = "engine", "ray"


@dataclass(frozen=True)
class NodesConfig:
    """What to start where, and the limits."""

    plan: ClusterPlan
    spec: MultiNodeSpec
    engine: Engine = Engine.VLLM
    grace_seconds: float = 10.0
    join_seconds: float | None = 60.0
    stall_seconds: float | None = 300.0
    deadline_seconds: float | None = 7200.0
    exit_when_ready: bool = False
    probe_interval_seconds: float = 0.25


class NodesObserver(Protocol):
    """Renders a startup over several nodes (``bringup.render.nodes``)."""

    def event(self, event: ClusterEvent) -> None: ...
    def line(self, rank: int, text: str) -> None: ...
    def note(self, text: str) -> None: ...
    def close(self, result: NodesResult) -> None: ...


@dataclass(frozen=True, slots=True)
class _Line:
    rank: int
    text: str
    role: str = ENGINE


@dataclass(frozen=True, slots=True)
class _Exit:
    rank: int
    code: int | None
    error: str | None
    role: str = ENGINE


@dataclass(frozen=True, slots=True)
class _Signal:
    signum: int


def follow_nodes(
    config: NodesConfig,
    observer: NodesObserver,
    *,
    server_for: ServerFactory,
    prober: Prober,
    clock: Clock,
    notify: Notify | None = None,
    on_event: Callable[[ClusterEvent], None] | None = None,
    stop: threading.Event | None = None,
    threads: bool = True,
) -> NodesResult:
    """Start every node's server and follow them as one startup, to a verdict.

    ``server_for(node, argv)`` makes a node's server; ``prober`` asks rank 0's API; ``clock``
    decides every *when*; ``notify`` speaks sd_notify (STATUS, EXTEND_TIMEOUT_USEC, READY=1
    once every node is in and rank 0 answered, WATCHDOG, STOPPING); ``on_event`` sees each
    event (``run --nodes --bench`` starts its benchmark at ready); ``stop`` set by another
    thread asks the same as a SIGTERM. ``threads`` False probes on this thread and stops the
    nodes one after another (in-process tests with a fake clock).
    """
    return _Follower(
        config, observer, server_for, prober, clock, notify, on_event, stop, threads
    ).run()


class _Follower:
    def __init__(
        self,
        config: NodesConfig,
        observer: NodesObserver,
        server_for: ServerFactory,
        prober: Prober,
        clock: Clock,
        notify: Notify | None,
        on_event: Callable[[ClusterEvent], None] | None,
        stop: threading.Event | None,
        threads: bool,
    ) -> None:
        self.config = config
        self.observer = observer
        self.plan = config.plan
        self.clock = clock
        self.inbox = Inbox(clock)
        self.analyzers = [LogAnalyzer(config.engine) for _ in self.plan.nodes]
        policy = StartupPolicy(
            stall_seconds=config.stall_seconds,
            deadline_seconds=config.deadline_seconds,
            probe_interval_seconds=config.probe_interval_seconds,
            fallback_model=self.plan.model,
        )
        self.start = clock.monotonic()
        self.machine = ClusterMachine(
            self.plan, config.spec, policy, self.start, join_seconds=config.join_seconds
        )
        self.server_for = server_for
        self.ray_servers: list[NodeServer] = []
        self.servers: list[NodeServer] = []
        if self.plan.is_ray:  # the Ray cluster first; the engine on node 0 once it is up
            self.ray_servers = [
                server_for(node, self.plan.commands[node.rank], RAY) for node in self.plan.nodes
            ]
        else:
            self.servers = [
                server_for(node, self.plan.commands[node.rank], ENGINE) for node in self.plan.nodes
            ]
        self.prober = prober
        self.notes = ServiceNotes(notify)
        self.on_event = on_event
        self.stop_requested = stop
        self.threads = threads
        self.signum: int | None = None

    def run(self) -> NodesResult:
        lane: Lane = (
            ThreadLane("prober", self.inbox.put, self.prober.close)
            if self.threads
            else InlineLane(self.inbox.put, self.prober.close)
        )
        self.probe_lane = lane
        n = len(self.plan.nodes)
        self.notes.extend(self._extend_seconds(), self.clock.monotonic())
        self.notes.status(f"starting {n} nodes")
        if self.plan.is_ray:
            self._start_ray(0)  # the head; the others once it is up
            self.observer.note(
                f"starting the Ray head on node 0 ({self.plan.master_addr}:{self.plan.master_port})"
            )
        else:
            for rank, server in enumerate(self.servers):
                server.start(*self._sinks(rank))
            self.observer.note(f"started {n} nodes; rank 0 serves at {self.plan.rank0_url}")
        restore = _install_signals(self.inbox.put_from_signal)
        try:
            self._loop()
        except KeyboardInterrupt:
            self.signum = signal.SIGINT
        finally:
            restore()
            self.probe_lane.close()
            self._stop_all()
        return self._finish()

    def _sinks(
        self, rank: int, role: str = ENGINE
    ) -> tuple[Callable[[str], None], Callable[[int | None, str | None], None]]:
        def line(text: str) -> None:
            self.inbox.put(_Line(rank, text, role))

        def end(code: int | None, error: str | None) -> None:
            self.inbox.put(_Exit(rank, code, error, role))

        return line, end

    # -- the Ray backend -------------------------------------------------------------------

    def _start_ray(self, rank: int) -> None:
        self.machine.ray_started(rank, self.clock.monotonic())
        self.ray_servers[rank].start(*self._sinks(rank, RAY))

    def _ray_progress(self, rank: int) -> None:
        """Node ``rank``'s Ray joined: the head lets the others start; a full cluster, the engine."""
        m = self.machine
        if (
            rank == 0
            and len(self.plan.nodes) > 1
            and m.runs[0].ray_up_at is not None
            and m.runs[1].ray_started_at is None
            and not m.is_terminal
        ):
            for other in range(1, len(self.plan.nodes)):
                self._start_ray(other)
            self.observer.note(
                "the Ray head is up; starting Ray on "
                f"{count(len(self.plan.nodes) - 1, 'more node', 'more nodes')}"
            )
        if m.cluster_up and m.serve_started_at is None and not m.is_terminal:
            node0 = self.plan.nodes[0]
            server = self.server_for(node0, self.plan.serve_command, ENGINE)
            self.servers = [server]
            m.serve_started(self.clock.monotonic())
            server.start(*self._sinks(0, ENGINE))
            self.observer.note(
                f"the Ray cluster has all {len(self.plan.nodes)} nodes; starting "
                f"`{' '.join(self.plan.serve_command[:2])}` on node 0, which serves at {self.plan.rank0_url}"
            )

    def _loop(self) -> None:
        m = self.machine
        while True:
            now = self.inbox.take_burst(TICK_SECONDS, self._handle)
            self._report(m.tick(now))
            self._send_probe(now)
            self._keep_systemd_informed(now)
            if self.stop_requested is not None and self.stop_requested.is_set():
                self.signum = self.signum or signal.SIGTERM  # a stop on request
            if self.signum is not None or m.is_terminal:
                return
            if m.state is State.READY and self.config.exit_when_ready:
                return

    def _handle(self, item: Any, now: float) -> None:
        m = self.machine
        if isinstance(item, _Line) and item.role == RAY:
            self.observer.line(item.rank, f"(ray) {item.text}")
            self._report(m.on_ray_line(item.rank, item.text, now))
            self._ray_progress(item.rank)
        elif isinstance(item, _Line):
            rank = m.rank_of_line(item.rank, item.text)  # a Ray worker's line: its own node's
            self.observer.line(rank, item.text)
            events = self.analyzers[rank].feed(item.text)
            self._report(m.on_line(rank, item.text, events, now))
        elif isinstance(item, _Exit) and item.role == RAY:
            self._report(m.on_ray_exit(item.rank, item.code, now))
        elif isinstance(item, _Exit):
            failure = self.analyzers[item.rank].finish(item.code).failure
            if item.error:  # ssh itself failed: that is the cause, not the server
                failure = Failure(
                    failure_class=FailureClass.CONFIG_ERROR,
                    phase=m.runs[item.rank].machine.phase,
                    line=item.error,
                    line_number=0,
                    summary=f"{self.plan.nodes[item.rank].label} could not be reached over ssh",
                    remedy=(
                        Remedy("Make `ssh NODE true` work from here (keys, known_hosts, address)."),
                    ),
                )
            self._report(m.on_exit(item.rank, item.code, failure, now))
        elif isinstance(item, ProbeItem):
            self._report(m.on_probe(item.obs, now))
        elif isinstance(item, _Signal):
            self.signum = item.signum

    def _report(self, events: list[ClusterEvent]) -> None:
        for event in events:
            self.observer.event(event)
            self._notify_event(event)
            if self.on_event is not None:
                self.on_event(event)

    def _send_probe(self, now: float) -> None:
        rank0 = self.machine.rank0
        if self.machine.is_terminal:
            return
        kind = rank0.next_probe(now)
        if kind is not None:
            rank0.probe_sent(kind)
            model = rank0.probe_model()
            prober = self.prober
            self.probe_lane.submit(lambda: probe_once(prober, kind, "/health", model))

    # -- systemd ---------------------------------------------------------------------------

    def _notify_event(self, event: ClusterEvent) -> None:
        if self.notes.notifier is None:
            return  # no systemd to tell: no status text, no clock read
        inner = event.inner if isinstance(event, NodeEvent) else event
        rank = f"node {event.rank}: " if isinstance(event, NodeEvent) else ""
        m = self.machine
        if isinstance(inner, Ready) and m.state is State.READY:
            self.notes.ready(
                f"ready in {inner.time_to_ready_seconds:.1f}s over {len(self.servers)} nodes: "
                f"the model answered at {self.plan.rank0_url}"
            )
        elif isinstance(inner, FailureFound):
            self.notes.failed(inner.failure, stalled=inner.stalled, prefix=rank)
        elif isinstance(inner, PhaseReached | Progress) and m.state is State.STARTING:
            machine = m.runs[event.rank].machine if isinstance(event, NodeEvent) else m.rank0
            text = rank + status_text(machine.phase, machine.progress)
            self.notes.starting(text, self.clock.monotonic(), self._extend_seconds())

    def _extend_seconds(self) -> float:
        """How far each EXTEND_TIMEOUT_USEC pushes the start timeout: past the longer of the
        stall limit and the join limit."""
        return max(self.config.stall_seconds or 600.0, self.config.join_seconds or 0.0) + 30.0

    def _keep_systemd_informed(self, now: float) -> None:
        if self.machine.state is State.READY:
            self.notes.watchdog_if_due(now)

    # -- the end ---------------------------------------------------------------------------

    def _stop_all(self) -> None:
        running = [s for s in self.servers if s.running]
        rays = [s for s in self.ray_servers if s.running]
        if not running and not rays:
            return
        self.notes.stopping()
        grace = f"SIGKILL after {self.config.grace_seconds:g}s"
        if running:
            self.observer.note(
                f"stopping {len(running)} node{'s' if len(running) != 1 else ''}: SIGTERM to each server's process group, {grace}"
            )
            self._stop(running)
        if rays:  # the engine first: its workers are Ray's; then the Ray this run started
            self.observer.note(
                f"stopping Ray on {len(rays)} node{'s' if len(rays) != 1 else ''}: SIGTERM to each `ray start`'s process group, {grace}; its --temp-dir removed"
            )
            self._stop(rays)
        # the exits of the nodes stopped here: their lines are the shutdown's, not news
        while (item := self.inbox.get_nowait()) is not None:
            if isinstance(item, _Exit):
                run = self.machine.runs[item.rank]
                if item.role == RAY:
                    run.ray_exited, run.ray_exit_code = True, item.code
                else:
                    run.exited, run.exit_code = True, item.code

    def _stop(self, servers: list[NodeServer]) -> None:
        if self.threads:
            threads = [threading.Thread(target=s.stop, daemon=True) for s in servers]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        else:
            for server in servers:
                server.stop()

    def _ray_summary(self, run: Any) -> dict[str, Any]:
        """With the Ray backend: when the node's Ray joined, how its `ray start` ended, and
        (node 0) the engine's command."""
        if not self.plan.is_ray:
            return {}
        out: dict[str, Any] = {
            "ray_joined_t": None if run.ray_up_at is None else round(run.ray_up_at - self.start, 3),
            "ray_exit_code": run.ray_exit_code,
            "ray_last_line": run.ray_last_line or None,
        }
        if run.node.rank == 0:
            out["serve_command"] = list(self.plan.serve_command)
        return out

    def _finish(self) -> NodesResult:
        m = self.machine
        now = self.clock.monotonic()
        if self.signum is not None and m.state is State.READY:
            m.stop(now)
        ttr = m.rank0.time_to_ready_seconds if m.rank0.ready_at is not None else None
        if m.state is State.FAILED:
            code = EXIT_FAILED
        elif m.state is State.STALLED:
            code = EXIT_STALLED
        elif m.state in (State.READY, State.STOPPED):
            code = EXIT_READY
        else:
            code = 128 + (self.signum or signal.SIGINT)
        end = (m.ended_at or now) - self.start
        failure = None
        if m.failure is not None:
            node = self.plan.nodes[m.failed_rank or 0]
            failure = {
                **failure_fields(m.failure),
                "summary": m.failure.summary,
                "node": node.address,
                "rank": node.rank,
            }
        outcome = {
            State.READY: "ready",
            State.STOPPED: "ready",
            State.FAILED: "failed",
            State.STALLED: "stalled",
        }.get(m.state, "interrupted" if self.signum is not None else "failed")
        summary = {
            "event": "summary",
            "outcome": outcome,
            "failure": failure,
            "time_to_ready_seconds": None if ttr is None else round(ttr, 3),
            "nodes": [
                {
                    "rank": run.node.rank,
                    "node": run.node.address,
                    "phase": run.machine.phase.value,
                    "joined_t": None
                    if run.joined_at is None
                    else round(run.joined_at - self.start, 3),
                    "exit_code": run.exit_code,
                    "last_line": run.machine.last_line,
                    "command": list(self.plan.commands[run.node.rank]),
                    "timeline": timeline_json(run.machine.spans, end),
                    **self._ray_summary(run),
                }
                for run in m.runs
            ],
        }
        facts = (
            dict(self.analyzers[m.failed_rank].diagnosis().facts)
            if m.failed_rank is not None
            else {}
        )
        result = NodesResult(
            state=m.state,
            exit_code=code,
            failure=m.failure,
            failed_rank=m.failed_rank,
            time_to_ready_seconds=ttr,
            summary=summary,
            interrupted=self.signum is not None,
            facts=facts,
        )
        self.observer.close(result)
        return result


def _install_signals(put: Callable[[Any], None]) -> Callable[[], None]:
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}

    def handler(signum: int, _frame: object) -> None:
        put(_Signal(signum))

    for s in previous:
        signal.signal(s, handler)

    def restore() -> None:
        for s, h in previous.items():
            signal.signal(s, h)

    return restore
