"""One startup over several nodes: the verdict (pure) and the follower loop with fake nodes."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from bringup.core import packs
from bringup.core.analyzer import LogAnalyzer
from bringup.core.live import ClusterEvent, NodesResult
from bringup.core.nodes import ClusterMachine, ClusterPlan, parse_nodes, plan_cluster
from bringup.core.probes import ProbeKind, ProbeObservation
from bringup.core.startup import LiveEvent, StartupPolicy
from bringup.core.verdict import State
from bringup.core.vocab import Engine
from bringup.follow.nodes import NodesConfig, follow_nodes
from follower.fakes import FakeClock, FakeNotify

SPEC = packs.get(Engine.VLLM).multinode
assert SPEC is not None
BEFORE = "(Worker pid=2) INFO 12-01 10:00:01 [parallel_state.py:1] world_size=2 rank=1 local_rank=0 distributed_init_method=tcp://10.0.0.1:29501 backend=gloo"
JOIN0 = "(EngineCore pid=1) INFO 12-01 10:00:02 [parallel_state.py:959] rank 0 in world size 2 is assigned as DP rank 0, PP rank 0, TP rank 0"
JOIN1 = "(Worker pid=2) INFO 12-01 10:00:02 [parallel_state.py:959] rank 1 in world size 2 is assigned as DP rank 0, PP rank 0, TP rank 1"
TP1 = "ValueError: Invalid data-parallel launch options: `--nnodes 2` must evenly divide the total world size (1). Adjust `--nnodes`, `--data-parallel-size`, `--pipeline-parallel-size`, `--tensor-parallel-size`, or `--prefill-context-parallel-size`."
RETRY = "[W1201 10:00:05.000000000 socket.cpp:767] [c10d] TCP client failed to connect/validate to host 10.0.0.9:29501 - retrying (try=10, timeout=600000ms, delay=1000ms): Connection refused"


def _plan() -> ClusterPlan:
    assert SPEC is not None
    nodes = parse_nodes("ops@gpu1 VLLM_HOST_IP=10.0.0.1\nops@gpu2 VLLM_HOST_IP=10.0.0.2\n")
    return plan_cluster(["vllm", "serve", "/m", "-tp", "2"], nodes, SPEC)


class Cluster:
    """A ClusterMachine fed the way the follower feeds it, one analyzer per node."""

    def __init__(self, join_seconds: float | None = 60.0) -> None:
        assert SPEC is not None
        self.m = ClusterMachine(_plan(), SPEC, StartupPolicy(), 0.0, join_seconds=join_seconds)
        self.analyzers = [LogAnalyzer(Engine.VLLM), LogAnalyzer(Engine.VLLM)]
        self.events: list[LiveEvent] = []

    def line(self, rank: int, text: str, now: float = 1.0) -> None:
        found = self.analyzers[rank].feed(text)
        self.events += self.m.on_line(rank, text, found, now)

    def exit(self, rank: int, code: int, now: float = 2.0) -> None:
        failure = self.analyzers[rank].finish(code).failure
        self.events += self.m.on_exit(rank, code, failure, now)

    def answer(self, now: float = 3.0) -> None:
        for kind in (ProbeKind.HEALTH, ProbeKind.MODELS, ProbeKind.SMOKE):
            obs = ProbeObservation(kind, "http://10.0.0.1:8000", ok=True, model="/m", text="hi")
            self.events += self.m.on_probe(obs, now)


def test_ready_needs_rank_0_to_answer_and_every_node_alive() -> None:
    c = Cluster()
    c.line(1, BEFORE)  # said before the rendezvous: not joined yet
    assert not [e for e in c.events if e.event == "joined"]
    c.line(0, JOIN0)
    c.line(1, JOIN1)
    assert [e.fields["rank"] for e in c.events if e.event == "joined"] == [0, 1]
    c.answer()
    assert c.m.state is State.READY
    ready = next(e for e in c.events if e.event == "ready")
    assert (ready.fields["rank"], ready.fields["node"]) == (0, "ops@gpu1")


def test_a_node_gone_before_the_answer_fails_the_start() -> None:
    c = Cluster()
    c.line(0, JOIN0)
    c.exit(1, 1)
    c.answer()
    assert c.m.state is State.FAILED
    assert c.m.failed_rank == 1


def test_a_node_exit_is_named_with_its_own_line_and_the_first_failure_wins() -> None:
    c = Cluster()
    c.line(0, JOIN0)
    c.line(1, "Traceback (most recent call last):")
    c.line(1, TP1)
    c.exit(1, 1)
    assert c.m.state is State.FAILED
    assert c.m.failed_rank == 1
    assert c.m.failure is not None
    assert "must evenly divide the total world size (1)" in c.m.failure.line
    c.line(0, "ERROR ... RuntimeError: something on node 0 afterwards")
    c.exit(0, -9)
    assert c.m.failed_rank == 1


def test_a_node_that_retries_another_address_is_named_at_once() -> None:
    c = Cluster(join_seconds=30.0)
    c.line(0, BEFORE.replace("rank=1", "rank=0"), now=1.0)  # node 0 waits for the others
    c.line(1, RETRY, now=5.0)
    assert c.m.state is State.FAILED
    assert c.m.failed_rank == 1
    assert c.m.failure is not None
    assert c.m.failure.failure_class.value == "config_error"
    assert c.m.failure.line == RETRY
    assert (
        "node 1 (ops@gpu2) connects to 10.0.0.9:29501, but the head (node 0) listens at 10.0.0.1:29501"
        in c.m.failure.summary
    )


def test_a_node_whose_rendezvous_names_another_head_is_named_at_that_line() -> None:
    # real vLLM on node 1 with a wrong --master-addr: this line, then silence (its retries
    # are printed only when it is stopped); node 0 would wait for the whole timeout
    c = Cluster(join_seconds=60.0)
    elsewhere = BEFORE.replace("tcp://10.0.0.1:29501", "tcp://10.0.0.9:29501")
    c.line(1, elsewhere, now=3.0)  # the master is an address: no need to wait for node 0's line
    assert c.m.failed_rank == 1
    assert c.m.failure is not None
    assert c.m.failure.line == elsewhere
    assert "connects to 10.0.0.9:29501, but the head (node 0) listens at 10.0.0.1:29501" in (
        c.m.failure.summary
    )
    events = [e for e in c.events if e.event == "failure"]
    assert [(e.fields["rank"], e.t) for e in events] == [(1, 3.0)]


def test_the_same_head_in_another_spelling_waits_for_node_0s_own_line() -> None:
    assert SPEC is not None
    nodes = parse_nodes("ops@gpu1\nops@gpu2\n")
    plan = plan_cluster(["vllm", "serve", "/m", "-tp", "2"], nodes, SPEC)  # master "gpu1"
    m = ClusterMachine(plan, SPEC, StartupPolicy(), 0.0)
    a = LogAnalyzer(Engine.VLLM)
    line1 = BEFORE.replace("tcp://10.0.0.1:29501", "tcp://gpu1.lan:29501")
    m.on_line(1, line1, a.feed(line1), 1.0)
    assert m.state is State.STARTING  # a host name: node 0's own line tells how it reads
    line0 = BEFORE.replace("rank=1", "rank=0").replace(
        "tcp://10.0.0.1:29501", "tcp://gpu1.lan:29501"
    )
    m.on_line(0, line0, LogAnalyzer(Engine.VLLM).feed(line0), 2.0)
    assert m.state is State.STARTING  # the same: they will meet


def test_a_node_that_retries_the_head_is_named_once_both_waited_together() -> None:
    c = Cluster(join_seconds=60.0)  # meets within 30 s at most
    c.line(0, BEFORE.replace("rank=1", "rank=0"), now=1.0)
    c.line(1, BEFORE, now=4.0)
    retry = RETRY.replace("10.0.0.9", "10.0.0.1")
    c.line(1, retry, now=9.0)
    assert c.m.tick(33.0) == []
    (failure,) = c.m.tick(34.5)
    assert failure.fields["rank"] == 1
    assert c.m.failure is not None
    assert "never connected to 10.0.0.1:29501 after 30 s: it keeps retrying" in c.m.failure.summary
    assert c.m.failure.line == retry


def test_both_at_the_rendezvous_but_apart_names_the_other_node() -> None:
    c = Cluster(join_seconds=20.0)  # the meeting limit is never longer than the join limit
    c.line(1, BEFORE, now=2.0)
    c.line(0, BEFORE.replace("rank=1", "rank=0"), now=5.0)
    assert c.m.tick(24.0) == []
    c.m.tick(25.0)
    assert c.m.failed_rank == 1
    assert c.m.failure is not None
    assert (
        "reached the rendezvous with the head at 10.0.0.1:29501 but has not joined the group 20 s after both were there"
        in c.m.failure.summary
    )


def test_a_node_s_known_error_line_names_it_at_that_line() -> None:
    # real vLLM printed node 1's ValueError, then took seconds more to exit; no signature
    # of the pack refines this one (Signature.refines), so it is the verdict at its line
    c = Cluster()
    c.line(1, "Traceback (most recent call last):", now=10.0)
    c.line(1, TP1, now=10.0)
    assert c.m.failed_rank == 1
    assert c.m.failure is not None
    assert c.m.failure.failure_class.value == "config_error"
    assert [(e.fields["rank"], e.t) for e in c.events if e.event == "failure"] == [(1, 10.0)]


def test_a_node_s_unknown_exception_settles_after_the_grace_not_at_its_exit() -> None:
    c = Cluster()
    unknown = "RuntimeError: something no pack knows, on node 1"
    c.line(1, "Traceback (most recent call last):", now=10.0)
    c.line(1, unknown, now=10.0)
    assert c.m.state is State.STARTING  # held for the grace: a more specific line may follow
    c.events += c.m.tick(11.0)
    assert c.m.state is State.STARTING
    c.events += c.m.tick(12.5)
    assert c.m.failed_rank == 1
    assert c.m.failure is not None
    assert c.m.failure.line == unknown
    assert [e.fields["rank"] for e in c.events if e.event == "failure"] == [1]


def test_a_join_limit_of_none_never_fails_for_joining() -> None:
    c = Cluster(join_seconds=None)
    c.line(0, BEFORE.replace("rank=1", "rank=0"), now=1.0)
    c.line(1, BEFORE, now=1.0)
    assert c.m.tick(200.0) == []  # (rank 0's stall limit, 300 s, still applies)
    assert c.m.state is State.STARTING


def test_a_node_that_printed_nothing_is_named_sooner_than_the_join_limit() -> None:
    c = Cluster(join_seconds=60.0)
    assert c.m.tick(100.0) == []  # node 0 not waiting yet: slow imports are not a join problem
    c.line(0, BEFORE.replace("rank=1", "rank=0"), now=100.0)
    assert c.m.tick(129.0) == []
    c.m.tick(130.0)  # 30 s: node 0 did its whole start meanwhile, node 1 not even a line
    assert c.m.failed_rank == 1
    assert c.m.failure is not None
    assert "printed nothing 30 s after node 0 reached the rendezvous" in c.m.failure.summary
    assert "its server never started" in c.m.failure.summary


def test_silence_without_a_retry_line_names_the_node_that_did_not_join() -> None:
    c = Cluster(join_seconds=30.0)
    c.line(1, "INFO vllm is importing", now=50.0)  # it printed: not silent, only slow
    assert c.m.tick(100.0) == []  # node 0 not waiting yet: slow imports are not a join problem
    c.line(0, BEFORE.replace("rank=1", "rank=0"), now=100.0)  # node 0's store waits from here
    assert c.m.tick(129.0) == []
    c.m.tick(131.0)
    assert c.m.failed_rank == 1
    assert c.m.failure is not None
    assert (
        "did not join the group within 30 s of node 0 waiting at 10.0.0.1:29501"
        in c.m.failure.summary
    )


def test_a_node_that_dies_after_ready_is_reported_then() -> None:
    c = Cluster()
    c.line(0, JOIN0)
    c.line(1, JOIN1)
    c.answer()
    c.exit(1, -9, now=50.0)
    assert c.m.state is State.FAILED
    assert c.m.failed_rank == 1
    assert c.m.failure is not None
    assert c.m.failure.summary.startswith(
        "node 1 (ops@gpu2) exited with status -9 after the model was ready (rank 0 still answers /health"
    )


def test_stopping_after_ready_is_not_a_failure() -> None:
    c = Cluster()
    c.line(0, JOIN0)
    c.line(1, JOIN1)
    c.answer()
    c.m.stop(9.0)
    assert c.m.state is State.STOPPED
    assert c.m.failure is None


# -- the follower loop, in process: fake nodes, a fake prober, a fake clock ---------------------


class FakeNodeServer:
    """A node's server whose lines and exit come at scripted times on the fake clock."""

    def __init__(
        self, clock: FakeClock, lines: list[tuple[float, str]], exit_at: tuple[float, int] | None
    ) -> None:
        self.clock, self.lines, self.exit_at = clock, lines, exit_at
        self.stopped_at: float | None = None
        self.done = False

    def start(
        self, on_line: Callable[[str], None], on_exit: Callable[[int | None, str | None], None]
    ) -> None:
        self.on_exit = on_exit
        for t, text in self.lines:
            self.clock.at(t, lambda text=text: None if self.done else on_line(text))
        if self.exit_at is not None:
            t, code = self.exit_at
            self.clock.at(t, lambda: self._end(code))

    def _end(self, code: int) -> None:
        if not self.done:
            self.done = True
            self.on_exit(code, None)

    def stop(self) -> None:
        self.stopped_at = self.clock.elapsed()
        self._end(-9)  # as vLLM waiting for a node: deaf to SIGTERM, killed after the grace

    @property
    def running(self) -> bool:
        return not self.done


