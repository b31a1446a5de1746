"""The link between the GPUs of one model instance, and what one small collective costs on it.

A batch-1 decode step all-reduces one token's hidden state (a few KiB) a hundred times or more
(:mod:`.decode` counts them), so what matters is the latency of a small collective inside a
CUDA graph, by interconnect (:data:`COLLECTIVE_LATENCY_SECONDS`):

- ``nvlink`` 8 us: a custom all-reduce kernel, the engines' default on NVLink (vLLM's
  ``CustomAllreduce``, SGLang's): one shot over peer memory. On H100 at 512 B-32 KiB over 2-8
  GPUs SGLang's takes 3.7-7.8 us and vLLM's 8.5-11.8 us, both launched without a CUDA graph
  (sgl-project/sglang#2904; its "vllm" column is vLLM's custom all-reduce, not NCCL); NCCL NVLS
  2 GPUs ~6 us (NVIDIA/nccl#1259);
- ``pcie`` 20 us: NCCL between four GPUs behind one PCIe switch, 4-8 KiB, in a CUDA graph,
  19.4-20.3 us (haohervchb/sglang-V100#2);
- ``pcie-numa`` 55 us (GPUs split across CPU sockets with no P2P between them, so NCCL stages
  the traffic through host memory, its SHM transport: NCCL's docs on ``NCCL_P2P_LEVEL`` and
  ``NCCL_SHM_DISABLE``; with P2P on across the sockets, ``NCCL_P2P_LEVEL=SYS``, it is ``pcie``):
  8 GPUs in two PCIe islands, NCCL 8-16 KiB 56.9-63.8 us (vllm-project/vllm#50576, A800);
  8 x RTX 4090 over two root complexes, NCCL 8 B 40-42 us (NVIDIA/nccl#1530);
- ``xgmi`` 15 us: not from a public measurement (approximate, RCCL on MI300X).

**NCCL's latency model** (NVIDIA/nccl ``src/graph/tuning.cc``, ``ncclTunerConstantsDefaults``
and ``ncclTopoTuneModel``): a small all-reduce takes the LL protocol (its base latency and
per-hop latencies are the lowest; LL128's base is 14 us, Simple's hops 3.4-14 us), by ring or
tree, whichever NCCL's model puts lower; NVLS and CollNet start at 25 us or need a switch plugin.
Over ``n`` ranks on ``m`` nodes (``n / m`` per node):

- ring: ``baseLat[Ring][LL]`` 6.6 us + ``2(n - 1) - 2(m - 1)`` steps inside the nodes at
  ``hwLat[hw][Ring][LL]`` (NVLink 0.6 us, PCIe 1.0 us; on several nodes at least the network
  post overhead, 1 us on Intel and other hosts, 2 us on AMD: ``getNetOverhead``; the lower is
  taken) + ``2(m - 1)`` steps over the network at ``hwLat[NET][Ring][LL]`` 2.7 us (the tree's 5.0
  when one GPU per node);
- tree: ``baseLat[Tree][LL]`` 6.8 us + ``2 ((n/m - 1) hwLat[hw][Tree][LL] + log2(m)
  hwLat[NET][Tree][LL])``, NVLink 0.6, PCIe 1.0, network 5.0 us.

(:func:`nccl_all_reduce_seconds`.) One node of 8 NVLink GPUs: ring 15.0 us; two nodes of 8
H100 over the network: tree 25.2 us (ring 40.0), which is the time NCCL's own tuner prints
for a 128-byte all-reduce on 2 x 8 H100 (``128 Bytes -> Algo 0 proto 0 time 25.21``: tree,
LL, in NVIDIA/nccl#1453's log). NCCL's model has one network class (``NCCL_HW_NET``) for its
InfiniBand-verbs transport (InfiniBand and RoCE alike) and its TCP socket transport (plain
Ethernet); over TCP the real latency is higher than the model's (no public small-message figure
was found), so over ``ethernet`` the expected speed is a best case.

**Where the plan uses it**:

- TP across nodes (``--nnodes N``: the instance's GPUs split evenly over N nodes, a TP group
  larger than one node's share crosses the network, ``--node-interconnect ib|roce|ethernet``):
  every collective is NCCL's, over the nodes' link (NVLink or PCIe inside, the network between),
  since a custom all-reduce is refused for a group that spans nodes (vLLM's
  ``custom_all_reduce.py``: "Custom allreduce is disabled because this process group spans
  across nodes"; SGLang's is the same code);
- NVLink with ``--disable-custom-all-reduce`` (vLLM's and SGLang's flag), or a TP size the
  custom kernel does not take (vLLM's ``CustomAllreduce._SUPPORTED_WORLD_SIZES``: 2, 4, 6, 8):
  NCCL over NVLink, 6.6 + 1.2 (n - 1) us (15.0 at TP 8 against the custom kernel's 8). On PCIe
  the figures above are NCCL's already (vLLM refuses its custom all-reduce on more than two
  PCIe GPUs), so the flag does not move them; ``xgmi`` keeps its figure. (Recent vLLM, with
  ``VLLM_ALLREDUCE_USE_SYMM_MEM=1``, its default, tries PyTorch's symmetric-memory all-reduce
  before NCCL on Hopper and Blackwell where multicast works: ``cuda_communicator.py``'s
  ``all_reduce`` chain. No public small-message timing of it inside a graph was found; it is
  planned as NCCL);
- PCIe by TP size: the PCIe figures are measured at 4 ranks (``pcie``) and 8 ranks
  (``pcie-numa``); another TP size moves them by NCCL's ring step over PCIe, 1.0 us a step,
  ``2 (n - 1)`` steps (:data:`RING_ANCHOR_RANKS`, :data:`RING_HOP_SECONDS`): ``pcie`` at TP 8 is
  28 us, at TP 2 16 us. NVLink's custom all-reduce is one shot (3.7-7.8 us from 2 to 8 GPUs in
  the same measurement): flat.

A pipeline stage boundary's send keeps the in-node link's latency (one per token, not modelled
over the network). Under ``--enforce-eager`` a collective is one more operator Python
dispatches: :func:`~bringup.core.plan.decode_costs.collective_seconds`.

>>> round(nccl_all_reduce_seconds(8) * 1e6, 1), round(nccl_all_reduce_seconds(16, 2) * 1e6, 1)
(15.0, 25.2)
"""

