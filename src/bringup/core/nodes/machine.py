"""One startup over every node (pure): each node's part (``NodeRun``) and the verdict over
them all (``ClusterMachine``), from what each node's log, exit and `ray start` say."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

from bringup.core.diagnosis import Event, Failure, Remedy
from bringup.core.live import ClusterEvent, FailureFound, Joined, NodeEvent
from bringup.core.nodes.layout import Node, is_ip, node_ip, same_address, show_address, tcp_address
from bringup.core.nodes.plan import ClusterPlan
from bringup.core.packs.types import MultiNodeSpec
from bringup.core.probes import ProbeObservation
from bringup.core.startup import StartupMachine, StartupPolicy
from bringup.core.verdict import State
from bringup.core.vocab import FailureClass, Phase

# -- one startup over every node -------------------------------------------------------------


@dataclass
class NodeRun:
    """How one node's part of the startup stands."""

    node: Node
    machine: StartupMachine
    waiting_at: float | None = None  # when it said it is about to meet the others
    meets_at: tuple[str, int] | None = None  # the address it said it meets them at
    joined_at: float | None = None  # when its first "joined the group" line came
    exited: bool = False
    exit_code: int | None = None
    unreachable_line: str | None = None  # its last "cannot reach the head" line
    rendezvous_line: str | None = None  # its line naming where it meets the others
    # the Ray backend: the node's `ray start`
    ray_started_at: float | None = None  # bringup started it
    ray_up_at: float | None = None  # it said its runtime is in the cluster
    ray_exited: bool = False
    ray_exit_code: int | None = None
    ray_last_line: str = ""
    ray_error_line: str | None = None  # its first line that says what went wrong
    ray_lines: int = 0

    @property
    def alive(self) -> bool:
        """Still running (as far as bringup has seen)."""
        return not self.exited and not self.ray_exited


