"""One startup over every node (pure): the verdict over them all (``ClusterMachine``), from
what each node's log, exit and `ray start` say; when a node is to blame. What its failure says
(summary, line, remedy) is ``nodes.attribution``'s."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from bringup.core.diagnosis import Event, Failure
from bringup.core.live import ClusterEvent, FailureFound, Joined, NodeEvent
from bringup.core.nodes.attribution import (
    RAY_DAEMON_EXIT,
    RAY_ERROR,
    RAY_UP,
    RAY_WORKER_PREFIX,
    NodeRun,
    after_ready,
    meets_elsewhere,
    never_joined,
    ray_exited,
    ray_not_joined,
    unplaceable,
)
from bringup.core.nodes.layout import is_ip, node_ip, same_address, tcp_address
from bringup.core.nodes.plan import ClusterPlan
from bringup.core.packs.types import MultiNodeSpec
from bringup.core.probes import ProbeObservation
from bringup.core.startup import StartupMachine, StartupPolicy
from bringup.core.verdict import State


class ClusterMachine:
    """The verdict of a startup over several nodes, from what each node's log and exit say.

    Each node has its own ``StartupMachine`` (phases, root-cause lines, exit); rank 0's
    also takes the HTTP probes. Ready only when rank 0 answered the smoke request *and*
    every node is alive. The first node to fail names the failure (the others' errors
    follow from it). A node that has not joined the group ``join_seconds`` after node 0
    reached the rendezvous (from then on its store waits for the others) fails, with its last "cannot
    reach" line if it printed one; before that, slow imports are no join problem (rank 0's
    stall limit covers a node that shows nothing). Sooner, where the log already tells:
    a node whose rendezvous (or retry) line names another address than the head's fails at
    once, and a node at the rendezvous together with node 0 that has not joined
    ``meet_seconds`` later fails then (healthy nodes meet within seconds of both being there),
    as does a node that has printed nothing ``meet_seconds`` after node 0 reached it (node 0
    imported, spawned its engine and waits: the same work, done, on the other node).
    Every node's pending failure (an unknown exception) settles after the grace, not only at
    its exit.
    """

    def __init__(
        self,
        plan: ClusterPlan,
        spec: MultiNodeSpec,
        policy: StartupPolicy,
        start: float,
        *,
        join_seconds: float | None = 60.0,
        meet_seconds: float | None = 30.0,
    ) -> None:
        self.plan = plan
        self.spec = spec
        self.start = start
        self.join_seconds = join_seconds
        self.meet_seconds = (
            None
            if join_seconds is None or meet_seconds is None
            else min(join_seconds, meet_seconds)
        )
        quiet = dataclasses.replace(
            policy, stall_seconds=None, deadline_seconds=None, liveness_interval_seconds=0.0
        )
        self.runs = [
            NodeRun(node, StartupMachine(policy if node.rank == 0 else quiet, start))
            for node in plan.nodes
        ]
        self.state = State.STARTING
        self.failure: Failure | None = None
        self.failed_rank: int | None = None
        self.ended_at: float | None = None
        self.by_ip = {ip: n.rank for n in plan.nodes if (ip := node_ip(n)) is not None}
        self.serve_started_at: float | None = None  # Ray: the engine started on node 0

    @property
    def rank0(self) -> StartupMachine:
        """Rank 0's machine: it serves, so the probes and the readiness are its."""
        return self.runs[0].machine

    @property
    def is_terminal(self) -> bool:
        """A verdict other than ready was reached (or the user stopped it)."""
        return self.state in (State.FAILED, State.STALLED, State.STOPPED)

    def _tag(self, rank: int, events: Sequence[ClusterEvent]) -> list[ClusterEvent]:
        node = self.plan.nodes[rank]
        return [e if isinstance(e, NodeEvent) else NodeEvent(e, node.address, rank) for e in events]

    def _settle(self, rank: int, events: Sequence[ClusterEvent], now: float) -> list[ClusterEvent]:
        out = self._tag(rank, events)
        if self.is_terminal:
            return out
        machine = self.runs[rank].machine
        if machine.state in (State.FAILED, State.STALLED):
            self.state = machine.state
            self.failure = machine.failure
            self.failed_rank = rank
            self.ended_at = now
            return out
        ready = self.state is State.STARTING and self.rank0.state is State.READY
        if ready and all(r.alive for r in self.runs) and self.cluster_up:
            self.state = State.READY
        return out

    # -- the Ray backend ---------------------------------------------------------------------

    @property
    def cluster_up(self) -> bool:
        """Every node's Ray runtime is in the cluster (always, without the Ray backend)."""
        return not self.plan.is_ray or all(
            r.ray_up_at is not None and not r.ray_exited for r in self.runs
        )

    def ray_started(self, rank: int, now: float) -> None:
        """bringup started node ``rank``'s ``ray start``."""
        self.runs[rank].ray_started_at = now

    def serve_started(self, now: float) -> None:
        """bringup started the engine on node 0 (the cluster was up)."""
        self.serve_started_at = now

    def rank_of_line(self, rank: int, text: str) -> int:
        """The node a line of node ``rank``'s engine log comes from. With the Ray backend the
        one engine log (node 0's) carries every worker's lines, and a worker's line names its
        node's address (``(RayWorkerProc pid=N, ip=X)``); any other line is node 0's own."""
        if not self.plan.is_ray:
            return rank
        for m in RAY_WORKER_PREFIX.finditer(text):
            ip = m["ip"]
            if ip is not None:
                return self.by_ip.get(ip, 0)
        return 0

    def on_ray_line(self, rank: int, text: str, now: float) -> list[ClusterEvent]:
        """A line of node ``rank``'s ``ray start``."""
        run = self.runs[rank]
        run.ray_lines += 1
        if text.strip(" -"):
            run.ray_last_line = text
        if run.ray_error_line is None and RAY_ERROR.search(text):
            run.ray_error_line = text
        elif (
            RAY_DAEMON_EXIT.search(text)
            and run.ray_error_line is not None
            and "exited unexpectedly" in run.ray_error_line
        ):
            run.ray_error_line = text  # which daemon, and how: the cause
        if run.ray_up_at is None and RAY_UP.search(text):
            run.ray_up_at = now
            return self._tag(rank, [Joined(now - self.start, now - self.start, runtime="ray")])
        return []

    def on_ray_exit(self, rank: int, exit_code: int | None, now: float) -> list[ClusterEvent]:
        """Node ``rank``'s ``ray start`` ended (its runtime is gone from the cluster)."""
        run = self.runs[rank]
        run.ray_exited, run.ray_exit_code = True, exit_code
        if self.is_terminal:
            return []
        failure = ray_exited(run, exit_code, ready=self.state is State.READY)
        return self._fail(run, now, failure)

    def _fail(self, run: NodeRun, now: float, failure: Failure) -> list[ClusterEvent]:
        self.state, self.failure, self.failed_rank, self.ended_at = (
            State.FAILED,
            failure,
            run.node.rank,
            now,
        )
        return self._tag(run.node.rank, [FailureFound(now - self.start, failure)])

    def _placement_wait(self, text: str, now: float) -> list[ClusterEvent]:
        """The engine waits for a placement group the cluster cannot place: it would wait its
        whole limit (30 minutes) for resources that are not there."""
        ray = self.spec.ray
        if ray is None or (m := ray.placement_wait.search(text)) is None:
            return []
        return self._fail(self.runs[0], now, unplaceable(self.plan, ray, m, text, self.rank0))

    def _ray_tick(self, now: float) -> list[ClusterEvent]:
        """A node whose ``ray start`` has not joined ``join_seconds`` after it was started."""
        if self.join_seconds is None or self.serve_started_at is not None:
            return []
        late = [
            run
            for run in self.runs
            if run.ray_up_at is None
            and run.ray_started_at is not None
            and not run.ray_exited
            and now - run.ray_started_at >= self.join_seconds
        ]
        if not late:
            return []
        run = late[0]
        return self._fail(run, now, ray_not_joined(run, self.plan, self.join_seconds))

    def on_line(
        self, rank: int, text: str, events: Sequence[Event], now: float
    ) -> list[ClusterEvent]:
        """A line of node ``rank``'s log and what its analyzer made of it."""
        run = self.runs[rank]
        run.machine.on_line(text, now)
        out: list[ClusterEvent] = []
        if self.plan.is_ray:  # Ray places the workers: no rendezvous of the engine's own to watch
            for event in events:
                out.extend(run.machine.on_event(event, now))
            out = self._settle(rank, out, now)
            if not self.is_terminal:
                out.extend(self._placement_wait(text, now))
            return out
        if run.waiting_at is None and (found := self.spec.rendezvous.search(text)):
            run.waiting_at = now
            run.meets_at = tcp_address(found.groupdict().get("method") or "")
            if run.meets_at is not None and run.node.rank > 0:
                run.rendezvous_line = text
        if run.joined_at is None and self.spec.joined.search(text):
            run.joined_at = now
            out.append(Joined(now - self.start, now - self.start))
        elif run.joined_at is None and self.spec.cannot_reach.search(text):
            run.unreachable_line = text
        for event in events:
            out.extend(run.machine.on_event(event, now))
        out = self._settle(rank, out, now)
        if not self.is_terminal and self.state is State.STARTING:
            out.extend(self._elsewhere(now))
        return out

    def _head(self) -> tuple[str, int]:
        """Where the others must meet node 0: as node 0 said, else as the command says."""
        return self.runs[0].meets_at or (self.plan.master_addr, self.plan.master_port)

    def _elsewhere(self, now: float) -> list[ClusterEvent]:
        """A node that meets the others at another address than the head's fails at once:
        it would retry until the timeout while node 0 waits (real-parts §4, wrong --master-addr)."""
        head = self._head()
        if self.runs[0].meets_at is None and not is_ip(self.plan.master_addr):
            return []  # a host name: node 0's own line will say how the engine spells it
        for run in self.runs[1:]:
            if run.joined_at is not None or not run.alive:
                continue
            tried: tuple[str, int] | None = None
            line = None
            if run.unreachable_line is not None:
                m = self.spec.cannot_reach.search(run.unreachable_line)
                tried = tcp_address(m["addr"]) if m else None
                line = run.unreachable_line
            if tried is None and run.meets_at is not None:
                tried, line = run.meets_at, run.rendezvous_line
            if tried is None or line is None or same_address(tried, head):
                continue
            return self._fail(run, now, meets_elsewhere(run, tried, head, line, self.spec))
        return []

    def on_exit(
        self, rank: int, exit_code: int | None, failure: Failure | None, now: float
    ) -> list[ClusterEvent]:
        """Node ``rank``'s process ended; ``failure``: its analyzer's verdict on its log."""
        run = self.runs[rank]
        run.exited, run.exit_code = True, exit_code
        if self.is_terminal:
            return []
        if self.state is State.READY:
            failure = after_ready(run, exit_code, failure)
        return self._settle(rank, run.machine.on_exit(exit_code, failure, now), now)

    def on_probe(self, obs: ProbeObservation, now: float) -> list[ClusterEvent]:
        """An HTTP probe of rank 0 came back."""
        return self._settle(0, self.rank0.on_probe(obs, now), now)

    def tick(self, now: float) -> list[ClusterEvent]:
        """Time passed: stalls and deadline (rank 0), pending failures (every node), nodes
        that never joined."""
        if self.is_terminal:
            return []
        out = self._settle(0, self.rank0.tick(now), now)
        for run in self.runs[1:]:  # their policy has no stall or deadline: the grace only
            if self.ended_at is not None:  # (a failure ends the startup)
                return out
            out += self._settle(run.node.rank, run.machine.tick(now), now)
        if self.is_terminal or self.join_seconds is None or self.state is State.READY:
            return out
        if self.plan.is_ray:
            return out + self._ray_tick(now)
        head = self.runs[0].waiting_at or self.runs[0].joined_at  # its store listens from here on
        if head is None:
            return out
        waiting = [run for run in self.runs if run.joined_at is None and run.alive]
        meet = self.meet_seconds
        if meet is not None:
            met = [
                run
                for run in waiting
                if run.node.rank > 0
                and run.waiting_at is not None
                and now - max(head, run.waiting_at) >= meet
            ]
            if met:  # both at the rendezvous, and still apart
                return out + self._never_joined(met[0], now, meet)
            silent = [
                run
                for run in waiting
                if run.node.rank > 0 and run.machine.line_count == 0 and now - head >= meet
            ]
            if silent:  # node 0 imported, spawned and waits; this one never said a word
                return out + self._never_joined(silent[0], now, meet)
        if now - head < self.join_seconds:
            return out
        # a node that says it cannot reach the head is the cause; the others wait for it
        # and node 0, which hosts the store, waits for the others: it is blamed last
        waiting.sort(key=lambda run: (run.unreachable_line is None, run.node.rank == 0))
        if waiting:
            return out + self._never_joined(waiting[0], now, self.join_seconds)
        return out

    def _never_joined(self, run: NodeRun, now: float, limit: float) -> list[ClusterEvent]:
        return self._fail(run, now, never_joined(run, self.plan, self.spec, self._head(), limit))

    def stop(self, now: float) -> None:
        """The user asked to stop after ready: not a failure."""
        if not self.is_terminal:
            self.state = State.STOPPED
            self.ended_at = now
