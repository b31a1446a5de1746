"""``run --nodes --retry``: the retry loop over every node, in process (fake nodes on a fake
clock, the real follower and the real retry policy). Node 0's lines are a real vLLM 0.32 CPU
recording (tests/fixtures/logs/vllm_cpu_real/kv_cache_too_small.log)."""

from __future__ import annotations

from pathlib import Path

from bringup.core import engine_args, packs
from bringup.core.attempts import RetryEvent
from bringup.core.live import NodesResult
from bringup.core.nodes import ClusterPlan, parse_nodes, plan_cluster
from bringup.core.vocab import Engine
from bringup.follow.nodes import NodesConfig, follow_nodes
from bringup.follow.nodes_retry import DeferredSummary, retry_nodes
from follower.fakes import FakeClock
from nodes.test_cluster_machine import (
    BEFORE,
    JOIN0,
    JOIN1,
    WAIT0,
    ClockProber,
    FakeNodeServer,
    Recorder,
)

PACK = packs.get(Engine.VLLM)
SPEC = PACK.multinode
assert SPEC is not None
KV_LOG = (
    (Path(__file__).parents[1] / "fixtures" / "logs" / "vllm_cpu_real" / "kv_cache_too_small.log")
    .read_text()
    .splitlines()
)
NODES = parse_nodes("ops@gpu1 VLLM_HOST_IP=10.0.0.1\nops@gpu2 VLLM_HOST_IP=10.0.0.2\n")
ARGV = ("vllm", "serve", "/m", "-tp", "2", "--max-model-len", "2048")


def _plan_for(argv: tuple[str, ...]) -> ClusterPlan:
    assert SPEC is not None
    return plan_cluster(argv, NODES, SPEC)


def test_a_remedy_changes_every_nodes_command_and_every_node_starts_again() -> None:
    clock = FakeClock()
    asked: list[tuple[int, tuple[str, ...]]] = []
    retries: list[RetryEvent] = []
    finals: list[bool] = []
    recorders: list[Recorder] = []

    def attempt(number: int, plan: ClusterPlan) -> NodesResult:
        assert SPEC is not None
        base = clock.elapsed()
        if number == 1:  # node 0 fails with the real KV-cache line and exits; node 1 waits
            node0 = FakeNodeServer(
                clock, [(base + 1.0 + i * 0.01, t) for i, t in enumerate(KV_LOG)], (base + 3.0, 1)
            )
            node1 = FakeNodeServer(clock, [(base + 1.0, BEFORE)], None)
            up = None
        else:
            node0 = FakeNodeServer(clock, [(base + 1.0, WAIT0), (base + 2.0, JOIN0)], None)
            node1 = FakeNodeServer(clock, [(base + 1.5, BEFORE), (base + 2.0, JOIN1)], None)
            up = base + 5.0
        servers = [node0, node1]
        recorder = Recorder()
        recorders.append(recorder)
        deferred = DeferredSummary(recorder)

        def server_for(node, argv, _role):  # type: ignore[no-untyped-def]
            asked.append((number, argv))
            return servers[node.rank]

        result = follow_nodes(
            NodesConfig(plan, SPEC, exit_when_ready=True),
            deferred,
            server_for=server_for,
            prober=ClockProber(clock, up),
            clock=clock,
            threads=False,
        )
        attempts_closers.append(deferred)
        return result

    attempts_closers: list[DeferredSummary] = []

    def close(_result, records, final):  # type: ignore[no-untyped-def]
        finals.append(final)
        attempts_closers[-1].release(records, final=final)

    outcome = retry_nodes(
        ARGV,
        2,
        pack=PACK,
        plan_for=_plan_for,
        attempt=attempt,
        close=close,
        on_retry=retries.append,
    )
    assert outcome.exit_code == 0
    assert [a.attempt for a in outcome.attempts] == [1, 2]
    assert outcome.attempts[0].failure_class == "kv_cache_insufficient"
    (event,) = retries
    assert event.attempt == 2
    assert event.change.flag == "--max-model-len"
    new_len = event.change.value
    assert new_len is not None
    assert int(new_len) < 2048
    # every node of attempt 2 got the changed command, with its own rank flags
    second = [argv for number, argv in asked if number == 2]
    assert len(second) == 2
    for rank, argv in enumerate(second):
        assert engine_args.get_flag(argv, "--max-model-len") == new_len
        assert engine_args.get_flag(argv, "--node-rank") == str(rank)
    # one summary, the last attempt's, with every attempt in it
    assert finals == [False, True]
    assert recorders[0].result is None
    final = recorders[1].result
    assert final is not None
    assert [a["attempt"] for a in final.summary["attempts"]] == [1, 2]
    assert final.summary["attempts"][0]["change"]["flag"] == "--max-model-len"


def test_no_retry_for_a_failure_no_remedy_changes() -> None:
    clock = FakeClock()
    tp1 = "ValueError: Invalid data-parallel launch options: `--nnodes 2` must evenly divide the total world size (1). Adjust `--nnodes`."
    stops = []

    def attempt(number: int, plan: ClusterPlan) -> NodesResult:
        assert SPEC is not None
        servers = [
            FakeNodeServer(clock, [(1.0, WAIT0)], None),
            FakeNodeServer(
                clock, [(1.0, "Traceback (most recent call last):"), (1.0, tp1)], (2.0, 1)
            ),
        ]
        return follow_nodes(
            NodesConfig(plan, SPEC),
            Recorder(),
            server_for=lambda node, _a, _r: servers[node.rank],
            prober=ClockProber(clock, None),
            clock=clock,
            threads=False,
        )

    outcome = retry_nodes(
        ARGV, 2, pack=PACK, plan_for=_plan_for, attempt=attempt, on_stop=stops.append
    )
    assert outcome.exit_code == 1
    assert len(outcome.attempts) == 1
    assert outcome.attempts[0].stopped_because is not None
    assert "not retried" in outcome.attempts[0].stopped_because
    assert stops
