"""The nodes file, each node's command, and the pre-flight decisions (pure)."""

from __future__ import annotations

import dataclasses

import pytest

from bringup.core import engine_args, packs
from bringup.core.nodes import (
    ListenResult,
    ModelFile,
    NodeFacts,
    parse_nodes,
    plan_cluster,
    preflight,
)
from bringup.core.plan.flags import convert
from bringup.core.vocab import Engine
from bringup.errors import InputError, UsageError

SPEC = packs.get(Engine.VLLM).multinode
assert SPEC is not None

NODES_TEXT = """
# rank order
ops@gpu1:2222  GLOO_SOCKET_IFNAME=eth0 VLLM_HOST_IP=10.0.0.1   # node 0 serves
gpu2 GLOO_SOCKET_IFNAME=eth0 VLLM_HOST_IP=10.0.0.2 'NOTE=a b'
"""


def test_nodes_file_lists_nodes_in_rank_order_with_their_environment() -> None:
    nodes = parse_nodes(NODES_TEXT)
    assert [n.rank for n in nodes] == [0, 1]
    assert nodes[0].address == "ops@gpu1:2222"
    assert nodes[0].host == "gpu1"
    assert nodes[0].env_value("VLLM_HOST_IP") == "10.0.0.1"
    assert nodes[1].env_value("NOTE") == "a b"
    assert nodes[1].label == "node 1 (gpu2)"
    assert nodes[1].line == 4


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("gpu1\n", "1 node listed"),
        ("", "0 nodes listed"),
        ("gpu1\ngpu2 IFNAME\n", ":2: 'IFNAME' is not NAME=value"),
        ("gpu1\nA=b\n", ":2: 'A=b' is not a node address"),
        ("gpu1\ngpu2:99999\n", "bad ssh port"),
        ("gpu1\ngpu2 X='unclosed\n", "cannot read the line"),
    ],
)
def test_a_bad_nodes_file_names_the_line(text: str, says: str) -> None:
    with pytest.raises(InputError, match=says.replace("(", r"\(")) as err:
        parse_nodes(text, source="n.txt")
    assert "n.txt" in str(err.value)


def _plan(argv: list[str], text: str = NODES_TEXT):  # type: ignore[no-untyped-def]
    assert SPEC is not None
    return plan_cluster(argv, parse_nodes(text), SPEC)


def test_each_node_gets_its_rank_and_node_0_serves() -> None:
    plan = _plan(["vllm", "serve", "/m", "-tp", "2", "--port", "8001"])
    assert plan.problems == ()
    zero, one = plan.commands
    assert engine_args.get_flag(zero, "--node-rank") == "0"
    assert engine_args.get_flag(one, "--node-rank") == "1"
    assert not engine_args.has_flag(zero, "--headless")
    assert engine_args.has_flag(one, "--headless")
    for cmd in plan.commands:
        assert engine_args.get_flag(cmd, "--nnodes") == "2"
        assert engine_args.get_flag(cmd, "--master-addr") == "10.0.0.1"  # node 0's VLLM_HOST_IP
        assert engine_args.get_flag(cmd, "--master-port") == "29501"
        assert engine_args.get_flag(cmd, "--distributed-timeout-seconds") == "600"
        assert engine_args.get_flag(cmd, "-tp") == "2"
    assert plan.timeout_added
    assert "--distributed-timeout-seconds 600" in plan.notes[0]
    assert plan.rank0_url == "http://10.0.0.1:8001"
    assert (plan.world_size, plan.per_node, plan.model) == (2, 1, "/m")


