"""The twin's GPU memory model: what each GPU holds at each step, and which failures fit.

Numbers are per GPU (per TP rank), for a MiniMax-M2.5-like FP8 model: 230 GB of weights
split over ``tp`` ranks (57.5 GB = 53.55 GiB at TP4), 62 layers, 8 KV heads of dimension 128
(``max(1, 8 // tp)`` per rank), a vocabulary of 200064, on the default GPU of
102005473280 bytes (95 GiB). The steps mirror vLLM 0.33 (engines.md 1.6):

1. ``init_device``: the CUDA context, cuBLAS and (TP > 1) NCCL buffers are allocated
   (``context_bytes``) *before* vLLM's memory snapshot, so they come out of the
   ``(1 - utilization)`` slack. The snapshot check fails (``Free memory on device ...``)
   when ``free < ceil(total x utilization)``; free counts other processes' memory.
2. weights load (``weights_bytes``), then the profile run leaves the activation workspace
   (``activation_bytes``, scaling with ``max_num_batched_tokens``) cached by the allocator.
3. 0.33 estimates the CUDA graph pool during profiling and charges it to the budget:
   ``kv_bytes = requested - weights - non_torch - activation - graph pool``; after the KV pool
   and the graphs the process holds ``context + requested``.
4. **The sampler warmup rule** (``oom_warmup``): vLLM 0.33 runs the V2 model runner, whose
   profile run samples without top-k/top-p/logprobs, so its peak holds only the logits; the
   warmup after the KV pool samples with all of them and needs ``min(max_num_seqs,
   max_num_batched_tokens)`` x vocabulary x 12 bytes more (three fp32 tensors: the logits'
   fp32 copy, the top-k/top-p output, the logprobs' log-softmax; ``bringup.core.plan.peaks``
   names the vLLM files). Nothing in the budget is reserved for that extra, so it must fit in
   ``total - utilization x total - context``. At 0.92 and 0.95 1024 requests fit (2.29 GiB
   against 6.60 and 3.75 GiB); at 0.97 they do not (against 1.85 GiB), while 768 (1.72 GiB)
   do. The ``oom_warmup`` scenario therefore starts at 0.97, as deployments pushing for KV
   cache do.
5. **The KV rule** (``kv_insufficient``): one request of ``max_model_len`` tokens needs
   ``ceil(len / 16) x 16 x bytes_per_token``; when that exceeds ``kv_bytes`` the start
   fails, naming the estimated maximum model length ``floor(kv / (16 x bpt)) x 16``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bringup.units import GiB

GPU_TOTAL_BYTES = 102005473280
GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell"
DEFAULT_GPU_COUNT = 4
MODEL_WEIGHTS_BYTES = 230_000_000_000  # 230 GB: 57.5 GB per GPU at TP4
NUM_LAYERS = 62
NUM_KV_HEADS = 8
HEAD_DIM = 128
KV_DTYPE_BYTES = 2
VOCAB_SIZE = 200064
BLOCK_SIZE = 16
SAMPLER_BYTES_PER_ELEMENT = 12  # beyond the profile run: see rule 4 in the module docstring
SORT_BYTES_PER_ELEMENT = 12  # what the OOM message says was tried (the whole extra at once)
NON_TORCH_BYTES = int(0.30 * GiB)
ACTIVATION_BYTES_PER_TOKEN = 256 * 1024
CONTEXT_BYTES = int(0.50 * GiB)
NCCL_BYTES = int(0.50 * GiB)
GRAPH_BASE_BYTES = int(0.35 * GiB)
PIECEWISE_GRAPH_BYTES = int(0.06 * GiB)
FULL_GRAPH_BYTES = int(0.03 * GiB)
MAX_CAPTURE_SIZE = 512


@dataclass(frozen=True)
class MemoryPlan:
    """Per-GPU bytes of one start, derived from the flags."""

    total_bytes: int
    tp: int
    utilization: float
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int

    @property
    def requested_bytes(self) -> int:
        return math.ceil(self.total_bytes * self.utilization)

    @property
    def context_bytes(self) -> int:
        return CONTEXT_BYTES + (NCCL_BYTES if self.tp > 1 else 0)

    @property
    def weights_bytes(self) -> int:
        return MODEL_WEIGHTS_BYTES // self.tp

    @property
    def activation_bytes(self) -> int:
        return self.max_num_batched_tokens * ACTIVATION_BYTES_PER_TOKEN

    @property
    def kv_bytes(self) -> int:
        """KV pool bytes (may be <= 0 when the weights leave nothing)."""
        return (
            self.requested_bytes
            - self.weights_bytes
            - NON_TORCH_BYTES
            - self.activation_bytes
            - self.graph_pool_bytes
        )

    @property
    def bytes_per_token(self) -> int:
        kv_heads = max(1, NUM_KV_HEADS // self.tp)
        return 2 * NUM_LAYERS * kv_heads * HEAD_DIM * KV_DTYPE_BYTES

    @property
    def num_blocks(self) -> int:
        return max(0, self.kv_bytes) // (BLOCK_SIZE * self.bytes_per_token)

    @property
    def needed_kv_bytes(self) -> int:
        """KV bytes one request of ``max_model_len`` tokens needs."""
        return math.ceil(self.max_model_len / BLOCK_SIZE) * BLOCK_SIZE * self.bytes_per_token

    @property
    def kv_fits(self) -> bool:
        return self.kv_bytes >= self.needed_kv_bytes

    @property
    def estimated_max_model_len(self) -> int:
        return self.num_blocks * BLOCK_SIZE

    @property
    def max_concurrency(self) -> float:
        return self.num_blocks / math.ceil(self.max_model_len / BLOCK_SIZE)

    @property
    def kv_tokens(self) -> int:
        return int(self.max_concurrency * self.max_model_len)

    @property
    def capture_sizes(self) -> list[int]:
        """vLLM's default CUDA-graph capture sizes, up to min(2 x max_num_seqs, 512)."""
        top = min(2 * self.max_num_seqs, MAX_CAPTURE_SIZE)
        sizes = [1, 2, 4, *range(8, 256, 8), *range(256, MAX_CAPTURE_SIZE + 1, 16)]
        return [s for s in sizes if s <= top]

    @property
    def full_capture_sizes(self) -> list[int]:
        return [s for s in self.capture_sizes if s <= self.max_num_seqs]

    @property
    def graph_pool_bytes(self) -> int:
        return (
            GRAPH_BASE_BYTES
            + PIECEWISE_GRAPH_BYTES * len(self.capture_sizes)
            + FULL_GRAPH_BYTES * len(self.full_capture_sizes)
        )

    @property
    def sampler_requests(self) -> int:
        return min(self.max_num_seqs, self.max_num_batched_tokens)

    @property
    def sampler_bytes(self) -> int:
        return self.sampler_requests * VOCAB_SIZE * SAMPLER_BYTES_PER_ELEMENT

    @property
    def sampler_headroom_bytes(self) -> int:
        """What is left on the GPU after the KV pool and the graphs (both inside the budget)."""
        return self.total_bytes - self.requested_bytes - self.context_bytes

    @property
    def sampler_fits(self) -> bool:
        return self.sampler_bytes <= self.sampler_headroom_bytes

    def serving_bytes(self) -> int:
        """What one GPU holds once the server is ready."""
        return self.context_bytes + self.requested_bytes


def gib(n: float) -> float:
    """Bytes to GiB (float)."""
    return n / GiB