class ClockProber:
    """Rank 0's API: refused until ``up_at`` seconds on the fake clock, then answering."""

    base_url = "http://10.0.0.1:8000"

    def __init__(self, clock: FakeClock, up_at: float | None) -> None:
        self.clock, self.up_at = clock, up_at

    def probe(
        self, kind: ProbeKind, *, health_path: str = "/health", model: str | None = None
    ) -> ProbeObservation:
        if self.up_at is None or self.clock.elapsed() < self.up_at:
            return ProbeObservation(kind, self.base_url, ok=False, refused=True)
        return ProbeObservation(kind, self.base_url, ok=True, model="/m", text="hi")

    def close(self) -> None: ...


class Recorder:
    def __init__(self) -> None:
        self.events: list[ClusterEvent] = []
        self.notes: list[str] = []
        self.result: NodesResult | None = None

    def event(self, event: ClusterEvent) -> None:
        self.events.append(event)

    def line(self, rank: int, text: str) -> None: ...

    def note(self, text: str) -> None:
        self.notes.append(text)

    def close(self, result: NodesResult) -> None:
        self.result = result

    def failures(self) -> list[tuple[int, float]]:
        return [(e.fields["rank"], e.t) for e in self.events if e.event == "failure"]


WAIT0 = BEFORE.replace("rank=1", "rank=0")  # node 0 at the rendezvous: its store waits


