"""What makes a real batch-1 decode step slower than its bytes: the fixed costs per layer.

At batch 1 a decoder layer is a chain of small kernels, each of which costs a launch and a
ramp-up/tail even when it moves little data. Per token, on top of the bytes read at an
efficiency below peak (:mod:`.decode`)::

    fixed = layers x kernels per layer x time per kernel

**Time per kernel**: in a CUDA graph 3.4 us, launched one by one from a stream 3.8 us: the
NVIDIA technical blog "Getting Started with CUDA Graphs" (A. Gray, 2019,
developer.nvidia.com/blog/cuda-graphs) times a short kernel (2.9 us of work) launched 20 x
1000 times on a V100 both ways. Without graphs (``--enforce-eager``) each kernel is also a
PyTorch operator dispatched from Python, and torch.compile's fusions are off too (vLLM compiles
only when it captures graphs): :data:`EAGER_KERNEL_SECONDS`, 34 us, from vllm-project/vllm-omni#7960
(vLLM 0.29, Qwen2.5-Omni-7B's thinker, a Qwen2.5-7B decoder of 28 layers, on A800: TPOT about
22.5 ms eager against 13 ms with graphs, the only difference between the two runs): 9.5 ms over
28 layers x 11 kernels is 31 us more per kernel than the graph's 3.4 us. It is one public
measurement of one engine on one host (a slower host CPU dispatches slower), not a bound.

**Kernels per layer**, counted in vLLM's layer code at batch 1 (collectives are counted
apart, by :mod:`.decode`):

- dense (``llama.py``: fused add + RMSNorm, QKV GEMM, rotary, KV-cache write, attention and
  its split-KV combine, o_proj, fused add + RMSNorm, gate_up GEMM, SiLU-and-mul, down GEMM):
  11;
- MoE (``qwen3_moe.py``/``mixtral.py``, ``fused_moe.py``): the attention part (7, plus the
  q/k norms of Qwen3), the post-attention norm, the router GEMM, ``topk_softmax``,
  ``moe_align_block_size``, the two grouped expert GEMMs, SiLU-and-mul and ``moe_sum``: 16,
  3 more with shared experts;
- MLA with MoE (``deepseek_v2.py``: fused q_a/kv_a projection, two latent norms, q_b, the
  absorbed ``W_UK`` and ``W_UV`` batched GEMMs, rotary, cache write, the MLA decode kernel and
  its combine, o_proj; the grouped top-k router's few kernels; the experts and the shared
  expert): 26.
- per-head q/k RMSNorms (Qwen3's ``qwen3.py``/``qwen3_moe.py`` ``q_norm``/``k_norm``;
  MiniMax-M2's norm over the whole q and k projections, ``minimax_rms_norm/rms_norm_tp.py``,
  whose variance is all-reduced under TP: that collective is counted by :mod:`.decode`): 2 more
  (:data:`QK_NORM_MODEL_TYPES`);
- weights whose activations are quantized too (FP8, INT8, NVFP4, MXFP8: W8A8/W4A4): one more
  kernel before each quantized GEMM, the input's quantization (``fused_moe.py`` calls
  ``moe_kernel_quantize_input`` before each of the two expert GEMMs, ``fused_moe/utils.py``:
  ``per_token_group_quant_fp8``, ``scaled_fp8_quant``, ``scaled_fp4_quant``; the W8A8 linear
  ops quantize their input the same way, ``quantization/utils/fp8_utils.py``):
  :data:`QUANTIZED_GEMMS` per layer (dense: qkv, o, gate_up, down; MoE: qkv, o and the two
  expert GEMMs, two more with shared experts; MLA: the fused q_a/kv_a, q_b, o, the experts' two
  and the shared expert's two). INT4 W4A16 (AWQ, GPTQ) and BF16 do not quantize activations.

**Nemotron-H** (``nemotron_h.py``): each layer is one block, a fused add + RMSNorm and one
mixer, so a block launches fewer kernels than a decoder layer (:data:`BLOCK_KERNELS`): a Mamba-2
block its in_proj GEMM, ``causal_conv1d_update``, ``selective_state_update``, the gated RMSNorm
and out_proj (6 with the norm); an attention block (no rotary embedding in
``NemotronHAttention``) its QKV GEMM, the KV-cache write, the attention kernel and its combine,
o_proj (6); an MLP block up GEMM, relu², down GEMM (4); an MoE block the router GEMM, the
grouped top-k, ``moe_align_block_size``, the two expert GEMMs, the activation and ``moe_sum``
(8), and a shared expert's up, activation and down (3 more). Quantized activations add one
kernel per quantized GEMM (:data:`BLOCK_QUANTIZED_GEMMS`, the shared expert's two as well).

**Collectives under eager mode**: inside a CUDA graph a small all-reduce costs the link's
latency (:mod:`.decode`); launched eagerly it is one more operator dispatched from Python (vLLM's
``tensor_model_parallel_all_reduce``, a registered custom op, then the device communicator's
NCCL or custom all-reduce call), so when the host is the bottleneck it costs at least
:data:`EAGER_KERNEL_SECONDS`, the same per-operator time as a kernel
(:func:`collective_seconds`: the larger of the two; the GPU's part overlaps the dispatch).

**INT4 experts through Marlin** (vLLM's ``fused_marlin_moe``: AWQ, GPTQ and compressed-tensors
W4A16 MoE checkpoints) launch the same kinds of kernels as other experts (align, the two
grouped GEMMs, the activation, the sum) and are counted like them. The one public timing of
the call, 0.127-0.143 ms per call at one token on an H20 whatever the shape (E x K x N x top-k of
8 x 4096 x 14336 x 2, 256 x 7168 x 2048 x 8 and 512 x 4096 x 1024 x 10: 63 to 176 MB of INT4
weights, flagos-ai/FlagGems#3222 and #3375), is not a cost to add inside a CUDA graph: it is
flat over a 2.8x range of bytes, so it is not the H20's 4.0 TB/s at work; FlagGems' harness
times Python calls launched from the host, one by one (``benchmark/performance_utils.py``:
wall time or ``triton.testing.do_bench``, no graph), and those shapes are whole experts, not one
GPU's 1/TP share. It agrees with the eager time per kernel instead (4 host-launched kernels x
34 us = 136 us), which is how it is counted under ``--enforce-eager``. (Until issue 25's second
round the plan added it to every MoE layer in graphs as well: :data:`MARLIN_MOE_CALL_SECONDS`
stays for the record, unused.)

**Bandwidth efficiency per weight format** (multiplies the class's efficiency in
:mod:`.decode`): BF16/FP16 and FP8 stream their bytes alike (1.0); INT4 through the Marlin
kernels (AWQ, GPTQ, compressed-tensors W4A16) reaches 3.87 x of FP16's speed where 4 x is
ideal at batch 1-16 (Frantar et al., "MARLIN: Mixed-Precision Auto-Regressive Parallel
Inference on Large Language Models", arXiv:2408.11743, 2024): 0.97. NVFP4 and MXFP4: no
public batch-1 bandwidth figure was found; 1.0 (the plan does not derate them).
"""

