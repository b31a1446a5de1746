"""The pre-flight decisions over the facts gathered on every node: each node against node 0
(versions, model, GPUs, addresses, interfaces, /dev/shm) and the master address (pure)."""

from __future__ import annotations

from collections.abc import Sequence

from bringup.core.nodes.facts import (
    ListenResult,
    NodeFacts,
    first_version,
    is_cpu_build,
    is_loopback,
)
from bringup.core.nodes.layout import Node
from bringup.core.nodes.plan import ClusterPlan, NodeProblem
from bringup.core.nodes.preflight_ray import placement_problems, ray_problems
from bringup.core.packs.types import MultiNodeSpec

SOCKET_IFNAME_VARIABLES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
SHM_MINIMUM_BYTES = 64 * 2**20  # below this, the engine's shared-memory queues fail outright
SHM_ADVISED_BYTES = 1 * 2**30  # NCCL and vLLM's broadcast buffers want room


def _ifname_names(value: str) -> list[str]:
    """Interface names a ``*_SOCKET_IFNAME`` value asks for (``^`` exclusions are not names)."""
    if value.startswith("^"):
        return []
    return [part.lstrip("=") for part in value.split(",") if part.strip("= ")]


def _human(n_bytes: int) -> str:
    return f"{n_bytes / 2**30:.1f} GiB" if n_bytes >= 2**30 else f"{n_bytes / 2**20:.0f} MiB"


def preflight(
    plan: ClusterPlan,
    facts: Sequence[NodeFacts],
    spec: MultiNodeSpec,
    *,
    listen: ListenResult | None = None,
    ray_args: Sequence[str] = (),
) -> list[NodeProblem]:
    """Every problem the facts show, node by node; node 0 is the reference for versions and model.
    With the Ray backend also: ``ray`` on every node, Ray's version (and the engine its Python
    sees) the same as node 0's, and the engine's placement group satisfiable (``ray_args``: the
    ``ray start`` flags, whose ``--num-gpus`` overrides what Ray would detect)."""
    problems: list[NodeProblem] = []
    reference = facts[0]
    for node, f in zip(plan.nodes, facts, strict=True):
        problems.extend(_node_problems(plan, node, f, reference, spec))
    if plan.is_ray and spec.ray is not None:
        problems.extend(placement_problems(plan, facts, spec.ray, ray_args))
    if listen is not None and not listen.ok:
        node0 = plan.nodes[0]
        what = "the Ray head's address" if plan.is_ray else "the master address"
        port_fix = (
            "pick a free --ray-port" if plan.is_ray else f"pick a free {spec.master_port_flag}"
        )
        addr_fix = (
            "give node 0 its own address as VLLM_HOST_IP in the nodes file"
            if plan.is_ray
            else f"{spec.master_addr_flag} must be an address of node 0"
        )
        problems.append(
            NodeProblem(
                0,
                node0.label,
                "master",
                f"cannot listen on {what} {plan.master_addr}:{plan.master_port} ({listen.error})",
                (
                    port_fix
                    if listen.error and "in use" in listen.error
                    else f"{addr_fix} (one of {_addresses(facts[0])})"
                ),
            )
        )
    return problems


def _addresses(f: NodeFacts) -> str:
    found = [a for addrs in f.interfaces.values() for a in addrs if not is_loopback(a)]
    return ", ".join(found) or "none found"


