"""What one small collective costs by link (core/plan/decode_links.py): NCCL's latency model
without the custom all-reduce and across nodes, and the flags that say so."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from bringup.cli.main import Context, main
from bringup.core import gpu_catalog
from bringup.core.plan import decode, decode_links
from bringup.core.plan.decode_links import Link, nccl_all_reduce_seconds, tp_nodes
from bringup.errors import UsageError

US = 1e-6


def test_one_node_takes_nccls_ring_over_nvlink_and_pcie() -> None:
    """tuning.cc, LL: ring 6.6 us + 2(n-1) hops (NVLink 0.6, PCIe 1.0); the tree's base is 6.8."""
    assert nccl_all_reduce_seconds(8) == pytest.approx(6.6 * US + 14 * 0.6 * US)
    assert nccl_all_reduce_seconds(2) == pytest.approx(6.6 * US + 2 * 0.6 * US)
    assert nccl_all_reduce_seconds(4, hw="pci") == pytest.approx(6.6 * US + 6 * 1.0 * US)
    assert nccl_all_reduce_seconds(8) > nccl_all_reduce_seconds(4) > nccl_all_reduce_seconds(2)


def test_two_nodes_of_eight_take_the_tree_nccls_tuner_prints() -> None:
    """2 x 8 H100: tree 6.8 + 2 (7 x 0.6 + 1 x 5.0) = 25.2 us, below the ring's 40.0 (its 28
    steps inside the nodes at the 1 us network overhead, 2 over the network at 2.7)."""
    assert nccl_all_reduce_seconds(16, 2) == pytest.approx(25.2 * US)
    assert nccl_all_reduce_seconds(16, 2, hw="pci") == pytest.approx((6.8 + 2 * (7 + 5)) * US)
    # one GPU per node: the ring's network step is the tree's 5 us; 2 ranks: ring 6.6 + 2 x 5
    assert nccl_all_reduce_seconds(2, 2) == pytest.approx(min(6.6 + 10, 6.8 + 10) * US)
    # more nodes: the tree grows by log2 of them, the ring by two steps each
    assert nccl_all_reduce_seconds(32, 4) > nccl_all_reduce_seconds(16, 2)


def test_the_custom_all_reduce_is_the_nvlink_default_and_nccl_without_it() -> None:
    nvlink = Link("nvlink", 450e9)
    assert nvlink.latency_at(8) == 8 * US
    nccl = Link("nvlink", 450e9, custom_all_reduce=False)
    assert nccl.latency_at(8) == pytest.approx(15.0 * US)
    assert nccl.latency_at(4) == pytest.approx(10.2 * US)
    assert nccl.name == "NVLink (NCCL)"
    # a TP size vLLM's custom kernel does not take (2, 4, 6, 8) is NCCL's too
    assert nvlink.latency_at(16) == pytest.approx(nccl_all_reduce_seconds(16))
    # PCIe's figures are NCCL's already: the flag does not move them
    pcie = Link("pcie", 64e9, custom_all_reduce=False)
    assert pcie.latency_at(8) == Link("pcie", 64e9).latency_at(8) == pytest.approx(28 * US)


def test_a_tp_group_across_nodes_is_nccls_over_the_network() -> None:
    two = Link("nvlink", 450e9, nodes=2, network="ib")
    assert two.latency_at(16) == pytest.approx(25.2 * US)
    assert two.name == "NVLink + InfiniBand (2 nodes)"
    # even with the custom all-reduce on: it is refused for a group that spans nodes
    assert two.custom_all_reduce
    assert Link("pcie", 64e9, nodes=2, network="roce").latency_at(16) > two.latency_at(16)


def test_the_tp_group_spans_nodes_only_when_larger_than_a_nodes_share() -> None:
    assert tp_nodes(16, 16, 2) == 2
    assert tp_nodes(8, 16, 2) == 1  # TP inside a node, PP (or DP) across
    assert tp_nodes(16, 32, 2) == 1
    assert tp_nodes(32, 32, 4) == 4
    assert tp_nodes(16, 16, 1) == 1