from __future__ import annotations

from dataclasses import dataclass

from bringup.core.gpu_catalog import GpuModel

INTERCONNECTS = ("nvlink", "pcie", "pcie-numa", "xgmi")
INTERCONNECT_NAMES = {
    "nvlink": "NVLink",
    "pcie": "PCIe",
    "pcie-numa": "PCIe across CPU sockets",
    "xgmi": "xGMI",
}
COLLECTIVE_LATENCY_SECONDS: dict[str, float] = {
    "nvlink": 8e-6,
    "pcie": 20e-6,
    "pcie-numa": 55e-6,
    "xgmi": 15e-6,
}
# the TP size each PCIe latency above was measured at, and NCCL's ring step over PCIe
# (hwLatencies[PCI][Ring][LL], below)
RING_ANCHOR_RANKS: dict[str, int] = {"pcie": 4, "pcie-numa": 8}
RING_HOP_SECONDS = 1.0e-6
# the network between the nodes (--node-interconnect); the default when --nnodes > 1
NETWORKS = ("ib", "roce", "ethernet")
NETWORK_NAMES = {"ib": "InfiniBand", "roce": "RoCE", "ethernet": "Ethernet (TCP)"}
DEFAULT_NETWORK = "ib"
# NVIDIA/nccl src/graph/tuning.cc, LL protocol: baseLatencies[algo][LL] and
# hwLatencies[NVLINK|PCI|NET][algo][LL], in seconds; getNetOverhead (x86 Intel and others: 1 us)
NCCL_BASE_SECONDS: dict[str, float] = {"ring": 6.6e-6, "tree": 6.8e-6}
NCCL_HOP_SECONDS: dict[str, dict[str, float]] = {
    "nvlink": {"ring": 0.6e-6, "tree": 0.6e-6},
    "pci": {"ring": 1.0e-6, "tree": 1.0e-6},
    "net": {"ring": 2.7e-6, "tree": 5.0e-6},
}
NCCL_NET_OVERHEAD_SECONDS = 1.0e-6
# vLLM custom_all_reduce.py (CustomAllreduce._SUPPORTED_WORLD_SIZES)
CUSTOM_ALL_REDUCE_WORLD_SIZES = frozenset({2, 4, 6, 8})


