"""The GPU catalog: forgiving lookup and the numbers others depend on."""

from __future__ import annotations

import pytest

from bringup.core import gpu_catalog
from bringup.errors import UsageError


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("h100", "H100 80GB HBM3"),
        ("H100-80GB", "H100 80GB HBM3"),
        ("NVIDIA H100 80GB HBM3", "H100 80GB HBM3"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("h200", "H200"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB"),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
        ("Tesla T4", "T4"),
        ("AMD Instinct MI355X", "MI355X"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("a100-40gb", "A100 40GB"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("rtx pro 6000", "RTX PRO 6000 Blackwell"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Blackwell"),
        ("AMD Instinct MI300X", "MI300X"),
        ("NVIDIA L40S", "L40S"),
    ],
)
def test_lookup_is_forgiving(name: str, expected: str) -> None:
    """Case, vendor prefixes, dashes and NVML suffixes do not matter."""
    assert gpu_catalog.lookup(name).name == expected


def test_unknown_gpu_names_the_closest_and_the_list() -> None:
    """An unknown name is a usage error naming the closest parts and --list-gpus."""
    with pytest.raises(UsageError) as err:
        gpu_catalog.lookup("Voodoo 5")
    assert "--list-gpus" in str(err.value.hint)
    with pytest.raises(UsageError) as err:
        gpu_catalog.lookup("RTX 4080")
    assert "RTX 4090" in str(err.value)


def test_catalog_numbers() -> None:
    """Memory is what CUDA reports; A100s are flagged; every entry has bandwidths."""
    assert gpu_catalog.lookup("RTX PRO 6000 Blackwell").memory_bytes == 102_005_473_280
    assert round(gpu_catalog.lookup("H100").memory_bytes / 1024**3, 2) == 79.19
    assert gpu_catalog.lookup("A100 80GB").vllm_treats_as_a100
    assert not gpu_catalog.lookup("H100").vllm_treats_as_a100
    for gpu in gpu_catalog.CATALOG:
        assert gpu.memory_bandwidth_bytes_per_second > 0
        assert gpu.interconnect in {"nvlink", "pcie", "xgmi"}
        assert gpu.interconnect_bytes_per_second > 0