def _follow(
    clock: FakeClock,
    servers: list[FakeNodeServer],
    up_at: float | None,
    *,
    notify: FakeNotify | None = None,
    stop: threading.Event | None = None,
    on_event: Callable[[ClusterEvent], None] | None = None,
    **config: object,
) -> Recorder:
    assert SPEC is not None
    recorder = Recorder()
    follow_nodes(
        NodesConfig(_plan(), SPEC, **config),  # type: ignore[arg-type]
        recorder,
        server_for=lambda node, _argv, _role: servers[node.rank],
        prober=ClockProber(clock, up_at),
        clock=clock,
        notify=notify,
        on_event=on_event,
        stop=stop,
        threads=False,
    )
    return recorder


def test_follower_ready_then_stops_every_node() -> None:
    clock = FakeClock()
    servers = [
        FakeNodeServer(clock, [(20.0, WAIT0), (22.0, JOIN0)], None),
        FakeNodeServer(clock, [(21.0, BEFORE), (22.0, JOIN1)], None),
    ]
    notify = FakeNotify()
    r = _follow(clock, servers, 30.0, notify=notify, exit_when_ready=True)
    assert r.result is not None
    assert r.result.exit_code == 0
    assert r.result.summary["outcome"] == "ready"
    ttr = r.result.time_to_ready_seconds
    assert ttr is not None
    assert 30.0 <= ttr < 30.5
    assert all(s.stopped_at is not None for s in servers)
    assert [n["joined_t"] for n in r.result.summary["nodes"]] == [22.0, 22.0]
    kinds = notify.kinds()
    assert kinds[0] == "extend"
    assert "ready" in kinds
    assert kinds[-1] == "stopping"
    ready_text = next(v for k, v in notify.sent if k == "ready")
    assert "over 2 nodes" in ready_text