def test_setup_link_carries_the_flags_and_refuses_uneven_nodes() -> None:
    h100 = gpu_catalog.lookup("H100")
    setup = decode.DecodeSetup(nnodes=2)
    link = decode.setup_link(h100, setup, tensor_parallel=16, world=16)
    assert (link.kind, link.nodes, link.network) == ("nvlink", 2, decode_links.DEFAULT_NETWORK)
    inside = decode.setup_link(h100, setup, tensor_parallel=8, world=16)
    assert (inside.nodes, inside.network) == (1, "")
    off = decode.setup_link(
        h100, decode.DecodeSetup(custom_all_reduce=False), tensor_parallel=8, world=8
    )
    assert not off.custom_all_reduce
    with pytest.raises(UsageError, match="must divide"):
        decode.setup_link(h100, decode.DecodeSetup(nnodes=3), tensor_parallel=16, world=16)
    with pytest.raises(UsageError, match="unknown"):
        decode.setup_link(
            h100, decode.DecodeSetup(nnodes=2, network="smoke"), tensor_parallel=16, world=16
        )


def _plan(*argv: str) -> tuple[int, dict[str, Any], str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["plan", "--json", *argv], Context(stdout=out, stderr=err, environ={}))
    return code, json.loads(out.getvalue()) if out.getvalue() else {}, err.getvalue()


DEEPSEEK = ("DeepSeek-V3", "--gpu", "H100", "-tp", "16", "--gpus", "16")


def test_plan_over_two_nodes_lowers_expected_and_keeps_the_ceiling() -> None:
    _, one, _ = _plan(*DEEPSEEK)
    _, two, _ = _plan(*DEEPSEEK, "--nnodes", "2", "--node-interconnect", "ib")
    _, after, err = _plan(
        *DEEPSEEK, "--", "vllm", "serve", "deepseek-ai/DeepSeek-V3", "--nnodes", "2"
    )
    d1, d2, d3 = one["decode"], two["decode"], after["decode"]
    assert d2["collective_latency_seconds"] == pytest.approx(25.2 * US)
    assert d3 == d2  # --nnodes read from the command after --, the network's default ib
    assert d2["ceiling_tokens_per_s"] == d1["ceiling_tokens_per_s"]
    assert d2["expected_tokens_per_s"] < d1["expected_tokens_per_s"]
    assert "--nnodes" not in err


def test_plan_without_the_custom_all_reduce_is_nccls_over_nvlink() -> None:
    base = ("Kimi-K2", "--gpu", "H200", "-tp", "8")
    _, on, _ = _plan(*base)
    _, off, _ = _plan(*base, "--disable-custom-all-reduce")
    _, cmd, err = _plan(
        *base, "--", "vllm", "serve", "moonshotai/Kimi-K2", "--disable-custom-all-reduce"
    )
    assert on["decode"]["collective_latency_seconds"] == pytest.approx(8 * US)
    assert off["decode"]["collective_latency_seconds"] == pytest.approx(15.0 * US)
    assert cmd["decode"] == off["decode"]
    assert off["decode"]["ceiling_tokens_per_s"] == on["decode"]["ceiling_tokens_per_s"]
    assert off["decode"]["expected_tokens_per_s"] < on["decode"]["expected_tokens_per_s"]
    assert "not planned" not in err


def test_the_human_line_names_the_network() -> None:
    out, err = io.StringIO(), io.StringIO()
    main(
        ["plan", *DEEPSEEK, "--nnodes", "2", "--node-interconnect", "roce"],
        Context(stdout=out, stderr=err, environ={"NO_COLOR": "1"}),
    )
    line = next(x for x in out.getvalue().splitlines() if x.startswith("decode expected:"))
    assert "25 us over NVLink + RoCE (2 nodes)" in line


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["-tp", "4", "--nnodes", "3"], "must divide"),
        (["--nnodes", "2", "--node-interconnect", "pigeon"], "invalid choice"),
        (["--node-interconnect", "roce"], "needs --nnodes 2 or more"),
    ],
)
def test_bad_node_flags_are_one_line_exit_2(argv: list[str], needle: str) -> None:
    code, _, err = _plan("Llama-3.1-8B", "--gpu", "H100", *argv)
    assert code == 2
    assert needle in err
    assert "Traceback" not in err
