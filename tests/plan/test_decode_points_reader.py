"""bench/decode_points.py reads a measurement's interconnect text into the plan's --interconnect."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "decode_points.py"
_SPEC = importlib.util.spec_from_file_location("decode_points_reader", _PATH)
assert _SPEC is not None
assert _SPEC.loader is not None
points = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = points
_SPEC.loader.exec_module(points)


@pytest.mark.parametrize(
    ("text", "link"),
    [
        ("PCIe Gen5, single-socket host with 4 PCIe switches, no NVLink", "pcie"),
        ("PCIe (2 GPUs; NVLink bridge not mentioned)", "pcie"),
        ("NVLink/NVSwitch (HGX)", "nvlink"),
        ("PCIe Gen5 direct-attach, dual-socket host, P2P on", "pcie"),
        (
            "PCIe Gen5 direct-attach, dual-socket host, P2P DISABLED (NCCL_P2P_DISABLE=1)",
            "pcie-numa",
        ),
        ("8 GPUs split across 2 NUMA nodes", "pcie-numa"),
        ("n/a", None),
    ],
)
def test_the_points_interconnect_text_becomes_the_plans_link(text: str, link: str | None) -> None:
    assert points.interconnect(text) == link


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2 nodes: NVLink intra-node + InfiniBand inter-node", (2, "ib")),
        ("4 nodes over RoCE", (4, "roce")),
        ("2 nodes, 100 GbE Ethernet", (2, "ethernet")),
        ("PCIe Gen5 direct-attach, dual-socket, GPUs split across 2 NUMA nodes", (1, None)),
        ("NVLink/NVSwitch (HGX)", (1, None)),
    ],
)
def test_the_points_node_text_becomes_nnodes_and_the_network(
    text: str, expected: tuple[int, str | None]
) -> None:
    assert points.nodes(text) == expected


class _Gpu:
    name = "H100"


def test_a_point_across_nodes_or_without_the_custom_all_reduce_says_so_to_the_plan() -> None:
    base = {"id": "x", "gpu_count": 16, "tp": 16, "model": "m"}
    argv, _ = points.flags_for(
        {**base, "interconnect": "2 nodes: NVLink intra-node + InfiniBand inter-node"},
        "Llama-3.1-8B",
        _Gpu(),
    )
    assert argv[argv.index("--nnodes") + 1] == "2"
    assert argv[argv.index("--node-interconnect") + 1] == "ib"
    assert "--disable-custom-all-reduce" not in argv
    argv, _ = points.flags_for(
        {**base, "allreduce_backend": "NCCL (--disable-custom-all-reduce: crashed in capture)"},
        "Llama-3.1-8B",
        _Gpu(),
    )
    assert "--disable-custom-all-reduce" in argv
    assert "--nnodes" not in argv
