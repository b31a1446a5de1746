"""Per-node failure attribution (pure): how one node's part of a startup over several stands
(``NodeRun``, with the Ray lines it reads) and, for each way a node fails the others, the
``Failure`` that names it, with its line and remedy: it exited after ready, it never joined the
group, it meets the others at another address than the head's, its ``ray start`` ended or never
joined, or the Ray cluster cannot place the engine's workers. ``ClusterMachine`` decides when;
this module says what."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from bringup.core.diagnosis import Failure, Remedy
from bringup.core.nodes.layout import Node, show_address
from bringup.core.nodes.plan import ClusterPlan
from bringup.core.packs.types import MultiNodeSpec, RayBackendSpec
from bringup.core.startup import StartupMachine
from bringup.core.vocab import FailureClass, Phase


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


def join_failure(
    run: NodeRun,
    *,
    summary: str,
    line: str,
    remedy: Remedy,
    failure_class: FailureClass = FailureClass.NCCL_ERROR,
) -> Failure:
    """A node that is not in the group, named with ``line`` (a line of its engine log)."""
    return Failure(
        failure_class=failure_class,
        phase=run.machine.phase,
        line=line,
        line_number=run.machine.line_count,
        summary=summary,
        remedy=(remedy,),
    )


def after_ready(run: NodeRun, exit_code: int | None, failure: Failure | None) -> Failure:
    """A node ended while the model was being served: say so, with what its log says."""
    code = "with an unknown status" if exit_code is None else f"with status {exit_code}"
    summary = f"{run.node.label} exited {code} after the model was ready"
    if run.node.rank:
        summary += " (rank 0 still answers /health, but the next request fails)"
    if failure is not None:
        return dataclasses.replace(failure, summary=f"{summary}: {failure.summary}", is_final=True)
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


def meets_elsewhere(
    run: NodeRun, tried: tuple[str, int], head: tuple[str, int], line: str, spec: MultiNodeSpec
) -> Failure:
    """A node that meets the others at ``tried``, not at the head's address: it would retry
    until the timeout while node 0 waits."""
    return join_failure(
        run,
        summary=(
            f"{run.node.label} connects to {show_address(tried)}, but the head (node 0) listens at "
            f"{show_address(head)}: it would retry until the timeout while node 0 waits"
        ),
        line=line,
        remedy=Remedy(
            f"Give every node the same {spec.master_addr_flag} (node 0's address, "
            f"{head[0]}); look for what changes it on node {run.node.rank} (a wrapper "
            "script, an alias, its own flags)."
        ),
        failure_class=FailureClass.CONFIG_ERROR,
    )


def never_joined(
    run: NodeRun,
    plan: ClusterPlan,
    spec: MultiNodeSpec,
    head_address: tuple[str, int],
    limit: float,
) -> Failure:
    """A node not in the group ``limit`` seconds on: why, as far as its lines tell (it cannot
    reach the head, it met the head but not the group, it printed nothing, or else)."""
    head = show_address(head_address)
    waited = f"{limit:g} s"
    if run.unreachable_line is not None:
        m = spec.cannot_reach.search(run.unreachable_line)
        tried = m["addr"] if m else head
        summary = f"{run.node.label} never connected to {tried} after {waited}: it keeps retrying"
        if tried != head:
            summary += f" (the head, node 0, listens at {head})"
        line = run.unreachable_line
        remedy = Remedy(
            f"Make {spec.master_addr_flag} node 0's address as node {run.node.rank} sees it, and open port {plan.master_port} between the nodes."
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
        summary = (
            f"{run.node.label} did not join the group within {waited} of node 0 waiting at {head}"
        )
        line = run.machine.last_line
        remedy = Remedy(
            f"Read node {run.node.rank}'s last lines; check it runs the same command, model and versions as node 0."
        )
    return join_failure(run, summary=summary, line=line, remedy=remedy)


def ray_exited(run: NodeRun, exit_code: int | None, *, ready: bool) -> Failure:
    """A node's ``ray start`` ended (``ready``: after the model was ready): which daemon, if
    it said, and what the engine loses."""
    code = "with an unknown status" if exit_code is None else f"with status {exit_code}"
    line = run.ray_error_line or run.ray_last_line
    m = RAY_DAEMON_EXIT.search(line or "")
    why = f" ({m['daemon']} exited with code {m['code']})" if m else ""
    if ready:
        summary = f"{run.node.label}'s Ray runtime exited {code}{why} after the model was ready"
        remedy = "the engine's workers on that node are gone; read its Ray logs, then start all nodes again"
    elif run.ray_up_at is None:
        summary = (
            f"{run.node.label}'s `ray start` exited {code} before it joined the Ray cluster{why}"
        )
        remedy = (
            "read the node's `ray start` lines above (the head's address and port, the same "
            "Ray and Python on every node)"
        )
    else:
        summary = f"{run.node.label}'s Ray runtime exited {code}{why}: the engine loses the workers placed there"
        remedy = "read the node's Ray logs (its run folder's ray-logs) for why the daemon ended"
    return Failure(
        failure_class=FailureClass.ENGINE_CORE_DIED,
        phase=run.machine.phase,
        line=line,
        line_number=run.ray_lines,
        summary=summary,
        remedy=(Remedy(remedy[0].upper() + remedy[1:] + "."),),
    )


def ray_not_joined(run: NodeRun, plan: ClusterPlan, join_seconds: float) -> Failure:
    """A node whose ``ray start`` has not joined ``join_seconds`` after it was started."""
    head = show_address((plan.master_addr, plan.master_port))
    said = f"; its last line: {run.ray_last_line}" if run.ray_last_line else ""
    return Failure(
        failure_class=FailureClass.NCCL_ERROR,
        phase=run.machine.phase,
        line=run.ray_error_line or run.ray_last_line,
        line_number=run.ray_lines,
        summary=(
            f"{run.node.label}'s `ray start` has not joined the Ray cluster at {head} "
            f"{join_seconds:g} s after it started{said}"
        ),
        remedy=(
            Remedy(
                f"Make node 0's address ({plan.master_addr}) and port "
                f"{plan.master_port} reachable from node {run.node.rank}, and check "
                "its `ray start` runs by hand."
            ),
        ),
    )


def unplaceable(
    plan: ClusterPlan, ray: RayBackendSpec, found: re.Match[str], text: str, rank0: StartupMachine
) -> Failure:
    """The engine waits for a placement group the cluster cannot place (``found``: its
    waiting line ``text``, read by node 0's ``rank0``): it would wait its whole limit."""
    key = ray.gpu_device_key
    return Failure(
        failure_class=FailureClass.CONFIG_ERROR,
        phase=rank0.phase,
        line=text,
        line_number=rank0.line_count,
        summary=(
            f"the Ray cluster cannot place the engine's placement group {found['specs']}: "
            f"{plan.devices_needed} bundles of 1 {key} over {len(plan.nodes)} nodes; "
            f"the engine would wait {ray.placement_wait_seconds // 60} minutes for it"
        ),
        remedy=(
            Remedy(
                f"Check `ray status` on node 0: another job may hold {key}s, or a node's Ray "
                f"registered fewer than it has; lower -tp/-pp or free the {key}s."
            ),
        ),
    )
