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