from __future__ import annotations

GRAPH_KERNEL_SECONDS = 3.4e-6  # one kernel replayed from a CUDA graph (NVIDIA blog, above)
EAGER_KERNEL_SECONDS = 34e-6  # one kernel launched eagerly (vllm-project/vllm-omni#7960, above)
KERNELS_PER_LAYER: dict[str, int] = {"dense": 11, "moe": 16, "mla": 26}
SHARED_EXPERT_KERNELS = 3  # gate_up, activation, down of a shared expert
QK_NORM_KERNELS = 2  # q and k RMSNorm (or MiniMax-M2's variance and apply kernels)
QK_NORM_MODEL_TYPES = frozenset({"qwen3", "qwen3_moe", "minimax_m2"})
ACTIVATION_QUANT_FORMATS = frozenset({"fp8", "fp8-channel", "int8", "nvfp4", "mxfp8"})
QUANTIZED_GEMMS: dict[str, int] = {"dense": 4, "moe": 4, "mla": 7}
SHARED_EXPERT_GEMMS = 2  # a shared expert's gate_up and down (MoE classes; MLA counts them)
FORMAT_EFFICIENCY: dict[str, float] = {"int4": 0.97, "awq": 0.97, "gptq": 0.97}
# Nemotron-H's blocks at batch 1 (nemotron_h.py, module docstring); quantized GEMMs per block
BLOCK_KERNELS: dict[str, int] = {"mamba": 6, "attention": 6, "mlp": 4, "moe": 8}
BLOCK_QUANTIZED_GEMMS: dict[str, int] = {"mamba": 2, "attention": 2, "mlp": 2, "moe": 2}
MARLIN_MOE_CALL_SECONDS = 130e-6  # fused_marlin_moe at M=1, host-launched (FlagGems#3375): unused


