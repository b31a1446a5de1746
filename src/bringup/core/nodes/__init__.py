"""One model over several machines (pure): the nodes file, each node's command, and the
pre-flight decisions over the facts gathered on every node.

The nodes file lists the nodes in rank order, one a line: the ssh address, then optional
``NAME=value`` words, the environment of the server on that node (quoted as in a shell;
``#`` starts a comment)::

    # rank 0 serves the API; the others run headless
    ops@gpu1  GLOO_SOCKET_IFNAME=eth0 NCCL_SOCKET_IFNAME=eth0 VLLM_HOST_IP=10.0.0.1
    ops@gpu2  GLOO_SOCKET_IFNAME=eth0 NCCL_SOCKET_IFNAME=eth0 VLLM_HOST_IP=10.0.0.2

From the one command given, every node gets its own: the engine pack's multi-node flags
(for vLLM ``--nnodes N --node-rank i --master-addr A``, ``--headless`` on ranks > 0, a
bounded ``--distributed-timeout-seconds`` when none was given). bringup rides the engine's
own runtime: it neither launches ranks itself nor rendezvous.

The parts, each its own module: ``layout`` (the nodes file, node addresses), ``plan`` (each
node's command), ``facts`` (what the pre-flight found on a node), ``preflight`` and
``preflight_ray`` (the decisions over those facts), ``machine`` (one startup over every node),
``attribution`` (each node's part of it, and the failure that names a node) and ``status``
(``status --nodes``). Every name is importable from ``bringup.core.nodes``.
"""

from __future__ import annotations

from bringup.core.nodes.attribution import (
    RAY_DAEMON_EXIT,
    RAY_ERROR,
    RAY_UP,
    RAY_WORKER_PREFIX,
    NodeRun,
)
from bringup.core.nodes.facts import ListenResult, ModelFile, NodeFacts, facts_from_json
from bringup.core.nodes.layout import Node, parse_nodes, tcp_address
from bringup.core.nodes.machine import ClusterMachine
from bringup.core.nodes.plan import (
    DEFAULT_RAY_PORT,
    ClusterPlan,
    NodeProblem,
    plan_cluster,
    uses_ray,
)
from bringup.core.nodes.preflight import (
    SHM_ADVISED_BYTES,
    SHM_MINIMUM_BYTES,
    SOCKET_IFNAME_VARIABLES,
    preflight,
)
from bringup.core.nodes.status import NodeStatus, nodes_exit_code, parse_node_status

__all__ = [
    "DEFAULT_RAY_PORT",
    "RAY_DAEMON_EXIT",
    "RAY_ERROR",
    "RAY_UP",
    "RAY_WORKER_PREFIX",
    "SHM_ADVISED_BYTES",
    "SHM_MINIMUM_BYTES",
    "SOCKET_IFNAME_VARIABLES",
    "ClusterMachine",
    "ClusterPlan",
    "ListenResult",
    "ModelFile",
    "Node",
    "NodeFacts",
    "NodeProblem",
    "NodeRun",
    "NodeStatus",
    "facts_from_json",
    "nodes_exit_code",
    "parse_node_status",
    "parse_nodes",
    "plan_cluster",
    "preflight",
    "tcp_address",
    "uses_ray",
]
