"""The pre-flight of the Ray backend on two real nodes (network namespaces, a real sshd each),
with the real Ray 2.60 venv layered over the real vLLM CPU venv (scripts/install-ray.sh):
`ray` on every node, the same Ray and Python as node 0's, the engine in Ray's Python, and the
placement group vLLM would ask for. Nothing is started: the probe reads package metadata only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bringup.adapters import nodes as node_adapter
from bringup.adapters.ssh import target_from
from bringup.core import packs
from bringup.core.nodes import NodeFacts, NodeProblem, parse_nodes, plan_cluster, preflight
from bringup.core.vocab import Engine
from nodes.conftest import require_netns

from builders.netns import Cluster, cluster
from builders.ray_env import RAY_VERSION, ray_venv, require_ray
from builders.safetensors import write_checkpoint
from builders.vllm_env import require_vllm, vllm_venv

pytestmark = pytest.mark.ssh
SPEC = packs.get(Engine.VLLM).multinode
RAY = ["--distributed-executor-backend", "ray"]


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Path]]:
    require_netns()
    require_vllm()
    require_ray()
    work = tmp_path_factory.mktemp("i18-raypre")
    write_checkpoint(work / "m", n_shards=1, fill=True)
    # node 1 with another Ray: the same venv's Python, where an older Ray's metadata comes first
    old = work / "old-ray"
    info = old / "site" / "ray-2.58.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ray\nVersion: 2.58.0\n")
    with cluster(work / "c") as c:
        yield c, work


def _preflight(
    c: Cluster,
    work: Path,
    path: dict[int, str],
    *extra: str,
    env: dict[int, dict[str, str]] | None = None,
) -> tuple[list[NodeProblem], list[NodeFacts]]:
    assert SPEC is not None
    node_env = {r: {"PATH": f"{path[r]}:/usr/bin:/bin", **(env or {}).get(r, {})} for r in (0, 1)}
    text = c.nodes_file(work / "nodes", env=node_env).read_text()
    argv = ["vllm", "serve", str(work / "m"), "-tp", "2", *RAY, *extra]
    plan = plan_cluster(argv, parse_nodes(text), SPEC, ray_tag="t")
    environ = {"BRINGUP_SSH_CONFIG": str(c.ssh_config)}
    facts, listen = node_adapter.gather(
        plan,
        lambda n: target_from(n.address, accept_new_host_key=False, environ=environ),
        packages=SPEC.packages,
    )
    assert all(f.reached for f in facts), facts
    return [*plan.problems, *preflight(plan, facts, SPEC, listen=listen)], facts


def test_the_cpu_build_is_refused_for_ray_in_seconds(nodes: tuple[Cluster, Path]) -> None:
    c, work = nodes
    bin_ = str(ray_venv() / "bin")
    problems, facts = _preflight(c, work, {0: bin_, 1: bin_})
    for f in facts:  # Ray's own Python sees the engine: the workers could import it
        assert f.ray_path == str(ray_venv() / "bin" / "ray")
        assert f.ray_packages["ray"] == RAY_VERSION
        assert f.ray_packages["vllm"] == "0.32.0+cpu"
        assert f.packages["ray"] == RAY_VERSION  # and vllm's Python sees Ray
    (problem,) = problems
    assert (problem.rank, problem.check) == (0, "placement")
    assert "current platform cpu does not support ray." in problem.message
    assert "drop --distributed-executor-backend ray" in problem.fix


def test_a_node_without_ray_is_named(nodes: tuple[Cluster, Path]) -> None:
    c, work = nodes
    problems, _ = _preflight(c, work, {0: str(ray_venv() / "bin"), 1: str(vllm_venv() / "bin")})
    rows = [(p.rank, p.check) for p in problems]
    assert rows == [(1, "ray"), (0, "placement")], problems
    assert "`ray` is not found on the node" in problems[0].message
    assert f"pip install ray=={RAY_VERSION}" in problems[0].fix


def test_a_node_with_another_ray_version_is_named(nodes: tuple[Cluster, Path]) -> None:
    c, work = nodes
    bin_ = str(ray_venv() / "bin")
    old = {1: {"PYTHONPATH": str(work / "old-ray" / "site")}}
    problems, _ = _preflight(c, work, {0: bin_, 1: bin_}, env=old)
    versions = [p for p in problems if p.check == "versions"]
    assert [(p.rank, p.message.split(";")[0]) for p in versions] == [
        (1, f"Ray 2.58.0 here, {RAY_VERSION} on node 0")
    ]
    assert f"Ray {RAY_VERSION} as on node 0" in versions[0].fix


def test_the_ray_head_port_must_be_free_on_node_0(nodes: tuple[Cluster, Path]) -> None:
    c, work = nodes
    bin_ = str(ray_venv() / "bin")
    wrong = {0: {"VLLM_HOST_IP": c.nodes[1].address}}  # not node 0's own address
    problems, _ = _preflight(c, work, {0: bin_, 1: bin_}, env=wrong)
    master = [p for p in problems if p.check == "master"]
    assert master, problems
    assert master[0].rank == 0
    assert f"cannot listen on the Ray head's address {c.nodes[1].address}:6379" in master[0].message
    assert c.processes_left() == {}