def test_given_master_address_port_and_timeout_are_kept() -> None:
    plan = _plan(
        [
            "vllm",
            "serve",
            "/m",
            "-tp",
            "4",
            "--master-addr",
            "192.168.1.5",
            "--master-port=40000",
            "--distributed-timeout-seconds",
            "90",
        ]
    )
    assert plan.problems == ()
    assert plan.notes == ()
    for cmd in plan.commands:
        assert engine_args.get_flag(cmd, "--master-addr") == "192.168.1.5"
        assert engine_args.get_flag(cmd, "--master-port") == "40000"
        assert engine_args.get_flag(cmd, "--distributed-timeout-seconds") == "90"
    assert plan.per_node == 2
    assert not plan.timeout_added
    no_ip = _plan(["vllm", "serve", "/m", "-tp", "2"], "a@h0\nh1\n")
    assert no_ip.master_addr == "h0"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["-tp", "3"], "does not divide evenly over 2 nodes"),
        (["-tp", "2", "--nnodes", "3"], "--nnodes 3 but the nodes file lists 2 nodes"),
        (["-tp", "2", "--node-rank", "1"], "--node-rank is set on the command"),
        (["-tp", "2", "--headless"], "--headless is set on the command"),
    ],
)
def test_command_problems_are_found_before_anything_runs(argv: list[str], says: str) -> None:
    plan = _plan(["vllm", "serve", "/m", *argv])
    assert any(says in p.message for p in plan.problems), plan.problems
    assert all(p.where == "the command" and p.fix for p in plan.problems)


@pytest.mark.parametrize("ray", [(), ("--distributed-executor-backend", "ray")])
def test_a_parallel_size_not_a_number_is_told_as_plan_tells_it(ray: tuple[str, ...]) -> None:
    """-tp two on the nodes' command: the problem in ``bringup plan``'s words
    (core.plan.flags.convert), one wording for the same flag (it said "is not a number")."""
    plan = _plan(["vllm", "serve", "/m", "-tp", "two", *ray])
    with pytest.raises(UsageError) as told:
        convert("--tensor-parallel-size", "two", int)
    told_as = (told.value.message, told.value.hint)
    assert told_as in [(p.message, p.fix) for p in plan.problems], plan.problems