def _node_problems(
    plan: ClusterPlan, node: Node, f: NodeFacts, ref: NodeFacts, spec: MultiNodeSpec
) -> list[NodeProblem]:
    where = node.label

    def problem(check: str, message: str, fix: str, severity: str = "error") -> NodeProblem:
        return NodeProblem(node.rank, where, check, message, fix, severity)

    if not f.reached:
        return [
            problem(
                "ssh",
                f"not reached: {f.error}",
                "make `ssh " + node.address + " true` work (keys, known_hosts, address)",
            )
        ]
    out: list[NodeProblem] = []
    if f.error:
        out.append(
            problem(
                "probe",
                f"the pre-flight probe failed: {f.error}",
                "check python3 is installed on the node",
            )
        )
    program = plan.commands[node.rank][0] if plan.commands else "the engine"
    if f.engine_path is None:
        out.append(
            problem(
                "engine",
                f"`{program}` is not found on the node",
                "install the engine there, or set PATH=<its venv>/bin:... on the node's line of the nodes file",
            )
        )
    elif node.rank > 0 and ref.engine_path is not None:
        out.extend(_version_problems(node, f, ref, spec))
    out.extend(_model_problems(plan, node, f, ref))
    cpu_build = is_cpu_build(f, spec.packages)
    if plan.is_ray:
        out.extend(ray_problems(node, f, ref, spec))
    elif not cpu_build and f.engine_path is not None:
        if f.gpu_count is None:
            out.append(
                problem(
                    "gpus",
                    f"cannot count the GPUs ({f.gpu_error or 'nvidia-smi not found'}); the node must provide {plan.per_node}",
                    "install the NVIDIA driver tools (nvidia-smi) or check the GPUs by hand",
                    "warning",
                )
            )
        elif f.gpu_count < plan.per_node:
            out.append(
                problem(
                    "gpus",
                    f"{f.gpu_count} GPU{'s' if f.gpu_count != 1 else ''} visible, the world size {plan.world_size} over {len(plan.nodes)} nodes needs {plan.per_node} here",
                    "make more GPUs visible (CUDA_VISIBLE_DEVICES on the node's line) or lower -tp/-pp",
                )
            )
    if f.connect_ok is False:
        out.append(
            problem(
                "master",
                f"cannot reach the {'Ray head' if plan.is_ray else 'master'} {plan.master_addr}:{plan.master_port} ({f.connect_error})",
                (
                    f"node 0's VLLM_HOST_IP must be its address as this node sees it, and port {plan.master_port} (--ray-port) must be open between the nodes"
                    if plan.is_ray
                    else f"{spec.master_addr_flag} must be node 0's address as this node sees it, and port {plan.master_port} must be open between the nodes"
                ),
            )
        )
    ifname_set = {v: node.env_value(v) or f.inherited_env.get(v) for v in SOCKET_IFNAME_VARIABLES}
    own = [a for addrs in f.interfaces.values() for a in addrs if not is_loopback(a)]
    if (
        not any(ifname_set.values())
        and f.hostname_addresses
        and all(is_loopback(a) for a in f.hostname_addresses)
    ):
        iface = _interface_of(f, node.env_value("VLLM_HOST_IP") or (own[0] if own else None))
        out.append(
            problem(
                "hostname",
                f"its hostname {f.hostname!r} resolves to {f.hostname_addresses[0]} and no socket interface is set, so the other nodes would be told to connect to loopback",
                f"set GLOO_SOCKET_IFNAME={iface or '<interface>'} (and NCCL_SOCKET_IFNAME on GPUs) on its line of the nodes file, or map the hostname to its address in /etc/hosts",
            )
        )
    for variable, value in ifname_set.items():
        if not value:
            continue
        prefix_match = variable == "NCCL_SOCKET_IFNAME" and not value.startswith("=")
        for name in _ifname_names(value):
            matches = [
                i for i in f.interfaces if i == name or (prefix_match and i.startswith(name))
            ]
            if not matches:
                out.append(
                    problem(
                        "interface",
                        f"{variable}={value}: no interface {name!r} on the node (it has {', '.join(sorted(f.interfaces)) or 'none'})",
                        f"set {variable} to the interface that carries the node's address",
                    )
                )
            elif not any(f.interfaces[i] for i in matches):
                out.append(
                    problem(
                        "interface",
                        f"{variable}={value}: interface {name!r} has no address",
                        f"bring {name} up with an address, or name another interface",
                    )
                )
    host_ip = node.env_value("VLLM_HOST_IP")
    if (
        host_ip
        and f.interfaces
        and host_ip not in {a for addrs in f.interfaces.values() for a in addrs}
    ):
        out.append(
            problem(
                "address",
                f"VLLM_HOST_IP={host_ip} is not an address of the node (it has {', '.join(own) or 'none'})",
                "set VLLM_HOST_IP to one of the node's own addresses",
            )
        )
    if f.shm_total_bytes is not None:
        if f.shm_total_bytes < SHM_MINIMUM_BYTES:
            out.append(
                problem(
                    "shm",
                    f"/dev/shm is {_human(f.shm_total_bytes)}; the engine's shared-memory queues need more",
                    "give it at least 1 GiB (docker --shm-size=1g, or mount -o remount,size=1G /dev/shm)",
                )
            )
        elif f.shm_total_bytes < SHM_ADVISED_BYTES:
            out.append(
                problem(
                    "shm",
                    f"/dev/shm is only {_human(f.shm_total_bytes)}",
                    "give it at least 1 GiB (docker --shm-size=1g, or mount -o remount,size=1G /dev/shm)",
                    "warning",
                )
            )
    return out