def test_follower_names_the_node_that_exits_by_its_line_and_stops_the_other() -> None:
    clock = FakeClock()
    servers = [
        FakeNodeServer(clock, [(20.0, WAIT0)], None),
        # vLLM prints the cause at 10 s and takes 8 s more to exit: named at the line
        FakeNodeServer(
            clock, [(10.0, "Traceback (most recent call last):"), (10.0, TP1)], (18.0, 1)
        ),
    ]
    r = _follow(clock, servers, None)
    assert r.result is not None
    assert r.result.exit_code == 1
    failure = r.result.summary["failure"]
    assert (failure["rank"], failure["node"]) == (1, "ops@gpu2")
    assert "must evenly divide" in failure["line"]
    ((rank, t),) = r.failures()
    assert rank == 1
    assert t == pytest.approx(10.0, abs=0.01)  # the fake clock's ticks
    assert servers[0].stopped_at is not None
    assert servers[0].stopped_at < 10.5


def test_follower_names_a_silent_node_after_the_join_limit_on_its_clock() -> None:
    clock = FakeClock()
    servers = [
        FakeNodeServer(clock, [(20.0, WAIT0)], None),
        FakeNodeServer(clock, [], None),  # started, but never prints: vLLM never ran there
    ]
    r = _follow(clock, servers, None, join_seconds=60.0)
    assert r.result is not None
    assert r.result.exit_code == 1
    ((rank, t),) = r.failures()
    assert rank == 1
    assert 50.0 <= t < 50.5  # node 0 waited from 20 s; a node silent 30 s after that
    assert r.result.summary["nodes"][0]["exit_code"] == -9  # stopped: SIGKILL after the grace


