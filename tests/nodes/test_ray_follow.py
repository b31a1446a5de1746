"""One startup over a Ray cluster, in process: fake nodes on a fake clock, the real follower
and ClusterMachine. The Ray lines are Ray 2.60's own (``ray start --block``); the engine lines
with Ray's worker prefix are the form Ray gives a worker's output on the driver."""

from __future__ import annotations

from bringup.core import packs
from bringup.core.nodes import ClusterPlan, parse_nodes, plan_cluster
from bringup.core.vocab import Engine
from bringup.follow.nodes import NodesConfig, follow_nodes
from follower.fakes import FakeClock
from nodes.test_cluster_machine import ClockProber, FakeNodeServer, Recorder

SPEC = packs.get(Engine.VLLM).multinode
assert SPEC is not None
UP = "2026-12-01 15:36:44,565\tSUCC scripts.py:1085 -- Ray runtime started."
DIED = (
    "2026-12-01 15:40:02,001\tERROR scripts.py:1307 -- Some Ray subprocesses exited unexpectedly:"
)
RAYLET = "2026-12-01 15:40:02,001\tERROR scripts.py:80 -- raylet [exit code=-9]"
STARTUP = "(APIServer pid=7) INFO 12-01 15:41:00 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000"
WORKER1 = "(EngineCore pid=9) (RayWorkerProc pid=31, ip=10.0.0.2) INFO 12-01 15:40:30 [default_loader.py:1] Loading weights took 1.20 seconds"
OOM1 = "(EngineCore pid=9) (RayWorkerProc pid=31, ip=10.0.0.2) ERROR 12-01 15:40:31 [core.py:1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.00 GiB is free."
WAIT = "(EngineCore pid=9) INFO 12-01 15:40:20 [ray_utils.py:521] Waiting for creating a placement group of specs for 10 seconds. specs=[{'GPU': 1.0}, {'GPU': 1.0}]. Check `ray status` and `ray list nodes` to see if you have enough resources, and make sure the IP addresses used by ray cluster are the same as VLLM_HOST_IP environment variable specified in each node if you are running on a multi-node."


def _plan() -> ClusterPlan:
    assert SPEC is not None
    nodes = parse_nodes("ops@gpu1 VLLM_HOST_IP=10.0.0.1\nops@gpu2 VLLM_HOST_IP=10.0.0.2\n")
    argv = ["vllm", "serve", "/m", "-tp", "2", "--distributed-executor-backend", "ray"]
    return plan_cluster(argv, nodes, SPEC, ray_tag="t")


class Started(FakeNodeServer):
    """A fake server that notes when bringup started it."""

    started_at: float | None = None

    def start(self, on_line, on_exit):  # type: ignore[no-untyped-def]
        self.started_at = self.clock.elapsed()
        super().start(on_line, on_exit)


class Servers:
    """The fake servers by (role, rank), and the order bringup asked for them."""

    def __init__(self, clock: FakeClock, scripts: dict[tuple[str, int], FakeNodeServer]) -> None:
        self.clock, self.scripts = clock, scripts
        self.asked: list[tuple[str, int, tuple[str, ...], float]] = []

    def __call__(self, node, argv, role):  # type: ignore[no-untyped-def]
        self.asked.append((role, node.rank, argv, self.clock.elapsed()))
        return self.scripts[(role, node.rank)]


def _follow(clock: FakeClock, servers: Servers, up_at: float | None, **config: object) -> Recorder:
    assert SPEC is not None
    recorder = Recorder()
    follow_nodes(
        NodesConfig(_plan(), SPEC, **config),  # type: ignore[arg-type]
        recorder,
        server_for=servers,
        prober=ClockProber(clock, up_at),
        clock=clock,
        threads=False,
    )
    return recorder


def test_ray_head_then_workers_then_the_engine_on_node_0_then_ready() -> None:
    clock = FakeClock()
    head = Started(clock, [(4.0, UP)], None)
    worker = Started(clock, [(7.0, UP)], None)
    engine = Started(clock, [(20.0, WORKER1), (30.0, STARTUP)], None)
    servers = Servers(clock, {("ray", 0): head, ("ray", 1): worker, ("engine", 0): engine})
    r = _follow(clock, servers, 31.0, exit_when_ready=True)
    assert r.result is not None
    assert r.result.summary["outcome"] == "ready", r.events
    roles = [(role, rank) for role, rank, _, _ in servers.asked]
    assert roles == [("ray", 0), ("ray", 1), ("engine", 0)]
    (_, _, worker_argv, _), (_, _, engine_argv, _) = servers.asked[1:]
    assert head.started_at == 0.0
    assert worker.started_at is not None
    assert worker.started_at >= 4.0  # only once the head said it is up
    assert engine.started_at is not None
    assert engine.started_at >= 7.0  # only once every node is in the cluster
    assert engine_argv == (
        "vllm",
        "serve",
        "/m",
        "-tp",
        "2",
        "--distributed-executor-backend",
        "ray",
    )
    assert worker_argv[:2] == ("ray", "start")
    joined = [(e.fields["rank"], e.fields.get("runtime")) for e in r.events if e.event == "joined"]
    assert joined == [(0, "ray"), (1, "ray")]
    # the worker's line counts for node 1, whose address Ray's prefix names
    phases = {(e.fields["rank"], e.fields["phase"]) for e in r.events if e.event == "phase"}
    assert (1, "weights_loaded") in phases or (1, "loading_weights") in phases, phases
    nodes = r.result.summary["nodes"]
    assert nodes[0]["serve_command"][0] == "vllm"
    assert nodes[1]["ray_joined_t"] is not None
    # stopped: the engine first, then every node's Ray
    assert engine.stopped_at is not None
    assert head.stopped_at is not None
    assert worker.stopped_at is not None
    assert engine.stopped_at <= head.stopped_at