def _interface_of(f: NodeFacts, address: str | None) -> str | None:
    if address is None:
        return None
    return next((name for name, addrs in f.interfaces.items() if address in addrs), None)


def _version_problems(
    node: Node, f: NodeFacts, ref: NodeFacts, spec: MultiNodeSpec
) -> list[NodeProblem]:
    out = []
    pairs: list[tuple[str, str | None, str | None]] = [
        ("Python", f.python_version, ref.python_version)
    ]
    engine_name = next((p for p in spec.packages if ref.packages.get(p)), spec.packages[0])
    pairs.append(
        (
            engine_name,
            first_version(f.packages, spec.packages),
            first_version(ref.packages, spec.packages),
        )
    )
    pairs.append(("torch", f.packages.get("torch"), ref.packages.get("torch")))
    for name, here, there in pairs:
        if here != there:
            out.append(
                NodeProblem(
                    node.rank,
                    node.label,
                    "versions",
                    f"{name} {here or 'not installed'} here, {there or 'not installed'} on node 0",
                    f"install the same {name} on every node ({name} {there} as on node 0)"
                    if there
                    else f"install {name} on node 0",
                )
            )
    return out


def _model_problems(
    plan: ClusterPlan, node: Node, f: NodeFacts, ref: NodeFacts
) -> list[NodeProblem]:
    model = plan.model or "the model"
    where = node.label
    if f.model_files is None:
        if f.model_error == "download" and not f.offline:
            return []  # a repo id no node has on disk: the engine downloads it, each node alike
        return [
            NodeProblem(
                node.rank,
                where,
                "model",
                f"no model at {model} ({f.model_error or 'not found'})",
                (
                    f"copy node 0's model there (e.g. rsync -a {plan.nodes[0].host}:{ref.model_path}/ {model}/) or mount the same storage"
                    if ref.model_files is not None and node.rank > 0
                    else "give the model's path as it is on every node"
                ),
            )
        ]
    if node.rank == 0 or ref.model_files is None:
        return []
    ours, theirs = f.model_files, ref.model_files
    missing = sorted(set(theirs) - set(ours))
    extra = sorted(set(ours) - set(theirs))
    other_size = sorted(k for k in set(ours) & set(theirs) if ours[k].size != theirs[k].size)
    other_content = sorted(
        k
        for k in set(ours) & set(theirs)
        if k not in other_size and ours[k].digest != theirs[k].digest
    )
    if not (missing or extra or other_size or other_content):
        return []
    parts = []
    if missing:
        parts.append(f"missing {_few(missing)}")
    if extra:
        parts.append(f"extra {_few(extra)}")
    if other_size:
        parts.append(f"other sizes: {_few(other_size)}")
    if other_content:
        parts.append(f"other content: {_few(other_content)}")
    return [
        NodeProblem(
            node.rank,
            where,
            "model",
            f"the model at {f.model_path} is not the one node 0 has ({'; '.join(parts)}); the engine would serve it without a word",
            f"copy node 0's files to it (rsync -a {plan.nodes[0].host}:{ref.model_path}/ {f.model_path}/) so every node loads the same weights",
        )
    ]


def _few(names: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
