"""The non-weight, non-KV memory of one GPU rank: activations, sampler, graphs, non-torch.

All are estimates (vLLM measures them at startup); each function says what it counts.

**Sampler warmup transient** (engines.md 1.7): after the KV pool is allocated and the CUDA
graphs are captured, vLLM runs the sampler on ``N = min(max_num_seqs,
max_num_batched_tokens)`` dummy requests over the padded vocabulary ``V``. At its peak
(the scatter at the end of the PyTorch top-k/top-p path) these ``[N, V]`` tensors are alive
together, in bytes per element:

====  ==========================================================================
 2    logits in the model dtype (held by ``_dummy_sampler_run``)
 4    the fp32 copy the sampler works on (``logits.to(torch.float32)``)
 4    sorted values (``logits.sort``)
 8    int64 sort indices — with the values, the 12·N·V "Tried to allocate" of vllm#15105
 4    softmax of the sorted logits (top-p)
 2    the top-k and top-p boolean masks
 4    the scattered result
====  ==========================================================================

28 bytes per element: :data:`SAMPLER_BYTES_PER_ELEMENT`. For MiniMax-M2.5 (V = 200,064)
at N = 1,024 that is 5.34 GiB. The profile run ends with the same sampler pass, so the
activation peak is the larger of the forward (with its logits) and this transient: the
measured non-KV memory of gpt-oss-120b on one H100 (about 7.5 GiB at N = 1,024, vllm#23278,
vllm#27508) is only explained with the sampler counted. The warmup pass after the KV pool
is charged again, to the memory outside the budget (see ``budget``).
"""

from __future__ import annotations

from bringup.core.plan.arch import Architecture
from bringup.units import MiB

SAMPLER_BYTES_PER_ELEMENT = 28
PROFILE_LOGITS_BYTES_PER_ELEMENT = 6  # model-dtype logits + their fp32 copy
KERNEL_WORKSPACE_BYTES = 256 * MiB  # attention / GEMM / MoE workspaces seen by torch
GRAPH_BYTES_PER_LAYER_PER_SIZE_DENSE = round(0.40 * MiB)  # fitted: Llama-3-8B on H100, 0.67 GiB
GRAPH_BYTES_PER_LAYER_PER_SIZE_MOE = round(
    0.70 * MiB
)  # fitted: Qwen3-235B TP8 EP on L40S, 3.45 GiB
CUDA_CONTEXT_BYTES = 512 * MiB  # CUDA context and cuBLAS handles, before vLLM's snapshot
NCCL_BYTES = 256 * MiB  # NCCL communicators and buffers (TP/PP > 1), before the snapshot
NON_TORCH_GROWTH_BYTES = 96 * MiB  # non-torch growth during profiling, single GPU
NON_TORCH_GROWTH_DISTRIBUTED_BYTES = 256 * MiB  # with TP/PP > 1 (collectives' workspaces)
VOCAB_PADDING = 64


def padded_vocab(arch: Architecture) -> int:
    """The vocabulary rounded up to vLLM's padding (a multiple of 64)."""
    return -(-arch.vocab_size // VOCAB_PADDING) * VOCAB_PADDING


def sampler_requests(max_num_seqs: int, max_num_batched_tokens: int) -> int:
    """How many dummy requests the sampler warmup uses."""
    return min(max_num_seqs, max_num_batched_tokens)


def sampler_warmup_bytes(arch: Architecture, max_num_seqs: int, max_num_batched_tokens: int) -> int:
    """The sampler warmup transient on one rank (see the module docstring)."""
    n = sampler_requests(max_num_seqs, max_num_batched_tokens)
    return n * padded_vocab(arch) * SAMPLER_BYTES_PER_ELEMENT


def activation_peak_bytes(
    arch: Architecture,
    tp: int,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    *,
    last_stage: bool = True,
    expert_parallel: bool = False,
) -> int:
    """Peak torch memory of the profile run above the weights, one rank.

    The dummy forward of ``max_num_batched_tokens`` tokens: residual and normed hidden
    states, the QKV and MLP (or fused-MoE) intermediates of one layer, and on the last stage
    the logits of ``min(max_num_seqs, max_num_batched_tokens)`` rows, plus kernel workspaces.
    """
    t, h, d = max_num_batched_tokens, arch.hidden_size, arch.dtype_bytes
    hidden = 6 * t * h * d
    qkv = t * (arch.num_heads + 2 * arch.num_kv_heads) * arch.head_dim * d // tp
    if arch.moe is not None:
        inter = arch.moe.intermediate_size if expert_parallel else arch.moe.intermediate_size // tp
        routed = t * arch.moe.experts_per_token // (tp if expert_parallel else 1)
        mlp = routed * (3 * inter + h) * d + t * arch.moe.num_experts * 4
    else:
        mlp = 3 * t * (arch.intermediate_size // tp) * d
    forward = hidden + qkv + mlp
    if last_stage:
        rows = sampler_requests(max_num_seqs, t) * padded_vocab(arch)
        # the forward's activations are freed before the sampler runs: the peak is the larger
        forward = max(
            forward + rows * PROFILE_LOGITS_BYTES_PER_ELEMENT, rows * SAMPLER_BYTES_PER_ELEMENT
        )
    return forward + KERNEL_WORKSPACE_BYTES


def capture_sizes(max_num_seqs: int) -> int:
    """How many batch sizes vLLM captures: 1, 2, 4, then steps of 8 to 256, of 16 beyond,
    up to ``min(2 x max_num_seqs, 512)``."""
    top = min(2 * max_num_seqs, 512)
    sizes = [s for s in (1, 2, 4) if s <= top]
    sizes += list(range(8, min(top, 255) + 1, 8))
    sizes += list(range(256, top + 1, 16)) if top >= 256 else []
    return len(sizes)


def cuda_graph_bytes(
    arch: Architecture, layers_on_rank: int, max_num_seqs: int, *, enforce_eager: bool
) -> int:
    """The CUDA graph pool on one rank: a per-layer, per-captured-size cost (fitted to logs)."""
    if enforce_eager:
        return 0
    per = GRAPH_BYTES_PER_LAYER_PER_SIZE_MOE if arch.moe else GRAPH_BYTES_PER_LAYER_PER_SIZE_DENSE
    largest = min(2 * max_num_seqs, 512)
    buffers = largest * (6 * arch.hidden_size) * arch.dtype_bytes
    return layers_on_rank * capture_sizes(max_num_seqs) * per + buffers


def context_bytes(world_size: int) -> int:
    """Memory used before vLLM's snapshot (CUDA context, NCCL): outside the budget."""
    return CUDA_CONTEXT_BYTES + (NCCL_BYTES if world_size > 1 else 0)


def non_torch_growth_bytes(world_size: int) -> int:
    """Non-torch memory that appears during profiling (inside the budget)."""
    return NON_TORCH_GROWTH_DISTRIBUTED_BYTES if world_size > 1 else NON_TORCH_GROWTH_BYTES
