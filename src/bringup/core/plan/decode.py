"""Decode speed at batch 1: what one stream can get from a model on a set of GPUs (or a CPU).

At batch 1 every generated token reads, on every GPU, that GPU's share of the *active* weights
and of the KV cache, and waits for the collectives between the GPUs. Per token, on the
critical path (pipeline stages run one after the other)::

    time = sum over stages of  (weight_bytes + kv_bytes) per GPU / memory_bandwidth
         + collectives_per_token x collective_latency
         + collective payload bytes / link bandwidth

**What a GPU reads per token** (its share: :mod:`.weights` places every tensor):

- sharded linears (q/k/v/o, gate/up/down) 1/TP, K/V heads replicated when TP exceeds them;
- replicated parts in full on every GPU: norms, routers, MLA's down-projections
  (``q_a_proj``, ``kv_a_proj_with_mqa``), whatever is not split;
- routed experts: the top-k of E. Under TP every GPU holds 1/TP of every expert and reads
  k/E of its share. Under expert parallelism (EP = TP) whole experts are spread as vLLM
  places them (``determine_expert_map`` in ``fused_moe/expert_map_manager.py``: E // EP each,
  the first E % EP ranks one more; linear or round-robin, the counts are the same), and each
  MoE layer waits for the GPU that holds the most of the token's k experts (the combine
  all-to-all). The step is bounded by that busiest GPU: :func:`busiest_experts` is the
  expected maximum over the GPUs when the k experts are k distinct experts drawn uniformly
  (a multivariate hypergeometric draw, counted exactly), e.g. 8 of 128 over 4 GPUs: 3.49
  experts on the busiest, against a mean of 2. With real routers the load is skewed, so the
  busiest GPU holds more still; the ceiling stays an upper bound;
- the LM head (vocabulary-parallel, 1/TP); the input embedding is a lookup of one row, not
  a read of the matrix (unless it is tied to the LM head);
- the KV cache at ``context_tokens``: ``kv bytes per token per GPU`` (the latent, replicated
  on every GPU for MLA) x context, divided by the decode context parallel size, which shards
  the cached tokens over the TP group.

**Collectives per token**: two all-reduces per layer under TP (after attention and after the
MLP: Megatron-LM's tensor parallel layout, Shoeybi et al. 2019, arXiv:1909.08053), one for the
vocabulary-parallel embedding and one gather of the logits; with expert parallelism the MoE
layer's all-reduce becomes two all-to-alls (dispatch and combine); with decode context
parallelism each attention layer adds two (the query all-gather and the reduction of partial
outputs with their log-sum-exp, vLLM ``docs/serving/context_parallel_deployment.md``); each
pipeline boundary adds one send; MiniMax-M2 adds one per attention layer (the all-reduce of its
q/k norm's variance, :data:`VARIANCE_ALL_REDUCE_MODEL_TYPES`). Nemotron-H's layers are single
blocks (a Mamba-2 mixer, attention, an MLP or the experts: ``nemotron_h.py``, each decoder layer
one norm and one mixer whose output projection is row-parallel): one all-reduce per block, and
only its attention blocks count as attention layers (not the Mamba, MLP or MoE blocks, whose KV
kind is "linear" or "none"). The payload is one token's hidden state.

**Collective latency** (:mod:`.decode_links`): a custom all-reduce's 8 us over NVLink, NCCL's
measured 20 us over PCIe (4 GPUs) and 55 us across CPU sockets (8 GPUs), moved by NCCL's ring
step per rank; NCCL's own latency model (NVIDIA/nccl ``src/graph/tuning.cc``) where the
collective is NCCL's over NVLink (``--disable-custom-all-reduce``) or crosses nodes (``--nnodes``,
``--node-interconnect``); under ``--enforce-eager`` at least an eager operator's time
(:func:`~bringup.core.plan.decode_costs.collective_seconds`).

**Expected** speed takes the ceiling's terms with a bandwidth efficiency and adds a fixed cost
per layer (kernel launches and their tails, which a CUDA graph shortens but does not remove),
by architecture class (:data:`GPU_CLASSES`, :data:`CPU_CLASSES`):

- GPU bandwidth efficiency (the "model bandwidth utilization" of a serving stack): dense 0.80,
  from the 70-85 % that vLLM and TensorRT-LLM reach at batch 1 (a rule of thumb, e.g. the MBU
  entry of open-source-ai.tech's glossary; Databricks' "LLM Inference Performance Engineering"
  defines MBU); MoE and MLA 0.65, an assumption: their matrices are small (one expert of a
  large MoE is a few MiB), so each kernel spends more of its time ramping up;
- GPU fixed cost per layer: the kernels one layer launches at batch 1 (counted in vLLM's
  layer code) times the time of one kernel in a CUDA graph, or launched eagerly under
  ``--enforce-eager`` (:mod:`.decode_costs`, which also derates INT4 Marlin's bandwidth);
- CPU (llama.cpp, vLLM's CPU build): 0.85 of the measured read bandwidth (llama.cpp decodes
  at 84-91 % of STREAM's read-only bandwidth on a Raspberry Pi 5, ggml-org/llama.cpp#26484, and
  at >= 78 % of the M1's 68.2 GB/s, ggml-org/llama.cpp#1642), measured by
  :mod:`bringup.adapters.membw` as float32 dot products stream it with the engine's threads
  (one core's float32 loop can be the limit before the memory is), and a fixed cost per layer
  of 50 us (a dozen ops, each ending in a thread barrier); assumptions checked, not fitted, by
  ``bench/bench_decode.py`` on this project's machine (real llama.cpp and vLLM's CPU build,
  both within 20 % of the expected speed).

Checked against public GPU figures (``bench/bench_decode.py --published-only`` writes
``bench/results/decode.md``; ``--points`` scores the 30 real measurements of
``../shared/corpus/decode/points.jsonl`` into ``bench/results/decode_points.md``): dense setups
agree within 25 %; MoE and MLA setups run from 0.3 to 1.6 times the expected speed, by engine
version and MoE kernel more than by hardware (the same Kimi-K2.5 INT4 at TP 8 decodes faster on
8 PCIe RTX PRO 6000 in 2026 nightlies than on 8 x H200 in vLLM 0.15.1). No constant here was
fitted to those figures: they are scored, and the plan's caveat says how far they spread.

**The ceiling is a bound**: the bytes the busiest GPU must read at its vendor peak bandwidth,
nothing else (collectives and fixed costs are left to "expected": a custom all-reduce can be
faster than any latency the plan would assume). Under expert parallelism the ceiling counts
the fewest experts the busiest GPU can hold, ``ceil(k / EP)``; "expected" counts the expected
busiest. Speculative decoding emits several tokens per step and can exceed it: the plan
plans without a draft model.

What bounds it (``bound_by``) is the largest term of the expected time: ``"weights"``,
``"kv_cache"``, ``"collectives"`` (the all-reduces and sends between GPUs; none on one
device) or ``"per_layer_latency"`` (the fixed cost of each layer's kernels: launches under
eager mode, graph replay otherwise).

>>> link = Link("nvlink", 450e9)
>>> gpu = Processor("H100", "gpu", 3.35e12)
>>> w = Workload(weight_bytes_per_stage=(16_000_000_000,), kv_bytes_per_stage=(0,),
...     num_layers=32, arch_class="dense", allreduces=66, payload_bytes=8192,
...     tensor_parallel=1)
>>> d = predict(w, gpu, link)
>>> round(d.ceiling_tokens_per_s, 1), d.bound_by, d.collectives_per_token
(209.4, 'weights', 0)
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from bringup.core.checkpoint import TensorInfo
from bringup.core.gpu_catalog import GpuModel
from bringup.core.plan import decode_costs
from bringup.core.plan import kv as kvmod
from bringup.core.plan.arch import Architecture
from bringup.core.plan.decode_experts import busiest_experts
from bringup.core.plan.decode_experts import expert_counts as expert_counts  # re-exported
from bringup.core.plan.decode_links import COLLECTIVE_LATENCY_SECONDS as COLLECTIVE_LATENCY_SECONDS
from bringup.core.plan.decode_links import DEFAULT_NETWORK, NETWORKS, Link, tp_nodes
from bringup.core.plan.decode_links import INTERCONNECTS as INTERCONNECTS
from bringup.core.plan.decode_links import gpu_link as gpu_link
from bringup.core.plan.quant import format_from_config
from bringup.core.plan.settings import Settings
from bringup.core.plan.weights import Parallel, weights_per_stage
from bringup.errors import UsageError

ARCH_CLASSES = ("dense", "moe", "mla")
# MiniMax-M2 normalizes q and k over all heads: under TP each attention layer all-reduces their
# variance (vLLM model_executor/layers/minimax_rms_norm/rms_norm_tp.py, _all_reduce_variance)
VARIANCE_ALL_REDUCE_MODEL_TYPES = frozenset({"minimax_m2"})


@dataclass(frozen=True, slots=True)
class ClassCosts:
    """How far an architecture class gets from the ceiling on one kind of processor."""

    bandwidth_efficiency: float  # share of the memory bandwidth a decode step reaches
    per_layer_seconds: float  # fixed cost of one layer (launches, barriers)


GPU_CLASSES: dict[str, ClassCosts] = {
    "dense": ClassCosts(0.80, 10e-6),
    "moe": ClassCosts(0.65, 20e-6),
    "mla": ClassCosts(0.65, 30e-6),
}
CPU_CLASSES: dict[str, ClassCosts] = {c: ClassCosts(0.85, 50e-6) for c in ARCH_CLASSES}

_INPUT_EMBEDDING = re.compile(r"(embed_tokens|wte|tok_embeddings|word_embeddings|token_embd)")
_LM_HEAD = re.compile(r"(lm_head|^output\.weight)")
_EXPERT_GGUF = re.compile(r"_exps\.")


@dataclass(frozen=True, slots=True)
class Processor:
    """What decodes: one GPU of the instance, or the CPU."""

    name: str
    kind: str  # "gpu" | "cpu"
    memory_bandwidth_bytes_per_second: float
    bandwidth_source: str = "catalog"  # "catalog" (vendor peak), "measured", "given"


@dataclass(frozen=True, slots=True)
class Workload:
    """What one decoded token costs, per GPU of each pipeline stage."""

    weight_bytes_per_stage: tuple[int, ...]  # active weights one GPU of each stage reads
    kv_bytes_per_stage: tuple[int, ...]  # KV cache it reads at the context length
    num_layers: int
    arch_class: str  # one of ARCH_CLASSES
    allreduces: int  # per token, over the whole model (0 without TP)
    payload_bytes: int  # one token's hidden state, in activation precision
    tensor_parallel: int
    all_to_alls: int = 0  # expert parallel dispatch + combine
    sends: int = 0  # pipeline stage boundaries
    busiest_experts: float = 0.0  # EP: the token's experts on the busiest GPU (expected)
    experts_per_token: int = 0  # EP: the router's top-k
    ceiling_weight_bytes_per_stage: tuple[int, ...] = ()  # EP: fewest experts; () = the same
    graphs: bool = True  # CUDA graphs (False: --enforce-eager)
    weight_format: str = "none"  # quant.WeightFormat.method of the linear layers
    shared_experts: bool = False
    model_type: str = ""  # config.json's model_type (per-family kernels: decode_costs)
    blocks: tuple[str, ...] = ()  # Nemotron-H: one block per layer (decode_costs.BLOCK_KERNELS)

    @property
    def collectives(self) -> int:
        """All collectives (and sends) one token waits for."""
        return self.allreduces + self.all_to_alls + self.sends


@dataclass(frozen=True, slots=True)
class DecodeSpeed:
    """The ``decode`` object of ``plan --json`` (the extra fields are for people, not JSON)."""

    ceiling_tokens_per_s: float
    expected_tokens_per_s: float
    bound_by: str  # "weights" | "kv_cache" | "collectives" | "per_layer_latency"
    bytes_per_token_per_gpu: int  # the busiest GPU: weights + KV cache it reads per token
    collectives_per_token: int
    collective_latency_seconds: float  # one collective (0 on a single GPU)
    processor: str = field(default="", metadata={"json": None})
    bandwidth_bytes_per_second: float = field(default=0.0, metadata={"json": None})
    bandwidth_source: str = field(default="", metadata={"json": None})
    interconnect: str = field(default="", metadata={"json": None})
    bandwidth_efficiency: float = field(default=1.0, metadata={"json": None})
    per_layer_seconds: float = field(default=0.0, metadata={"json": None})
    arch_class: str = field(default="", metadata={"json": None})
    device_kind: str = field(default="gpu", metadata={"json": None})
    busiest_experts: float = field(default=0.0, metadata={"json": None})
    experts_per_token: int = field(default=0, metadata={"json": None})

    def ceiling_line(self) -> str:
        """One line for people: the ceiling (a bound: bytes at peak bandwidth) and its bytes."""
        parts = (
            f"{_size(self.bytes_per_token_per_gpu)} per {self.device_kind.upper()} per token at "
            f"{self.bandwidth_bytes_per_second / 1e9:.0f} GB/s ({self.bandwidth_source})"
        )
        if self.busiest_experts:
            parts += (
                f"; expert parallel: the busiest GPU holds {self.busiest_experts:.2f} of the "
                f"token's {self.experts_per_token} experts"
            )
        return f"decode ceiling:  {self.ceiling_tokens_per_s:,.1f} tok/s at batch 1 ({parts})"

    @property
    def bound_by_words(self) -> str:
        """``bound_by`` for people: "per-layer latency", "kv cache"."""
        return self.bound_by.replace("_", " ").replace("per layer", "per-layer")

    def expected_line(self) -> str:
        """One line for people: the expected speed and how it was derated."""
        comm = (
            f", {self.collectives_per_token} collectives x "
            f"{self.collective_latency_seconds * 1e6:.0f} us over {self.interconnect}"
            if self.collectives_per_token
            else ""
        )
        return (
            f"decode expected: {self.expected_tokens_per_s:,.1f} tok/s, bound by "
            f"{self.bound_by_words} "
            f"({self.arch_class} on {self.processor}: {self.bandwidth_efficiency:.0%} of the "
            f"bandwidth, {self.per_layer_seconds * 1e6:.0f} us per layer{comm})"
        )


def predict(workload: Workload, processor: Processor, link: Link | None) -> DecodeSpeed:
    """The ceiling and the expected batch-1 decode speed of ``workload`` on ``processor``."""
    bandwidth = processor.memory_bandwidth_bytes_per_second
    if bandwidth <= 0:
        raise UsageError(
            "the memory bandwidth must be positive", hint="e.g. --memory-bandwidth 20GB/s"
        )
    costs = (CPU_CLASSES if processor.kind == "cpu" else GPU_CLASSES)[workload.arch_class]
    weights = sum(workload.weight_bytes_per_stage)
    kv = sum(workload.kv_bytes_per_stage)
    count = workload.collectives if link is not None and _multi(workload) else 0
    latency = link.latency_at(max(2, workload.tensor_parallel)) if count and link else 0.0
    if count and processor.kind == "gpu":
        latency = decode_costs.collective_seconds(latency, graphs=workload.graphs)
    moved = _moved_bytes(workload, link) if count else 0.0
    comm = count * latency + moved
    least = sum(workload.ceiling_weight_bytes_per_stage or workload.weight_bytes_per_stage)
    ceiling = (least + kv) / bandwidth
    eff_bw = bandwidth * costs.bandwidth_efficiency
    per_layer = costs.per_layer_seconds
    if processor.kind == "gpu" and workload.blocks:
        per_layer = decode_costs.blocks_seconds(
            workload.blocks,
            graphs=workload.graphs,
            weight_format=workload.weight_format,
            shared_experts=workload.shared_experts,
        ) / max(1, workload.num_layers)
    elif processor.kind == "gpu":
        per_layer = decode_costs.per_layer_seconds(
            workload.arch_class,
            graphs=workload.graphs,
            shared_experts=workload.shared_experts,
            weight_format=workload.weight_format,
            model_type=workload.model_type,
        )
    fixed = workload.num_layers * per_layer
    weights_bw = eff_bw * decode_costs.format_efficiency(workload.weight_format)
    terms = {
        "weights": weights / weights_bw,
        "kv_cache": kv / eff_bw,
        "collectives": comm,
        "per_layer_latency": fixed,
    }
    expected = sum(terms.values())
    busiest = max(
        (
            w + k
            for w, k in zip(
                workload.weight_bytes_per_stage, workload.kv_bytes_per_stage, strict=True
            )
        ),
        default=0,
    )
    return DecodeSpeed(
        ceiling_tokens_per_s=_rate(ceiling),
        expected_tokens_per_s=_rate(expected),
        bound_by=max(terms, key=lambda k: terms[k]),
        bytes_per_token_per_gpu=busiest,
        collectives_per_token=count,
        collective_latency_seconds=latency,
        processor=processor.name,
        bandwidth_bytes_per_second=bandwidth,
        bandwidth_source=processor.bandwidth_source,
        interconnect=link.name if link is not None else "",
        bandwidth_efficiency=costs.bandwidth_efficiency,
        per_layer_seconds=per_layer,
        arch_class=workload.arch_class,
        device_kind=processor.kind,
        busiest_experts=workload.busiest_experts,
        experts_per_token=workload.experts_per_token,
    )


def _multi(w: Workload) -> bool:
    return w.tensor_parallel > 1 or len(w.weight_bytes_per_stage) > 1


def _moved_bytes(w: Workload, link: Link | None) -> float:
    """Seconds the payload of every collective spends on the link (a ring moves 2(n-1)/n)."""
    if link is None or link.bandwidth_bytes_per_second <= 0:
        return 0.0
    n = max(1, w.tensor_parallel)
    ring = 2 * (n - 1) / n
    return w.collectives * ring * w.payload_bytes / link.bandwidth_bytes_per_second


def _rate(seconds: float) -> float:
    """Tokens per second to four significant digits."""
    return float(f"{1.0 / seconds:.4g}") if seconds > 0 else math.inf


def _size(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


# --- the workload of a planned vLLM setup --------------------------------------------------


@dataclass(frozen=True, slots=True)
class DecodeSetup:
    """The decode settings that the memory plan does not need."""

    interconnect: str | None = None  # None: the GPU catalog's
    decode_context_parallel_size: int = 1
    context_tokens: int = 0
    custom_all_reduce: bool = True  # False: --disable-custom-all-reduce
    nnodes: int = 1  # --nnodes: the nodes the instance's GPUs are split over
    network: str | None = None  # --node-interconnect (None: decode_links.DEFAULT_NETWORK)


def setup_link(
    gpu: GpuModel | None, setup: DecodeSetup, *, tensor_parallel: int, world: int
) -> Link:
    """The link of a setup: the GPUs' (:func:`gpu_link`), NCCL's all-reduce without the custom
    kernel, and the network when its ``world`` GPUs split over ``setup.nnodes`` nodes leave a TP
    group on several (:func:`~bringup.core.plan.decode_links.tp_nodes`)."""
    nnodes = setup.nnodes
    if nnodes < 1 or world % nnodes:
        raise UsageError(
            f"--nnodes {nnodes} must divide the {world} GPUs of the instance",
            hint="each node runs the same number of GPUs (vLLM's and SGLang's --nnodes)",
        )
    if setup.network is not None and nnodes == 1:
        raise UsageError(
            f"--node-interconnect {setup.network} needs --nnodes 2 or more",
            hint="it is the network between the nodes the instance spans",
        )
    if setup.network is not None and setup.network not in NETWORKS:
        raise UsageError(
            f"--node-interconnect {setup.network}: unknown",
            hint=f"use one of {', '.join(NETWORKS)}",
        )
    link = gpu_link(gpu, setup.interconnect)
    nodes = tp_nodes(tensor_parallel, world, nnodes)
    network = (setup.network or DEFAULT_NETWORK) if nodes > 1 else ""
    return dataclasses.replace(
        link, custom_all_reduce=setup.custom_all_reduce, nodes=nodes, network=network
    )


def gpu_processor(gpu: GpuModel, bandwidth_bytes_per_second: float | None = None) -> Processor:
    """One GPU of the catalog (its vendor peak bandwidth, unless one is given)."""
    if bandwidth_bytes_per_second:
        return Processor(gpu.name, "gpu", bandwidth_bytes_per_second, "given")
    return Processor(gpu.name, "gpu", gpu.memory_bandwidth_bytes_per_second, "vendor peak")


def arch_class(arch: Architecture) -> str:
    """``"mla"`` (DeepSeek/Kimi: MLA, usually with MoE), ``"moe"`` or ``"dense"``."""
    if arch.mla is not None:
        return "mla"
    return "moe" if arch.moe is not None else "dense"


def check_setup(setup: DecodeSetup, tensor_parallel: int) -> None:
    """UsageError for decode settings vLLM would refuse."""
    if setup.interconnect is not None and setup.interconnect not in INTERCONNECTS:
        raise UsageError(
            f"--interconnect {setup.interconnect}: unknown",
            hint=f"use one of {', '.join(INTERCONNECTS)}",
        )
    dcp = setup.decode_context_parallel_size
    if dcp < 1 or tensor_parallel % dcp:
        raise UsageError(
            f"--decode-context-parallel-size {dcp} must divide the tensor parallel size {tensor_parallel}",
            hint="decode context parallelism shards the KV cache within the TP group",
        )
    if setup.context_tokens < 0:
        raise UsageError("--context-tokens must be 0 or more")


def vllm_workload(
    arch: Architecture,
    tensors: Sequence[TensorInfo],
    *,
    tensor_parallel: int,
    pipeline_parallel: int,
    expert_parallel: bool,
    kv_cache_dtype: str,
    setup: DecodeSetup,
    enforce_eager: bool = False,
    weight_format: str = "none",
) -> Workload:
    """The per-token cost of ``arch`` under vLLM's parallel layout (weights placed by
    :func:`~bringup.core.plan.weights.weights_per_stage`, KV by :func:`~bringup.core.plan.kv.kv_spec`)."""
    tp, pp = tensor_parallel, pipeline_parallel
    par = Parallel(tp, pp, expert_parallel)
    read = _read_tensors(tensors)
    stages = weights_per_stage(read, arch, par)
    moe = arch.moe
    share, busiest = 1.0, 0.0
    least = None
    if moe and expert_parallel and tp > 1:
        held = -(-moe.num_experts // tp)  # what the busiest rank holds: expert_bytes below
        busiest = busiest_experts(moe.num_experts, moe.experts_per_token, tp)
        share = busiest / held
        least = -(-min(moe.experts_per_token, moe.num_experts) // tp) / held
    elif moe:
        share = min(moe.experts_per_token, moe.num_experts) / moe.num_experts
    weight_bytes = tuple(
        s.vocab_bytes + s.sharded_bytes + s.replicated_bytes + round(s.expert_bytes * share)
        for s in stages
    )
    ceiling_bytes = (
        tuple(
            s.vocab_bytes + s.sharded_bytes + s.replicated_bytes + round(s.expert_bytes * least)
            for s in stages
        )
        if least is not None
        else ()
    )
    dcp = max(1, setup.decode_context_parallel_size)
    kv_bytes = tuple(
        kvmod.kv_spec(arch, s.layers, tp, kv_cache_dtype).bytes_per_token
        * setup.context_tokens
        // dcp
        for s in stages
    )
    layers = arch.num_layers
    moe_layers = layers - len(moe.dense_layers) if moe else 0
    attention_layers = sum(1 for k in arch.layer_kinds if k in ("full", "sliding"))
    # a Nemotron-H block is one mixer or one feed-forward: one row-parallel output, one all-reduce
    per_layer = 1 if arch.blocks is not None else 2
    allreduces = all_to_alls = 0
    if tp > 1:
        ep_layers = moe_layers if expert_parallel else 0
        allreduces = per_layer * layers - ep_layers + 2  # + vocab embedding and logits gather
        all_to_alls = 2 * ep_layers
        if dcp > 1:
            allreduces += 2 * attention_layers
        if arch.model_type in VARIANCE_ALL_REDUCE_MODEL_TYPES:
            allreduces += attention_layers
    return Workload(
        weight_bytes_per_stage=weight_bytes,
        kv_bytes_per_stage=kv_bytes,
        num_layers=layers,
        arch_class=arch_class(arch),
        allreduces=allreduces,
        payload_bytes=arch.hidden_size * arch.dtype_bytes,
        tensor_parallel=tp,
        all_to_alls=all_to_alls,
        sends=pp - 1,
        busiest_experts=busiest,
        experts_per_token=moe.experts_per_token if moe and busiest else 0,
        ceiling_weight_bytes_per_stage=ceiling_bytes,
        graphs=not enforce_eager,
        weight_format=weight_format,
        shared_experts=bool(moe and moe.shared_intermediate_size),
        model_type=arch.model_type,
        blocks=arch.blocks or (),
    )


def workload_for(
    arch: Architecture, tensors: Sequence[TensorInfo], s: Settings, setup: DecodeSetup
) -> Workload:
    """:func:`vllm_workload` under the plan's resolved settings."""
    return vllm_workload(
        arch,
        tensors,
        tensor_parallel=s.tensor_parallel_size,
        pipeline_parallel=s.pipeline_parallel_size,
        expert_parallel=s.enable_expert_parallel,
        kv_cache_dtype=s.kv_cache_dtype,
        setup=setup,
        enforce_eager=s.enforce_eager,
        weight_format=format_from_config(arch.quantization, s.quantization).method,
    )


