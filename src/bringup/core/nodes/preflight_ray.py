"""The pre-flight checks of the Ray backend: `ray` and its Python on every node, and whether
the engine's placement group fits the cluster (pure)."""

from __future__ import annotations

from collections.abc import Sequence

from bringup.core import engine_args
from bringup.core.nodes.facts import NodeFacts, first_version, is_cpu_build
from bringup.core.nodes.layout import Node
from bringup.core.nodes.plan import ClusterPlan, NodeProblem
from bringup.core.packs.types import MultiNodeSpec, RayBackendSpec


def _ray_gpus(f: NodeFacts, ray_args: Sequence[str]) -> int | None:
    """The GPUs a node's Ray registers: ``--num-gpus`` when given, else those it can see."""
    given = engine_args.get_flag(list(ray_args), "--num-gpus")
    if given is not None:
        try:
            return int(float(given))
        except ValueError:
            return None
    return f.gpu_count


def placement_problems(
    plan: ClusterPlan, facts: Sequence[NodeFacts], ray: RayBackendSpec, ray_args: Sequence[str]
) -> list[NodeProblem]:
    """Whether the engine's placement group fits the cluster: ``devices_needed`` bundles of one
    device each, packed by Ray over the nodes (vLLM 0.32 ``initialize_ray_cluster``); what does
    not fit, the engine waits for (``ray.placement_wait_seconds``) instead of failing."""
    node0, f0 = plan.nodes[0], facts[0]
    if not f0.reached or f0.engine_path is None:
        return []
    if is_cpu_build(f0, ()) or "cpu" in " ".join(k for k, v in f0.packages.items() if v):
        key = ray.cpu_device_key
        if not key:
            return [
                NodeProblem(
                    0,
                    node0.label,
                    "placement",
                    "the engine's CPU build cannot run its workers on Ray: its CPU platform has no Ray "
                    "device to ask for, so it stops with 'current platform cpu does not support ray.' "
                    "once it has joined the cluster",
                    f"drop {ray.backend_flag} {ray.backend_value}: bringup then starts the engine's own "
                    "multi-node runtime on the same nodes",
                )
            ]
    key = ray.gpu_device_key
    needed = plan.devices_needed
    counts = [_ray_gpus(f, ray_args) if f.reached else None for f in facts]
    if any(c is None for c in counts):
        unknown = [n.label for n, c in zip(plan.nodes, counts, strict=True) if c is None]
        return [
            NodeProblem(
                None,
                "the cluster",
                "placement",
                f"cannot count the {key}s of {', '.join(unknown)}: whether the engine's placement group of {needed} {key} bundles fits is not known",
                "install the NVIDIA driver tools (nvidia-smi) there, or give Ray --num-gpus (--ray-arg)",
                "warning",
            )
        ]
    known = [c or 0 for c in counts]
    total = sum(known)
    by_node = ", ".join(f"node {n.rank} {c}" for n, c in zip(plan.nodes, known, strict=True))
    out: list[NodeProblem] = []
    if total < needed:
        out.append(
            NodeProblem(
                None,
                "the cluster",
                "placement",
                f"the engine asks Ray for {needed} bundles of 1 {key} (tensor × pipeline parallel) but the "
                f"nodes have {total} ({by_node}); it would wait {ray.placement_wait_seconds // 60} minutes "
                "('Waiting for creating a placement group ...') before failing",
                f"lower -tp/-pp to fit {total} {key}s, make more {key}s visible (CUDA_VISIBLE_DEVICES on a node's line), or add nodes",
            )
        )
    v1_executor = (node0.env_value(ray.driver_device_variable) or "1") == "0"
    if v1_executor and known[0] < 1:
        out.append(
            NodeProblem(
                0,
                node0.label,
                "placement",
                f"{ray.driver_device_variable}=0 selects the executor whose driver (node 0) must hold a {key} itself, and node 0 has none",
                f"give node 0 a {key}, or leave {ray.driver_device_variable} unset",
            )
        )
    out.extend(
        NodeProblem(
            n.rank,
            n.label,
            "placement",
            f"no {key} for Ray here: this node adds nothing to the engine's placement group",
            f"make its {key}s visible, or leave it out of the nodes file",
            "warning",
        )
        for n, c in zip(plan.nodes, known, strict=True)
        if c == 0 and total >= needed
    )
    return out


def ray_problems(
    node: Node, f: NodeFacts, ref: NodeFacts, spec: MultiNodeSpec
) -> list[NodeProblem]:
    """``ray`` on the node, the same Ray and Python as node 0's, and the engine in Ray's Python
    (Ray starts the engine's workers with the Python of ``ray start``)."""
    where = node.label
    if not f.asked_ray:
        return []
    if f.ray_path is None:
        return [
            NodeProblem(
                node.rank,
                where,
                "ray",
                "`ray` is not found on the node",
                "install Ray next to the engine (pip install ray"
                + (f"=={ref.ray_packages.get('ray')}" if ref.ray_packages.get("ray") else "")
                + "), or put its bin folder first in PATH on the node's line of the nodes file",
            )
        ]
    out = []
    if f.ray_error:
        out.append(NodeProblem(node.rank, where, "ray", f.ray_error, "check the node's `ray` runs"))
        return out
    ray_here = f.ray_packages.get("ray")
    engine_here = first_version(f.ray_packages, spec.packages)
    engine_name = next((p for p in spec.packages if f.ray_packages.get(p)), spec.packages[0])
    if engine_here is None:
        out.append(
            NodeProblem(
                node.rank,
                where,
                "ray",
                f"Ray's Python ({f.python if f.ray_path is None else f.ray_path}) has no {engine_name}: Ray would start the engine's workers where they cannot import it",
                "install Ray into the engine's environment (the same venv as `vllm`)",
            )
        )
    elif (mine := first_version(f.packages, spec.packages)) is not None and mine != engine_here:
        out.append(
            NodeProblem(
                node.rank,
                where,
                "ray",
                f"Ray's Python sees {engine_name} {engine_here}, the node's `vllm` is {mine}",
                "install Ray into the engine's environment (the same venv as `vllm`)",
            )
        )
    if node.rank == 0 or ref.ray_path is None:
        return out
    pairs = [
        ("Ray", ray_here, ref.ray_packages.get("ray")),
        ("Ray's Python", f.ray_python_version, ref.ray_python_version),
    ]
    out.extend(
        NodeProblem(
            node.rank,
            where,
            "versions",
            f"{name} {here or 'not installed'} here, {there or 'not installed'} on node 0; "
            "Ray refuses a node whose Ray or Python differs from the head's",
            f"install the same {name.removesuffix(chr(39) + 's Python')} on every node ({name} {there} as on node 0)",
        )
        for name, here, there in pairs
        if here != there
    )
    return out
