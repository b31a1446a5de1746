"""The GPU catalog's entries (``core.gpu_catalog`` looks them up): one per part, each with the
datasheet its memory size and bandwidth come from.

``memory_bytes`` is the total CUDA/ROCm report (``torch.cuda.mem_get_info``, NVML), smaller
than the datasheet's size; where it was not read off a real device the entry says
``approx memory`` and holds the datasheet size less 1 %, the gap the read ones show (an 80 GB
H100 reports 79.19 GiB, a 24 GB RTX 4090 23.64 GiB). Bandwidths are the datasheet's peak memory
bandwidth and the per-GPU, one-direction GPU-to-GPU bandwidth (half the bidirectional NVLink or
Infinity Fabric figure; the PCIe slot's rate otherwise). ``unified`` parts share their memory
with the CPU (GB10, MI300A, Strix Halo): the OS and every other process hold part of it.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    source: str = ""  # the datasheet the memory size and bandwidth come from
    unified: bool = False  # memory shared with the CPU


def _gib(value: float) -> int:
    return round(value * GiB)


def _approx(datasheet_gb: float) -> int:
    """The datasheet size (GB as the vendor means it, 2**30 bytes per GB) less 1 %."""
    return round(datasheet_gb * 0.99 * GiB)


_T = 1_000_000_000_000
_G = 1_000_000_000
_PCIE3 = 16 * _G
_PCIE4 = 32 * _G
_PCIE5 = 64 * _G
_APPROX = "approx memory"

_NV_T4 = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf"
_NV_V100 = "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf"
_NV_A100 = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
_NV_A10 = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/datasheet-new/nvidia-a10-datasheet.pdf"
_NV_A30 = "https://www.nvidia.com/content/dam/en-zz/Solutions/data-center/products/a30-gpu/pdf/a30-datasheet.pdf"
_NV_A40 = "https://images.nvidia.com/content/Solutions/data-center/a40/nvidia-a40-datasheet.pdf"
_NV_L4 = "https://www.nvidia.com/en-us/data-center/l4/"
_NV_L40 = "https://www.nvidia.com/en-us/data-center/l40/"
_NV_L40S = "https://www.nvidia.com/en-us/data-center/l40s/"
_NV_H100 = "https://www.nvidia.com/en-us/data-center/h100/"
_NV_H200 = "https://www.nvidia.com/en-us/data-center/h200/"
_NV_GH200 = "https://www.nvidia.com/en-us/data-center/grace-hopper-superchip/"
_NV_HGX = "https://www.nvidia.com/en-us/data-center/hgx/"
_NV_GB200 = "https://www.nvidia.com/en-us/data-center/gb200-nvl72/"
_NV_GB300 = "https://www.nvidia.com/en-us/data-center/gb300-nvl72/"
_NV_SPARK = "https://www.nvidia.com/en-us/products/workstations/dgx-spark/"
_NV_A6000 = "https://www.nvidia.com/content/dam/en-zz/Solutions/design-visualization/quadro-product-literature/proviz-print-nvidia-rtx-a6000-datasheet-us-nvidia-1454980-r9-web%20(1).pdf"
_NV_6000ADA = "https://www.nvidia.com/en-us/design-visualization/rtx-6000/"
_NV_PRO6000 = "https://www.nvidia.com/en-us/data-center/rtx-pro-6000-blackwell-server-edition/"
_NV_3090 = "https://www.nvidia.com/en-us/geforce/graphics-cards/30-series/rtx-3090-3090ti/"
_NV_4090 = "https://www.nvidia.com/en-us/geforce/graphics-cards/40-series/rtx-4090/"
_NV_5090 = "https://www.nvidia.com/en-us/geforce/graphics-cards/50-series/rtx-5090/"
_AMD = "https://www.amd.com/en/products/accelerators/instinct/"
_AMD_RADEON = "https://www.amd.com/en/products/graphics/"

CATALOG: tuple[GpuModel, ...] = (
    # NVIDIA data center
    GpuModel(
        "T4",
        ("Tesla T4", "NVIDIA T4", "T4 16GB"),
        _gib(14.56),
        (7, 5),
        320 * _G,
        "pcie",
        _PCIE3,
        note="memory: torch's total capacity in public T4 OOM messages (16 GB with ECC on)",
        source=_NV_T4,
    ),
    GpuModel(
        "V100 16GB",
        ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB", "Tesla V100-PCIE-16GB", "V100-16GB"),
        _approx(16),
        (7, 0),
        900 * _G,
        "nvlink",
        150 * _G,
        note=_APPROX,
        source=_NV_V100,
    ),
    GpuModel(
        "V100 32GB",
        (
            "Tesla V100-SXM2-32GB",
            "V100-SXM2-32GB",
            "Tesla V100-PCIE-32GB",
            "V100-32GB",
            "Tesla V100S-PCIE-32GB",
        ),
        _approx(32),
        (7, 0),
        900 * _G,
        "nvlink",
        150 * _G,
        note=_APPROX,
        source=_NV_V100,
    ),
    GpuModel(
        "A100 80GB",
        ("A100-80GB", "A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", "A100 SXM", "A100 SXM 80GB"),
        _gib(79.15),
        (8, 0),
        2_039 * _G,
        "nvlink",
        300 * _G,
        vllm_treats_as_a100=True,
        source=_NV_A100,
    ),
    GpuModel(
        "A100 80GB PCIe",
        ("NVIDIA A100 80GB PCIe", "A100-PCIE-80GB", "A100 PCIe 80GB"),
        _gib(79.15),
        (8, 0),
        1_935 * _G,
        "pcie",
        _PCIE4,
        vllm_treats_as_a100=True,
        source=_NV_A100,
    ),
    GpuModel(
        "A100 40GB",
        (
            "A100-40GB",
            "A100-SXM4-40GB",
            "NVIDIA A100-SXM4-40GB",
            "NVIDIA A100-PCIE-40GB",
            "A100 PCIe 40GB",
        ),
        _gib(39.39),
        (8, 0),
        1_555 * _G,
        "nvlink",
        300 * _G,
        vllm_treats_as_a100=True,
        source=_NV_A100,
    ),
    GpuModel(
        "A30",
        ("NVIDIA A30", "A30 24GB"),
        _approx(24),
        (8, 0),
        933 * _G,
        "pcie",
        _PCIE4,
        note=_APPROX,
        source=_NV_A30,
    ),
    GpuModel(
        "A40",
        ("NVIDIA A40", "A40 48GB"),
        _approx(48),
        (8, 6),
        696 * _G,
        "pcie",
        _PCIE4,
        note=_APPROX,
        source=_NV_A40,
    ),
    GpuModel(
        "A10",
        ("NVIDIA A10", "A10 24GB"),
        _gib(22.06),
        (8, 6),
        600 * _G,
        "pcie",
        _PCIE4,
        note=_APPROX,
        source=_NV_A10,
    ),
    GpuModel(
        "A10G",
        ("NVIDIA A10G", "A10G 24GB"),
        _gib(22.06),
        (8, 6),
        600 * _G,
        "pcie",
        _PCIE4,
        note=_APPROX + "; AWS's A10 variant, the A10's datasheet figures",
        source=_NV_A10,
    ),
    GpuModel(
        "L4", ("NVIDIA L4", "L4 24GB"), _gib(22.06), (8, 9), 300 * _G, "pcie", _PCIE4, source=_NV_L4
    ),
    GpuModel("L40", ("NVIDIA L40",), _gib(44.39), (8, 9), 864 * _G, "pcie", _PCIE4, source=_NV_L40),
    GpuModel(
        "L40S",
        ("NVIDIA L40S", "L40S 48GB"),
        _gib(44.39),
        (8, 9),
        864 * _G,
        "pcie",
        _PCIE4,
        source=_NV_L40S,
    ),
    GpuModel(
        "H100 80GB HBM3",
        (
            "H100",
            "H100 SXM",
            "H100 SXM5",
            "H100-80GB",
            "H100 80GB",
            "NVIDIA H100 80GB HBM3",
            "H100-SXM5-80GB",
        ),
        _gib(79.19),
        (9, 0),
        3_350 * _G,
        "nvlink",
        450 * _G,
        source=_NV_H100,
    ),
    GpuModel(
        "H100 PCIe",
        ("NVIDIA H100 PCIe", "H100-PCIE", "H100 PCIe 80GB"),
        _gib(79.19),
        (9, 0),
        2_000 * _G,
        "pcie",
        _PCIE5,
        source=_NV_H100,
    ),
    GpuModel(
        "H100 NVL",
        ("NVIDIA H100 NVL", "H100-94GB", "H100 94GB"),
        _gib(93.12),
        (9, 0),
        3_900 * _G,
        "nvlink",
        300 * _G,
        note=_APPROX,
        source=_NV_H100,
    ),
    GpuModel(
        "H200",
        ("NVIDIA H200", "H200 141GB", "H200-141GB", "H200 SXM"),
        _gib(139.81),
        (9, 0),
        4_800 * _G,
        "nvlink",
        450 * _G,
        source=_NV_H200,
    ),
    GpuModel(
        "H200 NVL",
        ("NVIDIA H200 NVL",),
        _gib(139.81),
        (9, 0),
        4_800 * _G,
        "nvlink",
        450 * _G,
        note="the H200's memory as read; 2- or 4-way NVLink bridge",
        source=_NV_H200,
    ),
    GpuModel(
        "H20",
        ("NVIDIA H20", "H20 96GB"),
        _gib(95.0),
        (9, 0),
        4_000 * _G,
        "nvlink",
        450 * _G,
        note=_APPROX,
        source="https://www.nvidia.cn/data-center/h20/",
    ),
    GpuModel(
        "GH200 96GB",
        ("NVIDIA GH200 480GB", "GH200 96GB HBM3", "GH200 480GB"),
        _gib(94.5),
        (9, 0),
        4_000 * _G,
        "nvlink",
        450 * _G,
        unified=True,
        note=_APPROX
        + "; the GPU's 96 GB of HBM3; the Grace CPU's LPDDR5X is reachable over NVLink-C2C",
        source=_NV_GH200,
    ),
    GpuModel(
        "GH200 144GB",
        ("NVIDIA GH200 144G HBM3e", "GH200 144GB HBM3e", "GH200 624GB"),
        _approx(144),
        (9, 0),
        4_900 * _G,
        "nvlink",
        450 * _G,
        unified=True,
        note=_APPROX
        + "; the GPU's 144 GB of HBM3e; the Grace CPU's LPDDR5X is reachable over NVLink-C2C",
        source=_NV_GH200,
    ),
    GpuModel(
        "B200",
        ("NVIDIA B200", "B200 180GB", "B200-180GB", "HGX B200"),
        _gib(178.35),
        (10, 0),
        8 * _T,
        "nvlink",
        900 * _G,
        note=_APPROX,
        source=_NV_HGX,
    ),
    GpuModel(
        "B300",
        ("NVIDIA B300", "B300 SXM6", "B300 288GB", "NVIDIA B300 SXM6 AC", "HGX B300"),
        _gib(268.0),
        (10, 3),
        8 * _T,
        "nvlink",
        900 * _G,
        note=_APPROX,
        source=_NV_HGX,
    ),
    GpuModel(
        "GB200",
        ("NVIDIA GB200", "GB200 NVL72", "GB200 186GB"),
        _gib(184.0),
        (10, 0),
        8 * _T,
        "nvlink",
        900 * _G,
        note=_APPROX + "; 13.4 TB of HBM3e over 72 GPUs",
        source=_NV_GB200,
    ),
    GpuModel(
        "GB300",
        ("NVIDIA GB300", "GB300 NVL72"),
        _approx(279),
        (10, 3),
        8 * _T,
        "nvlink",
        900 * _G,
        note=_APPROX + "; up to 20 TB of HBM3e over 72 GPUs",
        source=_NV_GB300,
    ),
    GpuModel(
        "GB10",
        ("NVIDIA GB10", "DGX Spark", "GB10 DGX Spark"),
        # as CUDA reports it on DGX OS (torch/vLLM's total): 121.69 GiB on every boot of two
        # Sparks in MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks#47, not the datasheet's 128 GB
        # less 1 % (126.72 GiB) the approximate parts take
        _gib(121.69),
        (12, 1),
        273 * _G,
        "pcie",
        25 * _G,
        unified=True,
        note="128 GB LPDDR5x shared by the CPU and the GPU (CUDA reports 121.69 GiB); two Sparks "
        "link over ConnectX-7 (200 Gb/s)",
        source=_NV_SPARK + " ; total as read: MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks#47",
    ),
    # NVIDIA workstation and consumer
    GpuModel(
        "RTX A6000",
        ("NVIDIA RTX A6000", "A6000"),
        _gib(47.53),
        (8, 6),
        768 * _G,
        "pcie",
        _PCIE4,
        source=_NV_A6000,
    ),
    GpuModel(
        "RTX 6000 Ada",
        ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada Generation"),
        _gib(47.50),
        (8, 9),
        960 * _G,
        "pcie",
        _PCIE4,
        source=_NV_6000ADA,
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
        1_792 * _G,
        "pcie",
        _PCIE5,
        source=_NV_PRO6000,
    ),
    GpuModel(
        "RTX 3090",
        ("NVIDIA GeForce RTX 3090", "3090", "GeForce RTX 3090"),
        _gib(23.69),
        (8, 6),
        936 * _G,
        "pcie",
        _PCIE4,
        source=_NV_3090,
    ),
    GpuModel(
        "RTX 3090 Ti",
        ("NVIDIA GeForce RTX 3090 Ti", "3090 Ti", "GeForce RTX 3090 Ti"),
        _gib(23.69),
        (8, 6),
        1_008 * _G,
        "pcie",
        _PCIE4,
        note=_APPROX,
        source=_NV_3090,
    ),
    GpuModel(
        "RTX 4090",
        ("NVIDIA GeForce RTX 4090", "4090", "GeForce RTX 4090"),
        _gib(23.64),
        (8, 9),
        1_008 * _G,
        "pcie",
        _PCIE4,
        source=_NV_4090,
    ),
    GpuModel(
        "RTX 5090",
        ("NVIDIA GeForce RTX 5090", "5090", "GeForce RTX 5090"),
        _gib(31.37),
        (12, 0),
        1_792 * _G,
        "pcie",
        _PCIE5,
        source=_NV_5090,
    ),
    # AMD Instinct
    GpuModel(
        "MI50 16GB",
        ("AMD Instinct MI50 16GB", "Radeon Instinct MI50 16GB"),
        _approx(16),
        (9, 0),
        1_024 * _G,
        "pcie",
        _PCIE4,
        note=_APPROX + "; gfx906",
        source=_AMD + "mi50.html",
    ),
    GpuModel(
        "MI50 32GB",
        ("AMD Instinct MI50 32GB", "Radeon Instinct MI50 32GB"),
        _approx(32),
        (9, 0),
        1_024 * _G,
        "pcie",
        _PCIE4,
        note=_APPROX + "; gfx906",
        source=_AMD + "mi50.html",
    ),
    GpuModel(
        "MI60",
        ("AMD Instinct MI60", "Radeon Instinct MI60", "MI60 32GB"),
        _approx(32),
        (9, 0),
        1_024 * _G,
        "pcie",
        _PCIE4,
        note=_APPROX + "; gfx906",
        source=_AMD + "mi60.html",
    ),
    GpuModel(
        "MI100",
        ("AMD Instinct MI100", "MI100 32GB"),
        _approx(32),
        (9, 0),
        1_229 * _G,
        "xgmi",
        138 * _G,
        note=_APPROX + "; gfx908; 276 GB/s of Infinity Fabric links",
        source=_AMD + "mi100.html",
    ),
    GpuModel(
        "MI210",
        ("AMD Instinct MI210", "MI210 64GB"),
        _approx(64),
        (9, 0),
        1_638 * _G,
        "xgmi",
        150 * _G,
        note=_APPROX + "; gfx90a; 300 GB/s Infinity Fabric bridge",
        source=_AMD + "mi200/mi210.html",
    ),
    GpuModel(
        "MI250X",
        ("AMD Instinct MI250X", "AMD Instinct MI250X/MI250", "MI250X GCD", "MI250"),
        _approx(64),
        (9, 0),
        1_638 * _G,
        "xgmi",
        200 * _G,
        note=_APPROX
        + "; gfx90a; one of the package's two GCDs (128 GB, 3.2 TB/s in all), each its own device",
        source=_AMD + "mi200/mi250x.html",
    ),
    GpuModel(
        "MI300X",
        ("AMD Instinct MI300X", "MI300X 192GB", "AMD Instinct MI300X OAM"),
        _gib(191.98),
        (9, 4),
        5_300 * _G,
        "xgmi",
        448 * _G,
        source=_AMD + "mi300/mi300x.html",
    ),
    GpuModel(
        "MI300A",
        ("AMD Instinct MI300A",),
        _approx(128),
        (9, 4),
        5_300 * _G,
        "xgmi",
        448 * _G,
        unified=True,
        note=_APPROX + "; 128 GB HBM3 shared by the APU's CPU and GPU",
        source=_AMD + "mi300/mi300a.html",
    ),
    GpuModel(
        "MI325X",
        ("AMD Instinct MI325X", "MI325X 256GB"),
        _gib(255.98),
        (9, 4),
        6 * _T,
        "xgmi",
        448 * _G,
        note=_APPROX,
        source=_AMD + "mi300/mi325x.html",
    ),
    GpuModel(
        "MI355X",
        ("AMD Instinct MI355X", "MI355X 288GB"),
        _approx(288),
        (9, 5),
        8 * _T,
        "xgmi",
        538 * _G,
        note=_APPROX + "; gfx950; 1,075 GB/s of Infinity Fabric in all",
        source=_AMD + "mi350/mi355x.html",
    ),
    GpuModel(
        "MI350X",
        ("AMD Instinct MI350X", "MI350X 288GB"),
        _approx(288),
        (9, 5),
        8 * _T,
        "xgmi",
        538 * _G,
        note=_APPROX + "; gfx950",
        source=_AMD + "mi350/mi350x.html",
    ),
    # AMD Radeon
    GpuModel(
        "Radeon RX 7900 XTX",
        ("AMD Radeon RX 7900 XTX", "RX 7900 XTX", "7900 XTX", "7900XTX"),
        _approx(24),
        (11, 0),
        960 * _G,
        "pcie",
        _PCIE4,
        note=_APPROX + "; gfx1100",
        source=_AMD_RADEON + "radeon-rx-7000-series/amd-radeon-rx-7900xtx.html",
    ),
    GpuModel(
        "Radeon RX 7900 XT",
        ("AMD Radeon RX 7900 XT", "RX 7900 XT", "7900 XT"),
        _approx(20),
        (11, 0),
        800 * _G,
        "pcie",
        _PCIE4,
        note=_APPROX + "; gfx1100",
        source=_AMD_RADEON + "radeon-rx-7000-series/amd-radeon-rx-7900xt.html",
    ),
    GpuModel(
        "Radeon PRO W7900",
        ("AMD Radeon PRO W7900", "W7900"),
        _approx(48),
        (11, 0),
        864 * _G,
        "pcie",
        _PCIE4,
        note=_APPROX + "; gfx1100",
        source="https://www.amd.com/en/products/graphics/workstations/radeon-pro/w7900.html",
    ),
    GpuModel(
        "Radeon RX 9070 XT",
        ("AMD Radeon RX 9070 XT", "RX 9070 XT", "9070 XT"),
        _approx(16),
        (12, 0),
        645 * _G,
        "pcie",
        _PCIE5,
        note=_APPROX + "; gfx1201",
        source=_AMD_RADEON + "radeon-rx-9000-series/amd-radeon-rx-9070xt.html",
    ),
    GpuModel(
        "Radeon AI PRO R9700",
        ("AMD Radeon AI PRO R9700", "R9700"),
        _approx(32),
        (12, 0),
        645 * _G,
        "pcie",
        _PCIE5,
        note=_APPROX + "; gfx1201",
        source="https://www.amd.com/en/products/graphics/workstations/radeon-ai-pro/ai-9000-series/amd-radeon-ai-pro-r9700.html",
    ),
    GpuModel(
        "Ryzen AI Max+ 395",
        ("AMD Ryzen AI Max+ 395", "Strix Halo", "Radeon 8060S"),
        _approx(128),
        (11, 5),
        256 * _G,
        "pcie",
        _PCIE4,
        unified=True,
        note=_APPROX + "; gfx1151; up to 128 GB LPDDR5X-8000 shared by the CPU and the GPU",
        source="https://www.amd.com/en/products/processors/laptop/ryzen/ai-300-series/amd-ryzen-ai-max-plus-395.html",
    ),
)