def test_a_ray_node_that_dies_is_named_at_once() -> None:
    clock = FakeClock()
    head = Started(clock, [(4.0, UP)], None)
    worker = Started(clock, [(7.0, UP), (25.0, DIED), (25.0, RAYLET)], (25.5, 1))
    engine = Started(clock, [(20.0, WORKER1)], None)
    servers = Servers(clock, {("ray", 0): head, ("ray", 1): worker, ("engine", 0): engine})
    r = _follow(clock, servers, None)
    assert r.result is not None
    failure = r.result.summary["failure"]
    assert failure["rank"] == 1
    assert (
        "node 1 (ops@gpu2)'s Ray runtime exited with status 1 (raylet exited with code -9)"
        in failure["summary"]
    )
    assert failure["line"] == RAYLET
    (fail_rank, t), *_ = r.failures()
    assert fail_rank == 1
    assert 25.5 <= t < 26.0
    assert r.result.exit_code == 1


def test_a_ray_node_that_never_joins_is_named_after_the_join_timeout() -> None:
    clock = FakeClock()
    head = Started(clock, [(4.0, UP)], None)
    worker = FakeNodeServer(
        clock,
        [(5.0, "2026-12-01 15:36:41,386\tINFO scripts.py:1234 -- Local node IP: 10.0.0.2")],
        None,
    )
    servers = Servers(clock, {("ray", 0): head, ("ray", 1): worker})
    r = _follow(clock, servers, None, join_seconds=20.0)
    assert r.result is not None
    failure = r.result.summary["failure"]
    assert failure["rank"] == 1
    assert (
        "has not joined the Ray cluster at 10.0.0.1:6379 20 s after it started"
        in failure["summary"]
    )
    (_, t), *_ = r.failures()
    assert 24.0 <= t < 24.5  # started at the head's 4 s, + 20 s
    assert ("engine", 0) not in [(role, rank) for role, rank, *_ in servers.asked]


def test_the_placement_group_wait_fails_at_its_first_line() -> None:
    clock = FakeClock()
    head = Started(clock, [(4.0, UP)], None)
    worker = Started(clock, [(7.0, UP)], None)
    engine = Started(clock, [(30.0, WAIT)], None)
    servers = Servers(clock, {("ray", 0): head, ("ray", 1): worker, ("engine", 0): engine})
    r = _follow(clock, servers, None)
    assert r.result is not None
    failure = r.result.summary["failure"]
    assert failure["rank"] == 0
    assert failure["class"] == "config_error"
    assert (
        "cannot place the engine's placement group [{'GPU': 1.0}, {'GPU': 1.0}]"
        in failure["summary"]
    )
    assert "wait 30 minutes" in failure["summary"]


def test_a_worker_error_is_named_on_the_node_of_its_address() -> None:
    clock = FakeClock()
    head = Started(clock, [(4.0, UP)], None)
    worker = Started(clock, [(7.0, UP)], None)
    engine = Started(clock, [(20.0, WORKER1), (21.0, OOM1)], (30.0, 1))
    servers = Servers(clock, {("ray", 0): head, ("ray", 1): worker, ("engine", 0): engine})
    r = _follow(clock, servers, None)
    assert r.result is not None
    failure = r.result.summary["failure"]
    assert failure["rank"] == 1, failure
    assert "OutOfMemoryError" in failure["line"]


def test_a_ray_node_that_dies_after_ready_is_named_then() -> None:
    clock = FakeClock()
    head = Started(clock, [(4.0, UP)], None)
    worker = Started(clock, [(7.0, UP), (60.0, DIED), (60.0, RAYLET)], (60.5, 1))
    engine = Started(clock, [(20.0, WORKER1), (30.0, STARTUP)], None)
    servers = Servers(clock, {("ray", 0): head, ("ray", 1): worker, ("engine", 0): engine})
    r = _follow(clock, servers, 31.0)
    assert r.result is not None
    assert r.result.time_to_ready_seconds is not None  # it was ready first
    failure = r.result.summary["failure"]
    assert failure["rank"] == 1
    assert (
        "Ray runtime exited with status 1 (raylet exited with code -9) after the model was ready"
        in failure["summary"]
    )
    (_, t), *_ = r.failures()
    assert 60.5 <= t < 61.0
    assert engine.stopped_at is not None  # the engine is stopped: its workers there are gone
