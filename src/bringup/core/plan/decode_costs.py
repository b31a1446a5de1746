"""What makes a real batch-1 decode step slower than its bytes: the fixed costs per layer.

At batch 1 a decoder layer is a chain of small kernels, each of which costs a launch and a
ramp-up/tail even when it moves little data. Per token, on top of the bytes read at an
efficiency below peak (:mod:`.decode`)::

    fixed = layers x kernels per layer x time per kernel

**Time per kernel**: in a CUDA graph 3.4 us, launched one by one from a stream 3.8 us: the
NVIDIA technical blog "Getting Started with CUDA Graphs" (A. Gray, 2019,
developer.nvidia.com/blog/cuda-graphs) times a short kernel (2.9 us of work) launched 20 x
1000 times on a V100 both ways. Without graphs (``--enforce-eager``) each kernel is also a
PyTorch operator dispatched from Python: :data:`EAGER_KERNEL_SECONDS`, 10 us, is an
approximation of that overhead (the order of magnitude PyTorch's dispatcher and vLLM's Python
layer code add per operator), not a measurement; the plan says so.

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

**INT4 experts through Marlin** (vLLM's ``fused_marlin_moe``: AWQ, GPTQ and compressed-tensors
W4A16 MoE checkpoints): one call at one token takes 0.127-0.142 ms whatever the shape
(E x K x N x top-k of 8 x 4096 x 14336 x 2, 256 x 7168 x 2048 x 8 and 512 x 4096 x 1024 x
10, vLLM's CUDA kernel timed on an H20 in flagos-ai/FlagGems#3375), well above what its bytes
need: :data:`MARLIN_MOE_CALL_SECONDS` replaces the expert kernels' launches in each MoE layer.

**Bandwidth efficiency per weight format** (multiplies the class's efficiency in
:mod:`.decode`): BF16/FP16 and FP8 stream their bytes alike (1.0); INT4 through the Marlin
kernels (AWQ, GPTQ, compressed-tensors W4A16) reaches 3.87 x of FP16's speed where 4 x is
ideal at batch 1-16 (Frantar et al., "MARLIN: Mixed-Precision Auto-Regressive Parallel
Inference on Large Language Models", arXiv:2408.11743, 2024): 0.97. NVFP4 and MXFP4: no
public batch-1 bandwidth figure was found; 1.0 (the plan does not derate them).
"""

from __future__ import annotations

GRAPH_KERNEL_SECONDS = 3.4e-6  # one kernel replayed from a CUDA graph (NVIDIA blog, above)
EAGER_KERNEL_SECONDS = 10e-6  # one PyTorch operator launched eagerly (an approximation)
KERNELS_PER_LAYER: dict[str, int] = {"dense": 11, "moe": 16, "mla": 26}
SHARED_EXPERT_KERNELS = 3  # gate_up, activation, down of a shared expert
FORMAT_EFFICIENCY: dict[str, float] = {"int4": 0.97, "awq": 0.97, "gptq": 0.97}
MARLIN_MOE_CALL_SECONDS = 130e-6  # fused_marlin_moe at M=1 (flagos-ai/FlagGems#3375, H20)
MARLIN_MOE_FORMATS = frozenset({"int4", "awq", "gptq"})
EXPERT_KERNELS = 4  # the two grouped GEMMs, the activation and moe_sum the Marlin call replaces


def kernels_per_layer(arch_class: str, *, shared_experts: bool = False) -> int:
    """Kernels one decoder layer launches at batch 1 (module docstring)."""
    base = KERNELS_PER_LAYER.get(arch_class, KERNELS_PER_LAYER["dense"])
    return base + (SHARED_EXPERT_KERNELS if shared_experts and arch_class == "moe" else 0)


def per_layer_seconds(
    arch_class: str, *, graphs: bool, shared_experts: bool = False, weight_format: str = "none"
) -> float:
    """The fixed time of one layer: its kernels at the graph (or eager) time per kernel, with
    a Marlin MoE call in place of the expert kernels for INT4 experts."""
    each = GRAPH_KERNEL_SECONDS if graphs else EAGER_KERNEL_SECONDS
    kernels = kernels_per_layer(arch_class, shared_experts=shared_experts)
    if arch_class != "dense" and weight_format in MARLIN_MOE_FORMATS:
        return (kernels - EXPERT_KERNELS) * each + MARLIN_MOE_CALL_SECONDS
    return kernels * each


def format_efficiency(method: str) -> float:
    """How much of the class's bandwidth efficiency a weight format keeps at batch 1."""
    return FORMAT_EFFICIENCY.get(method, 1.0)