def _good(**changes: object) -> NodeFacts:
    base = NodeFacts(
        reached=True,
        hostname="gpu",
        hostname_addresses=("10.0.0.1",),
        interfaces={"lo": ("127.0.0.1",), "eth0": ("10.0.0.1",)},
        engine_path="/venv/bin/vllm",
        python="/venv/bin/python3",
        python_version="3.11.7",
        packages={"vllm": "0.32.0", "torch": "2.13.0", "ray": None},
        model_path="/m",
        model_files={
            "config.json": ModelFile(10, "aa"),
            "model.safetensors": ModelFile(1000, "bb"),
        },
        gpu_count=2,
        shm_total_bytes=8 * 2**30,
        connect_ok=True,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _check(one: NodeFacts, zero: NodeFacts | None = None, argv: tuple[str, ...] = ()) -> list[str]:
    assert SPEC is not None
    plan = _plan(["vllm", "serve", "/m", "-tp", "2", *argv])
    node1 = dataclasses.replace(one, interfaces={"lo": ("127.0.0.1",), "eth0": ("10.0.0.2",)})
    return [p.line() for p in preflight(plan, [zero or _good(), node1], SPEC)]


def test_identical_nodes_pass() -> None:
    assert _check(_good()) == []


def test_different_weights_at_the_same_path_are_refused() -> None:
    other = _good(
        model_files={
            "config.json": ModelFile(10, "aa"),
            "model.safetensors": ModelFile(1000, "cc"),
        }
    )
    (line,) = _check(other)
    assert line.startswith("node 1 (gpu2): the model at /m is not the one node 0 has")
    assert "other content: model.safetensors" in line
    assert "rsync -a gpu1:/m/ /m/" in line


def test_missing_extra_and_resized_files_are_named() -> None:
    other = _good(
        model_files={"model.safetensors": ModelFile(999, "bb"), "extra.bin": ModelFile(1, "x")}
    )
    (line,) = _check(other)
    assert "missing config.json" in line
    assert "extra extra.bin" in line
    assert "other sizes: model.safetensors" in line


def test_no_model_on_one_node() -> None:
    (line,) = _check(_good(model_files=None, model_error="no such file or folder"))
    assert (
        "node 1 (gpu2): no model at /m (no such file or folder); fix: copy node 0's model" in line
    )


def test_a_repo_id_nobody_has_is_downloaded_unless_offline() -> None:
    remote = {"model_files": None, "model_error": "download", "model_path": None}
    assert _check(_good(**remote), _good(**remote)) == []
    lines = _check(_good(**remote, offline=True), _good(**remote))
    assert len(lines) == 1
    assert "no model at /m" in lines[0]


def test_versions_must_match_node_0() -> None:
    lines = _check(_good(python_version="3.12.1", packages={"vllm": "0.31.0", "torch": "2.13.0"}))
    assert any("Python 3.12.1 here, 3.11.7 on node 0" in line for line in lines)
    assert any("vllm 0.31.0 here, 0.32.0 on node 0" in line for line in lines)
    assert not any("torch" in line for line in lines)


def test_engine_not_found() -> None:
    (line,) = _check(_good(engine_path=None, packages={}))
    assert "`vllm` is not found on the node" in line
    assert "PATH=" in line


def test_too_few_gpus_for_the_world_size() -> None:
    lines = _check(_good(gpu_count=1), argv=("-tp", "4"))
    assert any("1 GPU visible, the world size 4 over 2 nodes needs 2 here" in x for x in lines)


def test_cpu_build_needs_no_gpus() -> None:
    cpu = {"packages": {"vllm": "0.32.0+cpu", "torch": "2.13.0+cpu"}, "gpu_count": None}
    assert _check(_good(**cpu), _good(**cpu)) == []


def test_master_not_reachable_and_node_0_cannot_listen() -> None:
    (line,) = _check(_good(connect_ok=False, connect_error="timed out"))
    assert "cannot reach the master 10.0.0.1:29501 (timed out)" in line
    assert SPEC is not None
    plan = _plan(["vllm", "serve", "/m", "-tp", "2", "--master-addr", "10.9.9.9"])
    problems = preflight(
        plan,
        [_good(), _good(interfaces={"eth0": ("10.0.0.2",)})],
        SPEC,
        listen=ListenResult(False, "Cannot assign requested address"),
    )
    assert [p.rank for p in problems] == [0]
    assert "cannot listen on the master address 10.9.9.9:29501" in problems[0].message
    assert "must be an address of node 0 (one of 10.0.0.1)" in problems[0].fix


def test_hostname_on_loopback_without_a_socket_interface() -> None:
    text = "gpu1 VLLM_HOST_IP=10.0.0.1\ngpu2 VLLM_HOST_IP=10.0.0.2\n"
    plan = _plan(["vllm", "serve", "/m", "-tp", "2"], text)
    assert SPEC is not None
    loop = _good(hostname="vm", hostname_addresses=("127.0.0.1",))
    problems = preflight(
        plan, [loop, dataclasses.replace(loop, interfaces={"eth1": ("10.0.0.2",)})], SPEC
    )
    assert [p.check for p in problems] == ["hostname", "hostname"]
    assert "resolves to 127.0.0.1" in problems[1].message
    assert "GLOO_SOCKET_IFNAME=eth1" in problems[1].fix
    inherited = dataclasses.replace(loop, inherited_env={"GLOO_SOCKET_IFNAME": "eth0"})
    one = dataclasses.replace(inherited, interfaces={"eth0": ("10.0.0.2",)})
    assert preflight(plan, [inherited, one], SPEC) == []


def test_socket_interface_and_host_ip_must_exist() -> None:
    text = "gpu1 GLOO_SOCKET_IFNAME=eth0\ngpu2 GLOO_SOCKET_IFNAME=ib0 NCCL_SOCKET_IFNAME=eth VLLM_HOST_IP=10.0.0.99\n"
    plan = _plan(["vllm", "serve", "/m", "-tp", "2"], text)
    assert SPEC is not None
    node1 = _good(interfaces={"eth0": ("10.0.0.2",), "ib0": ()})
    problems = preflight(plan, [_good(), node1], SPEC)
    messages = [p.message for p in problems]
    assert any("interface 'ib0' has no address" in m for m in messages)
    assert not any("NCCL_SOCKET_IFNAME" in m for m in messages)  # a prefix: eth matches eth0
    assert any("VLLM_HOST_IP=10.0.0.99 is not an address of the node" in m for m in messages)
    gone = preflight(plan, [_good(), _good(interfaces={"eth0": ("10.0.0.2",)})], SPEC)
    assert any("no interface 'ib0' on the node (it has eth0)" in p.message for p in gone)


def test_small_shm_is_an_error_or_a_warning() -> None:
    (tiny,) = [p for p in _problems(_good(shm_total_bytes=32 * 2**20)) if p.check == "shm"]
    assert tiny.severity == "error"
    assert "32 MiB" in tiny.message
    assert "--shm-size" in tiny.fix
    (small,) = [p for p in _problems(_good(shm_total_bytes=512 * 2**20)) if p.check == "shm"]
    assert small.severity == "warning"


def test_an_unreachable_node() -> None:
    (line,) = _check(NodeFacts(reached=False, error="gpu2: cannot connect (Connection refused)"))
    assert line.startswith("node 1 (gpu2): not reached: gpu2: cannot connect")
    assert "ssh gpu2 true" in line


def _problems(one: NodeFacts):  # type: ignore[no-untyped-def]
    assert SPEC is not None
    plan = _plan(["vllm", "serve", "/m", "-tp", "2"])
    node1 = dataclasses.replace(one, interfaces={"eth0": ("10.0.0.2",)})
    return preflight(plan, [_good(), node1], SPEC)


# -- the Ray backend -------------------------------------------------------------------------

RAY = ("--distributed-executor-backend", "ray")


def test_ray_plan_starts_a_ray_cluster_then_the_command_on_node_0_only() -> None:
    assert SPEC is not None
    plan = plan_cluster(
        ["vllm", "serve", "/m", "-tp", "2", *RAY],
        parse_nodes(NODES_TEXT),
        SPEC,
        ray_port=6400,
        ray_args=["--num-cpus", "8"],
        ray_tag="ab12",
    )
    assert plan.is_ray
    assert plan.problems == ()
    head, worker = plan.commands
    assert head[:2] == ("ray", "start")
    assert engine_args.has_flag(head, "--head")
    assert engine_args.get_flag(head, "--port") == "6400"
    assert engine_args.get_flag(head, "--node-ip-address") == "10.0.0.1"
    assert engine_args.get_flag(worker, "--address") == "10.0.0.1:6400"
    assert engine_args.get_flag(worker, "--node-ip-address") == "10.0.0.2"
    assert not engine_args.has_flag(worker, "--head")
    for rank, cmd in enumerate(plan.commands):
        assert engine_args.has_flag(cmd, "--block")
        assert engine_args.get_flag(cmd, "--temp-dir") == f"/tmp/bringup-ray-ab12-{rank}"
        assert cmd[-2:] == ("--num-cpus", "8")
    # the command itself, unchanged: no --nnodes/--node-rank/--headless, no timeout added
    assert plan.serve_command == ("vllm", "serve", "/m", "-tp", "2", *RAY)
    assert plan.serve_env == (("RAY_ADDRESS", "10.0.0.1:6400"),)
    assert plan.engine_program == "vllm"
    assert (plan.master_addr, plan.master_port) == ("10.0.0.1", 6400)  # the reachability test
    assert plan.devices_needed == 2
    assert "a placement group of 2 bundles (one GPU each)" in plan.notes[0]
    assert "30 minutes" in plan.notes[0]


def test_ray_plan_refuses_the_multiprocessing_flags() -> None:
    plan = _plan(["vllm", "serve", "/m", "-tp", "2", "--nnodes", "2", *RAY])
    (problem,) = plan.problems
    assert "--nnodes is set on the command" in problem.message
    assert "places its workers on the Ray cluster" in problem.message


def _ray_good(**changes: object) -> NodeFacts:
    ray: dict[str, object] = {
        "ray_path": "/venv/bin/ray",
        "ray_python_version": "3.11.7",
        "ray_packages": {"ray": "2.60.0", "vllm": "0.32.0", "torch": "2.13.0"},
        "asked_ray": True,
    }
    return _good(**{**ray, **changes})


def _ray_check(
    one: NodeFacts, zero: NodeFacts | None = None, argv: tuple[str, ...] = (), **kw: object
) -> list[str]:
    assert SPEC is not None
    plan = plan_cluster(
        ["vllm", "serve", "/m", *argv, *RAY], parse_nodes(str(kw.pop("text", NODES_TEXT))), SPEC
    )
    node1 = dataclasses.replace(one, interfaces={"lo": ("127.0.0.1",), "eth0": ("10.0.0.2",)})
    facts = [zero or _ray_good(), node1]
    return [p.line() for p in preflight(plan, facts, SPEC, **kw)]  # type: ignore[arg-type]


def test_ray_nodes_that_fit_pass() -> None:
    assert _ray_check(_ray_good(), argv=("-tp", "4")) == []  # 2 + 2 GPUs for 4 bundles


def test_ray_placement_group_larger_than_the_cluster_is_refused() -> None:
    (line,) = _ray_check(_ray_good(gpu_count=1), argv=("-tp", "2", "-pp", "2"))
    assert line.startswith("the cluster: the engine asks Ray for 4 bundles of 1 GPU")
    assert "the nodes have 3 (node 0 2, node 1 1)" in line
    assert "wait 30 minutes ('Waiting for creating a placement group ...')" in line


def test_ray_num_gpus_given_to_ray_start_is_what_counts() -> None:
    lines = _ray_check(_ray_good(), argv=("-tp", "4"), ray_args=["--num-gpus=1"])
    assert any("the nodes have 2 (node 0 1, node 1 1)" in x for x in lines)


def test_ray_node_without_gpus_is_a_warning_when_the_rest_fits() -> None:
    assert SPEC is not None
    plan = plan_cluster(["vllm", "serve", "/m", "-tp", "2", *RAY], parse_nodes(NODES_TEXT), SPEC)
    one = dataclasses.replace(
        _ray_good(gpu_count=0), interfaces={"lo": ("127.0.0.1",), "eth0": ("10.0.0.2",)}
    )
    (problem,) = preflight(plan, [_ray_good(), one], SPEC)
    assert (problem.rank, problem.check, problem.severity) == (1, "placement", "warning")


def test_ray_older_executor_needs_a_gpu_on_node_0() -> None:
    text = NODES_TEXT.replace(
        "VLLM_HOST_IP=10.0.0.1", "VLLM_HOST_IP=10.0.0.1 VLLM_USE_RAY_V2_EXECUTOR_BACKEND=0"
    )
    lines = _ray_check(_ray_good(gpu_count=4), _ray_good(gpu_count=0), argv=("-tp", "2"), text=text)
    assert any("node 0 (ops@gpu1:2222): VLLM_USE_RAY_V2_EXECUTOR_BACKEND=0" in x for x in lines)


def test_ray_cpu_build_is_refused() -> None:
    versions = {"vllm": "0.32.0+cpu", "torch": "2.13.0+cpu"}
    cpu = {"packages": versions, "ray_packages": {**versions, "ray": "2.60.0"}, "gpu_count": None}
    (line,) = _ray_check(_ray_good(**cpu), _ray_good(**cpu), argv=("-tp", "2"))
    assert "CPU build cannot run its workers on Ray" in line


def test_ray_missing_other_version_and_engine_outside_rays_python() -> None:
    (line,) = _ray_check(_ray_good(ray_path=None), argv=("-tp", "2"))
    assert "node 1 (gpu2): `ray` is not found on the node" in line
    assert "pip install ray==2.60.0" in line
    lines = _ray_check(
        _ray_good(ray_packages={"ray": "2.58.0", "vllm": "0.32.0"}, ray_python_version="3.12.1"),
        argv=("-tp", "2"),
    )
    assert any("Ray 2.58.0 here, 2.60.0 on node 0" in x for x in lines)
    assert any("Ray's Python 3.12.1 here, 3.11.7 on node 0" in x for x in lines)
    (line,) = _ray_check(_ray_good(ray_packages={"ray": "2.60.0"}), argv=("-tp", "2"))
    assert "Ray's Python (/venv/bin/ray) has no vllm" in line


def test_ray_head_port_not_reachable() -> None:
    (line,) = _ray_check(_ray_good(connect_ok=False, connect_error="refused"), argv=("-tp", "2"))
    assert "cannot reach the Ray head 10.0.0.1:6379 (refused)" in line
    lines = _ray_check(_ray_good(), argv=("-tp", "2"), listen=ListenResult(False, "port in use"))
    assert any("pick a free --ray-port" in x for x in lines)