def _read_tensors(tensors: Sequence[TensorInfo]) -> list[TensorInfo]:
    """The tensors a decode step reads in full: all but an untied input embedding."""
    has_head = any(_LM_HEAD.search(t.name) for t in tensors)
    if not has_head:
        return list(tensors)  # tied: the embedding matrix is the LM head
    return [t for t in tensors if not _INPUT_EMBEDDING.search(t.name)]


# --- the workload of a GGUF model (llama.cpp, one device) ----------------------------------


def gguf_workload(
    metadata: dict[str, object] | None,
    tensors: Sequence[TensorInfo],
    *,
    kv_bytes_per_token: float,
    context_tokens: int,
) -> Workload:
    """The per-token cost of a GGUF model on one device: every tensor but the input embedding
    (when an ``output.weight`` exists), routed experts by ``expert_used_count / expert_count``,
    and ``kv_bytes_per_token`` (from :mod:`bringup.core.gguf_plan`) times the context."""
    meta = metadata or {}
    arch = str(meta.get("general.architecture", ""))
    experts = _meta_int(meta, f"{arch}.expert_count")
    used = _meta_int(meta, f"{arch}.expert_used_count")
    share = min(used, experts) / experts if experts and used else 1.0
    weights = 0
    for t in _read_tensors(tensors):
        weights += round(t.nbytes * share) if _EXPERT_GGUF.search(t.name) else t.nbytes
    layers = _meta_int(meta, f"{arch}.block_count")
    hidden = _meta_int(meta, f"{arch}.embedding_length")
    mla = bool(meta.get(f"{arch}.attention.kv_lora_rank"))
    return Workload(
        weight_bytes_per_stage=(weights,),
        kv_bytes_per_stage=(round(kv_bytes_per_token * context_tokens),),
        num_layers=layers,
        arch_class="mla" if mla else ("moe" if experts else "dense"),
        allreduces=0,
        payload_bytes=hidden * 4,
        tensor_parallel=1,
    )


def _meta_int(meta: dict[str, object], key: str) -> int:
    value = meta.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
