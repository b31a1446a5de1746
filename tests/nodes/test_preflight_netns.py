"""The pre-flight on two real nodes (network namespaces, a real sshd each): facts gathered
over ssh in parallel, and the refusals that vLLM itself never makes."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bringup.adapters import nodes as node_adapter
from bringup.adapters.ssh import target_from
from bringup.core import packs
from bringup.core.nodes import NodeProblem, parse_nodes, plan_cluster, preflight
from bringup.core.vocab import Engine
from nodes.conftest import require_netns

from builders.netns import Cluster, cluster
from builders.safetensors import write_checkpoint

pytestmark = pytest.mark.ssh
SPEC = packs.get(Engine.VLLM).multinode


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Path]]:
    """Two nodes; node 1 sees `other/` where node 0 sees `models/` (its own disk)."""
    require_netns()
    work = tmp_path_factory.mktemp("i18-pre")
    for where in ("models/m", "models/only0", "shared/m"):
        write_checkpoint(work / where, n_shards=2, fill=True)
    write_checkpoint(work / "other/m", n_shards=2, fill=True)
    shard = work / "other/m/model-00002-of-00002.safetensors"
    data = bytearray(shard.read_bytes())
    data[-100:] = bytes(100)  # other weights, same names, sizes and headers
    shard.write_bytes(bytes(data))
    fake = work / "bin"
    fake.mkdir()
    for dist, version in (
        ("vllm", "0.32.0+cpu"),
        ("torch", "2.13.0+cpu"),
    ):  # a CPU build's metadata
        info = work / "site" / f"{dist}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (fake / "vllm").write_text(f"#!{sys.executable}\nraise SystemExit(0)\n")
    (fake / "vllm").chmod(0o755)
    with cluster(work / "c", binds={1: [(work / "other", work / "models")]}) as c:
        yield c, work


def _preflight(c: Cluster, work: Path, model: str, *extra: str, **kw: object) -> list[NodeProblem]:
    assert SPEC is not None
    path = f"PATH={work / 'bin'}:/usr/bin:/bin"
    env = {r: {"PATH": path.split("=", 1)[1], "PYTHONPATH": str(work / "site")} for r in (0, 1)}
    text = c.nodes_file(work / "nodes", env=env, **kw).read_text()  # type: ignore[arg-type]
    plan = plan_cluster(["vllm", "serve", model, "-tp", "2", *extra], parse_nodes(text), SPEC)
    environ = {"BRINGUP_SSH_CONFIG": str(c.ssh_config)}
    facts, listen = node_adapter.gather(
        plan,
        lambda n: target_from(n.address, accept_new_host_key=False, environ=environ),
        packages=SPEC.packages,
    )
    assert all(f.reached for f in facts), facts
    return [*plan.problems, *preflight(plan, facts, SPEC, listen=listen)]


def test_two_nodes_with_the_same_model_pass(nodes: tuple[Cluster, Path]) -> None:
    c, work = nodes
    assert _preflight(c, work, str(work / "shared/m")) == []


def test_other_weights_at_the_same_path_are_refused(nodes: tuple[Cluster, Path]) -> None:
    c, work = nodes
    (problem,) = _preflight(c, work, str(work / "models/m"))
    assert (problem.rank, problem.check) == (1, "model")
    assert "other content: model-00002-of-00002.safetensors" in problem.message
    assert problem.where == f"node 1 (root@{c.nodes[1].address})"


def test_model_missing_on_node_1(nodes: tuple[Cluster, Path]) -> None:
    c, work = nodes
    (problem,) = _preflight(c, work, str(work / "models/only0"))
    assert (problem.rank, problem.check) == (1, "model")
    assert "no model at" in problem.message
    assert "rsync -a" in problem.fix


def test_wrong_master_address(nodes: tuple[Cluster, Path]) -> None:
    c, work = nodes
    problems = _preflight(c, work, str(work / "shared/m"), "--master-addr", c.nodes[1].address)
    assert len(problems) == 1, problems
    (problem,) = problems
    assert (problem.rank, problem.check) == (0, "master")
    assert f"cannot listen on the master address {c.nodes[1].address}:29501" in problem.message
    assert c.nodes[0].address in problem.fix


def test_hostname_on_loopback_without_gloo_interface(nodes: tuple[Cluster, Path]) -> None:
    c, work = nodes
    problems = _preflight(c, work, str(work / "shared/m"), socket_ifname=False)
    assert [(p.rank, p.check) for p in problems] == [(0, "hostname"), (1, "hostname")], problems
    assert f"GLOO_SOCKET_IFNAME={c.nodes[1].ifname}" in problems[1].fix


def test_nothing_is_left_running(nodes: tuple[Cluster, Path]) -> None:
    c, work = nodes
    _preflight(c, work, str(work / "shared/m"))
    assert c.processes_left() == {}