# Ray's own lines (ray 2.60 ``ray start --block``, python/ray/scripts/scripts.py): the node's
# runtime is up once it registered with the head's GCS (``Node`` waits for that before this
# line); with --block it then watches its daemons, and when one dies it says which and exits 1
RAY_UP = re.compile(r"Ray runtime started\.")
RAY_ERROR = re.compile(
    r"Some Ray subprocesses exited unexpectedly|\[exit code=-?\d+\]|Version mismatch|"
    r"(?:Connection|Runtime|Value)Error\b|Failed to connect to GCS|Unable to connect to GCS|"
    r"\bERROR\b.*--|^\w+Error: "
)
RAY_DAEMON_EXIT = re.compile(r"(?P<daemon>[A-Za-z_]+) \[exit code=(?P<code>-?\d+)\]")
# Ray's prefix on a line of one of its workers that the driver prints: the worker's node is
# named by its address when it is not the driver's (vLLM 0.32 RayWorkerProc / older RayWorkerWrapper)
RAY_WORKER_PREFIX = re.compile(
    r"\((?P<actor>[A-Za-z_][\w.]*) pid=(?P<pid>\d+)(?:, ip=(?P<ip>[0-9A-Fa-f.:]+))?\)"
)


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
        code = "with an unknown status" if exit_code is None else f"with status {exit_code}"
        line = run.ray_error_line or run.ray_last_line
        m = RAY_DAEMON_EXIT.search(line or "")
        why = f" ({m['daemon']} exited with code {m['code']})" if m else ""
        if self.state is State.READY:
            summary = f"{run.node.label}'s Ray runtime exited {code}{why} after the model was ready"
            remedy = "the engine's workers on that node are gone; read its Ray logs, then start all nodes again"
        elif run.ray_up_at is None:
            summary = f"{run.node.label}'s `ray start` exited {code} before it joined the Ray cluster{why}"
            remedy = (
                "read the node's `ray start` lines above (the head's address and port, the same "
                "Ray and Python on every node)"
            )
        else:
            summary = f"{run.node.label}'s Ray runtime exited {code}{why}: the engine loses the workers placed there"
            remedy = "read the node's Ray logs (its run folder's ray-logs) for why the daemon ended"
        failure = Failure(
            failure_class=FailureClass.ENGINE_CORE_DIED,
            phase=run.machine.phase,
            line=line,
            line_number=run.ray_lines,
            summary=summary,
            remedy=(Remedy(remedy[0].upper() + remedy[1:] + "."),),
        )
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
        key = ray.gpu_device_key
        failure = Failure(
            failure_class=FailureClass.CONFIG_ERROR,
            phase=self.rank0.phase,
            line=text,
            line_number=self.rank0.line_count,
            summary=(
                f"the Ray cluster cannot place the engine's placement group {m['specs']}: "
                f"{self.plan.devices_needed} bundles of 1 {key} over {len(self.plan.nodes)} nodes; "
                f"the engine would wait {ray.placement_wait_seconds // 60} minutes for it"
            ),
            remedy=(
                Remedy(
                    f"Check `ray status` on node 0: another job may hold {key}s, or a node's Ray "
                    f"registered fewer than it has; lower -tp/-pp or free the {key}s."
                ),
            ),
        )
        return self._fail(self.runs[0], now, failure)

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
        head = show_address((self.plan.master_addr, self.plan.master_port))
        said = f"; its last line: {run.ray_last_line}" if run.ray_last_line else ""
        return self._fail(
            run,
            now,
            Failure(
                failure_class=FailureClass.NCCL_ERROR,
                phase=run.machine.phase,
                line=run.ray_error_line or run.ray_last_line,
                line_number=run.ray_lines,
                summary=(
                    f"{run.node.label}'s `ray start` has not joined the Ray cluster at {head} "
                    f"{self.join_seconds:g} s after it started{said}"
                ),
                remedy=(
                    Remedy(
                        f"Make node 0's address ({self.plan.master_addr}) and port "
                        f"{self.plan.master_port} reachable from node {run.node.rank}, and check "
                        "its `ray start` runs by hand."
                    ),
                ),
            ),
        )

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
            return self._fail_join(
                run,
                now,
                summary=(
                    f"{run.node.label} connects to {show_address(tried)}, but the head (node 0) listens at "
                    f"{show_address(head)}: it would retry until the timeout while node 0 waits"
                ),
                line=line,
                remedy=Remedy(
                    f"Give every node the same {self.spec.master_addr_flag} (node 0's address, "
                    f"{head[0]}); look for what changes it on node {run.node.rank} (a wrapper "
                    "script, an alias, its own flags)."
                ),
                failure_class=FailureClass.CONFIG_ERROR,
            )
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
            failure = self._after_ready(run, exit_code, failure)
        return self._settle(rank, run.machine.on_exit(exit_code, failure, now), now)

    def _after_ready(self, run: NodeRun, exit_code: int | None, failure: Failure | None) -> Failure:
        """A node ended while the model was being served: say so, with what its log says."""
        code = "with an unknown status" if exit_code is None else f"with status {exit_code}"
        summary = f"{run.node.label} exited {code} after the model was ready"
        if run.node.rank:
            summary += " (rank 0 still answers /health, but the next request fails)"
        if failure is not None:
            return dataclasses.replace(
                failure, summary=f"{summary}: {failure.summary}", is_final=True
            )
        return Failure(
            failure_class=FailureClass.ENGINE_CORE_DIED,
            phase=Phase.READY,
            line=run.machine.last_line,
            line_number=run.machine.line_count,
            summary=summary,
            remedy=(
                Remedy(
                    f"Read node {run.node.rank}'s last lines for why it ended, then start all nodes again."
                ),
            ),
        )

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
        plan = self.plan
        head = show_address(self._head())
        waited = f"{limit:g} s"
        if run.unreachable_line is not None:
            m = self.spec.cannot_reach.search(run.unreachable_line)
            tried = m["addr"] if m else head
            summary = (
                f"{run.node.label} never connected to {tried} after {waited}: it keeps retrying"
            )
            if tried != head:
                summary += f" (the head, node 0, listens at {head})"
            line = run.unreachable_line
            remedy = Remedy(
                f"Make {self.spec.master_addr_flag} node 0's address as node {run.node.rank} sees it, and open port {plan.master_port} between the nodes."
            )
        elif run.waiting_at is not None and run.node.rank > 0:
            summary = (
                f"{run.node.label} reached the rendezvous with the head at {head} but has not "
                f"joined the group {waited} after both were there"
            )
            line = run.machine.last_line
            remedy = Remedy(
                f"The nodes also connect to each other, not only to port {plan.master_port}: "
                "open the ports between them, and make *_SOCKET_IFNAME name the interface "
                f"that reaches the other nodes on node {run.node.rank}."
            )
        elif run.machine.line_count == 0:
            summary = (
                f"{run.node.label} printed nothing {waited} after node 0 reached the rendezvous "
                f"at {head}: its server never started"
            )
            line = ""
            remedy = Remedy(
                f"Check that the command runs on node {run.node.rank} by hand (the same "
                "executable and environment as in the nodes file); its log is in the run folder."
            )
        else:
            summary = f"{run.node.label} did not join the group within {waited} of node 0 waiting at {head}"
            line = run.machine.last_line
            remedy = Remedy(
                f"Read node {run.node.rank}'s last lines; check it runs the same command, model and versions as node 0."
            )
        return self._fail_join(run, now, summary=summary, line=line, remedy=remedy)

    def _fail_join(
        self,
        run: NodeRun,
        now: float,
        *,
        summary: str,
        line: str,
        remedy: Remedy,
        failure_class: FailureClass = FailureClass.NCCL_ERROR,
    ) -> list[ClusterEvent]:
        failure = Failure(
            failure_class=failure_class,
            phase=run.machine.phase,
            line=line,
            line_number=run.machine.line_count,
            summary=summary,
            remedy=(remedy,),
        )
        return self._fail(run, now, failure)

    def stop(self, now: float) -> None:
        """The user asked to stop after ready: not a failure."""
        if not self.is_terminal:
            self.state = State.STOPPED
            self.ended_at = now