def kernels_per_layer(
    arch_class: str,
    *,
    shared_experts: bool = False,
    model_type: str = "",
    weight_format: str = "none",
) -> int:
    """Kernels one decoder layer launches at batch 1 (module docstring)."""
    base = KERNELS_PER_LAYER.get(arch_class, KERNELS_PER_LAYER["dense"])
    shared = shared_experts and arch_class == "moe"
    base += SHARED_EXPERT_KERNELS if shared else 0
    base += QK_NORM_KERNELS if model_type in QK_NORM_MODEL_TYPES else 0
    if weight_format in ACTIVATION_QUANT_FORMATS:
        gemms = QUANTIZED_GEMMS.get(arch_class, QUANTIZED_GEMMS["dense"])
        base += gemms + (SHARED_EXPERT_GEMMS if shared else 0)
    return base


def per_layer_seconds(
    arch_class: str,
    *,
    graphs: bool,
    shared_experts: bool = False,
    weight_format: str = "none",
    model_type: str = "",
) -> float:
    """The fixed time of one layer: its kernels at the graph (or eager) time per kernel."""
    each = GRAPH_KERNEL_SECONDS if graphs else EAGER_KERNEL_SECONDS
    kernels = kernels_per_layer(
        arch_class,
        shared_experts=shared_experts,
        model_type=model_type,
        weight_format=weight_format,
    )
    return kernels * each


def format_efficiency(method: str) -> float:
    """How much of the class's bandwidth efficiency a weight format keeps at batch 1."""
    return FORMAT_EFFICIENCY.get(method, 1.0)


def block_kernels(
    blocks: tuple[str, ...], *, weight_format: str = "none", shared_experts: bool = False
) -> int:
    """Kernels a Nemotron-H model's blocks launch per token at batch 1 (module docstring)."""
    quantized = weight_format in ACTIVATION_QUANT_FORMATS
    total = 0
    for b in blocks:
        total += BLOCK_KERNELS.get(b, KERNELS_PER_LAYER["dense"])
        total += BLOCK_QUANTIZED_GEMMS.get(b, 0) if quantized else 0
        if b == "moe" and shared_experts:
            total += SHARED_EXPERT_KERNELS + (SHARED_EXPERT_GEMMS if quantized else 0)
    return total


def blocks_seconds(
    blocks: tuple[str, ...],
    *,
    graphs: bool,
    weight_format: str = "none",
    shared_experts: bool = False,
) -> float:
    """The fixed time of a Nemotron-H model's blocks per token (graph or eager per kernel)."""
    each = GRAPH_KERNEL_SECONDS if graphs else EAGER_KERNEL_SECONDS
    kernels = block_kernels(blocks, weight_format=weight_format, shared_experts=shared_experts)
    return kernels * each


def collective_seconds(latency: float, *, graphs: bool) -> float:
    """One small collective: the link's latency in a CUDA graph; launched eagerly, at least the
    time Python takes to dispatch one operator (module docstring)."""
    return latency if graphs else max(latency, EAGER_KERNEL_SECONDS)