def nccl_all_reduce_seconds(ranks: int, nodes: int = 1, hw: str = "nvlink") -> float:
    """NCCL's modelled latency of a small all-reduce over ``ranks`` GPUs on ``nodes`` nodes,
    ``hw`` ("nvlink" or "pci") inside each: the lower of ring and tree, LL protocol (module
    docstring)."""
    n, m = max(2, ranks), max(1, nodes)
    per_node = max(1, n // m)
    inside = NCCL_HOP_SECONDS.get(hw, NCCL_HOP_SECONDS["pci"])
    net = NCCL_HOP_SECONDS["net"]
    steps, net_steps = 2 * (n - 1), 2 * (m - 1)
    ring_inside = max(inside["ring"], NCCL_NET_OVERHEAD_SECONDS) if m > 1 else inside["ring"]
    ring_net = net["tree"] if per_node == 1 else net["ring"]
    ring = NCCL_BASE_SECONDS["ring"] + (steps - net_steps) * ring_inside + net_steps * ring_net
    log2_nodes = m.bit_length() - 1
    tree = NCCL_BASE_SECONDS["tree"] + 2 * (
        (per_node - 1) * inside["tree"] + log2_nodes * net["tree"]
    )
    return min(ring, tree)


@dataclass(frozen=True, slots=True)
class Link:
    """The interconnect between the GPUs of one model instance."""

    kind: str  # one of INTERCONNECTS: the link inside a node
    bandwidth_bytes_per_second: float  # per GPU, one direction
    custom_all_reduce: bool = True  # False: --disable-custom-all-reduce (NCCL's all-reduce)
    nodes: int = 1  # nodes the TP group spans (more than one: over the network)
    network: str = ""  # one of NETWORKS when nodes > 1

    @property
    def latency_seconds(self) -> float:
        """Latency of one small collective over this link (at the TP size it was measured at)."""
        return COLLECTIVE_LATENCY_SECONDS.get(self.kind, COLLECTIVE_LATENCY_SECONDS["pcie"])

    def nccl(self, ranks: int) -> bool:
        """Whether a collective among ``ranks`` GPUs on this link is NCCL's own model's: across
        nodes, or NVLink without the custom all-reduce kernel."""
        if self.nodes > 1:
            return True
        custom = self.custom_all_reduce and (ranks < 2 or ranks in CUSTOM_ALL_REDUCE_WORLD_SIZES)
        return self.kind == "nvlink" and not custom

    def latency_at(self, ranks: int) -> float:
        """Latency of one small collective among ``ranks`` GPUs: NCCL's model across nodes or
        without the custom all-reduce on NVLink; else the measured figure moved by NCCL's ring
        step per rank over PCIe (NVLink's one-shot custom all-reduce is flat)."""
        if self.nccl(ranks):
            hw = "nvlink" if self.kind == "nvlink" else "pci"
            return nccl_all_reduce_seconds(ranks, self.nodes, hw)
        anchor = RING_ANCHOR_RANKS.get(self.kind)
        if anchor is None or ranks < 2:
            return self.latency_seconds
        return self.latency_seconds + 2 * (ranks - anchor) * RING_HOP_SECONDS

    @property
    def name(self) -> str:
        """How people call it: "NVLink", "NVLink (NCCL)", "NVLink + InfiniBand (2 nodes)"."""
        inside = INTERCONNECT_NAMES.get(self.kind, self.kind)
        if self.nodes > 1:
            network = NETWORK_NAMES.get(self.network or DEFAULT_NETWORK, self.network)
            return f"{inside} + {network} ({self.nodes} nodes)"
        if self.kind == "nvlink" and not self.custom_all_reduce:
            return f"{inside} (NCCL)"
        return inside


def gpu_link(gpu: GpuModel | None, interconnect: str | None) -> Link:
    """The link between the GPUs: ``interconnect`` if given, else the catalog's.

    ``pcie-numa`` moves the same bytes per second as ``pcie``; only its latency differs."""
    kind = (interconnect or (gpu.interconnect if gpu else "pcie")).lower()
    if gpu is None:
        bandwidth = 32e9
    elif kind in ("pcie", "pcie-numa") and gpu.interconnect != "pcie":
        bandwidth = 64e9 if gpu.compute_capability >= (9, 0) else 32e9  # the slot, not NVLink
    else:
        bandwidth = gpu.interconnect_bytes_per_second
    return Link(kind, bandwidth)


def tp_nodes(tensor_parallel: int, world: int, nnodes: int) -> int:
    """The nodes one TP group spans when ``world`` GPUs are split evenly over ``nnodes`` nodes
    (consecutive ranks on a node, TP groups of consecutive ranks: vLLM's and SGLang's layout)."""
    if nnodes <= 1 or world <= 0:
        return 1
    per_node = max(1, world // nnodes)
    return max(1, -(-tensor_parallel // per_node))