def test_follower_reports_a_node_that_dies_while_idle_then() -> None:
    clock = FakeClock()
    servers = [
        FakeNodeServer(clock, [(20.0, WAIT0), (22.0, JOIN0)], None),
        FakeNodeServer(clock, [(21.0, BEFORE), (22.0, JOIN1)], (500.0, -9)),
    ]
    r = _follow(clock, servers, 30.0)
    assert r.result is not None
    assert r.result.exit_code == 1
    assert r.failures() == [(1, 500.0)]
    assert "after the model was ready" in r.result.summary["failure"]["summary"]


def test_a_stop_on_request_after_ready_is_a_clean_end() -> None:
    # run --nodes --bench: the benchmark starts at Ready and, done, asks the follower to stop
    clock = FakeClock()
    servers = [
        FakeNodeServer(clock, [(20.0, WAIT0), (22.0, JOIN0)], None),
        FakeNodeServer(clock, [(21.0, BEFORE), (22.0, JOIN1)], None),
    ]
    stop = threading.Event()
    seen: list[str] = []

    def at_ready(event: ClusterEvent) -> None:
        seen.append(event.event)
        if event.event == "ready":
            clock.at(clock.elapsed() + 30.0, stop.set)  # the benchmark's 30 s

    r = _follow(clock, servers, 30.0, stop=stop, on_event=at_ready)
    assert r.result is not None
    assert r.result.exit_code == 0
    assert r.result.summary["outcome"] == "ready"
    assert "ready" in seen
    assert all(s.stopped_at is not None and s.stopped_at >= 60.0 for s in servers)
