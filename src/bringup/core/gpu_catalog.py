"""GPUs bringup knows by name: memory as CUDA reports it, bandwidth, interconnect.

``memory_bytes`` is the total that ``cudaMemGetInfo`` (``torch.cuda.mem_get_info``) and NVML
report, which is what vLLM multiplies by ``--gpu-memory-utilization``; it is smaller than the
marketing size (an "80GB" H100 reports 79.19 GiB). ``memory_bandwidth_bytes_per_second`` is
the vendor's peak HBM/GDDR figure; ``interconnect_bytes_per_second`` is the per-GPU,
one-direction GPU-to-GPU bandwidth (NVLink, xGMI or the PCIe slot). Figures marked
``approx`` in ``note`` were not confirmed against a real ``nvidia-smi``/``torch`` reading.

>>> lookup("h100").name
'H100 80GB HBM3'
>>> lookup("NVIDIA RTX PRO 6000 Blackwell Server Edition").memory_bytes
102005473280
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bringup.errors import UsageError
from bringup.units import GiB


@dataclass(frozen=True, slots=True)
class GpuModel:
    """One GPU model: names, memory and the numbers the planner and the benchmark need."""

    name: str
    aliases: tuple[str, ...]  # other spellings, including what NVML calls it
    memory_bytes: int  # total as cudaMemGetInfo / NVML report it
    compute_capability: tuple[int, int]  # (major, minor); AMD: what torch reports (gfx942 → 9.4)
    memory_bandwidth_bytes_per_second: int
    interconnect: str  # "nvlink" | "pcie" | "xgmi"
    interconnect_bytes_per_second: int  # per GPU, one direction
    vllm_treats_as_a100: bool = False  # vLLM's batch defaults exclude names containing "a100"
    note: str = ""


def _gib(value: float) -> int:
    return round(value * GiB)


_PCIE4 = 32_000_000_000
_PCIE5 = 64_000_000_000

CATALOG: tuple[GpuModel, ...] = (
    GpuModel(
        "H100 80GB HBM3",
        ("H100", "H100 SXM", "H100-80GB", "H100 80GB", "NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),
        _gib(79.19),
        (9, 0),
        3_350_000_000_000,
        "nvlink",
        450_000_000_000,
    ),
    GpuModel(
        "H100 PCIe",
        ("NVIDIA H100 PCIe", "H100-PCIE", "H100 PCIe 80GB"),
        _gib(79.19),
        (9, 0),
        2_000_000_000_000,
        "pcie",
        _PCIE5,
    ),
    GpuModel(
        "H100 NVL",
        ("NVIDIA H100 NVL", "H100-94GB", "H100 94GB"),
        _gib(93.12),
        (9, 0),
        3_900_000_000_000,
        "nvlink",
        300_000_000_000,
        note="approx memory",
    ),
    GpuModel(
        "H200",
        ("NVIDIA H200", "H200 141GB", "H200-141GB", "H200 SXM", "NVIDIA H200 NVL"),
        _gib(139.81),
        (9, 0),
        4_800_000_000_000,
        "nvlink",
        450_000_000_000,
    ),
    GpuModel(
        "GH200",
        ("NVIDIA GH200 480GB", "GH200 96GB"),
        _gib(94.5),
        (9, 0),
        4_000_000_000_000,
        "nvlink",
        450_000_000_000,
        note="approx memory",
    ),
    GpuModel(
        "H20",
        ("NVIDIA H20", "H20 96GB"),
        _gib(95.0),
        (9, 0),
        4_000_000_000_000,
        "nvlink",
        450_000_000_000,
        note="approx memory",
    ),
    GpuModel(
        "B200",
        ("NVIDIA B200", "B200 180GB", "B200-180GB"),
        _gib(178.35),
        (10, 0),
        8_000_000_000_000,
        "nvlink",
        900_000_000_000,
        note="approx memory",
    ),
    GpuModel(
        "B300",
        ("NVIDIA B300", "B300 SXM6", "B300 288GB", "NVIDIA B300 SXM6 AC"),
        _gib(268.0),
        (10, 3),
        8_000_000_000_000,
        "nvlink",
        900_000_000_000,
        note="approx memory",
    ),
    GpuModel(
        "GB200",
        ("NVIDIA GB200", "GB200 NVL72", "GB200 186GB"),
        _gib(184.0),
        (10, 0),
        8_000_000_000_000,
        "nvlink",
        900_000_000_000,
        note="approx memory",
    ),
    GpuModel(
        "A100 80GB",
        (
            "A100",
            "A100-80GB",
            "A100-SXM4-80GB",
            "NVIDIA A100-SXM4-80GB",
            "NVIDIA A100 80GB PCIe",
            "A100 SXM",
        ),
        _gib(79.15),
        (8, 0),
        2_039_000_000_000,
        "nvlink",
        300_000_000_000,
        vllm_treats_as_a100=True,
    ),
    GpuModel(
        "A100 40GB",
        ("A100-40GB", "A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"),
        _gib(39.39),
        (8, 0),
        1_555_000_000_000,
        "nvlink",
        300_000_000_000,
        vllm_treats_as_a100=True,
    ),
    GpuModel(
        "L40S", ("NVIDIA L40S", "L40S 48GB"), _gib(44.39), (8, 9), 864_000_000_000, "pcie", _PCIE4
    ),
    GpuModel("L40", ("NVIDIA L40",), _gib(44.39), (8, 9), 864_000_000_000, "pcie", _PCIE4),
    GpuModel("L4", ("NVIDIA L4", "L4 24GB"), _gib(22.06), (8, 9), 300_000_000_000, "pcie", _PCIE4),
    GpuModel(
        "A10G",
        ("NVIDIA A10G", "A10G 24GB"),
        _gib(22.06),
        (8, 6),
        600_000_000_000,
        "pcie",
        _PCIE4,
        note="approx memory",
    ),
    GpuModel(
        "A10",
        ("NVIDIA A10",),
        _gib(22.06),
        (8, 6),
        600_000_000_000,
        "pcie",
        _PCIE4,
        note="approx memory",
    ),
    GpuModel(
        "RTX A6000",
        ("NVIDIA RTX A6000", "A6000"),
        _gib(47.53),
        (8, 6),
        768_000_000_000,
        "pcie",
        _PCIE4,
    ),
    GpuModel(
        "RTX 6000 Ada",
        ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada Generation"),
        _gib(47.50),
        (8, 9),
        960_000_000_000,
        "pcie",
        _PCIE4,
    ),
    GpuModel(
        "RTX 3090",
        ("NVIDIA GeForce RTX 3090", "3090", "GeForce RTX 3090"),
        _gib(23.69),
        (8, 6),
        936_000_000_000,
        "pcie",
        _PCIE4,
    ),
    GpuModel(
        "RTX 4090",
        ("NVIDIA GeForce RTX 4090", "4090", "GeForce RTX 4090"),
        _gib(23.64),
        (8, 9),
        1_008_000_000_000,
        "pcie",
        _PCIE4,
    ),
    GpuModel(
        "RTX 5090",
        ("NVIDIA GeForce RTX 5090", "5090", "GeForce RTX 5090"),
        _gib(31.37),
        (12, 0),
        1_792_000_000_000,
        "pcie",
        _PCIE5,
    ),
    GpuModel(
        "RTX PRO 6000 Blackwell",
        (
            "NVIDIA RTX PRO 6000 Blackwell",
            "NVIDIA RTX PRO 6000 Blackwell Server Edition",
            "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
            "RTX PRO 6000",
            "RTX Pro 6000 96GB",
        ),
        102_005_473_280,
        (12, 0),
        1_792_000_000_000,
        "pcie",
        _PCIE5,
    ),
    GpuModel(
        "MI300X",
        ("AMD Instinct MI300X", "MI300X 192GB", "AMD Instinct MI300X OAM"),
        _gib(191.98),
        (9, 4),
        5_300_000_000_000,
        "xgmi",
        448_000_000_000,
    ),
    GpuModel(
        "MI325X",
        ("AMD Instinct MI325X",),
        _gib(255.98),
        (9, 4),
        6_000_000_000_000,
        "xgmi",
        448_000_000_000,
        note="approx memory",
    ),
)


def _key(text: str) -> str:
    """Normalise a GPU name: lower case, vendor words and punctuation dropped."""
    words = re.sub(r"[^a-z0-9]+", " ", text.lower()).split()
    return " ".join(w for w in words if w not in {"nvidia", "amd", "geforce", "instinct", "tesla"})


_INDEX: dict[str, GpuModel] = {}
for _gpu in CATALOG:
    for _name in (_gpu.name, *_gpu.aliases):
        _INDEX.setdefault(_key(_name), _gpu)


def find(name: str) -> GpuModel | None:
    """The catalog entry for ``name`` (forgiving about case, vendor prefix and punctuation)."""
    key = _key(name)
    if key in _INDEX:
        return _INDEX[key]
    squashed = key.replace(" ", "")
    for known, gpu in _INDEX.items():
        if known.replace(" ", "") == squashed:
            return gpu
    # NVML names with a suffix we do not list ("... Server Edition", "... 80GB HBM3e"): longest prefix
    hits = [(len(k), g) for k, g in _INDEX.items() if key.startswith(k + " ")]
    return max(hits, key=lambda h: h[0])[1] if hits else None


def lookup(name: str) -> GpuModel:
    """Like :func:`find`, but an unknown name is a UsageError listing the known names."""
    gpu = find(name)
    if gpu is None:
        known = ", ".join(g.name for g in CATALOG)
        raise UsageError(f"unknown GPU {name!r}", hint=f"known: {known}; or give --gpu-memory SIZE")
    return gpu
