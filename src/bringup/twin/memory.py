"""The twin's GPU memory model: what each GPU holds at each step, and which failures fit.

Numbers are per GPU (per TP rank), for a MiniMax-M2.5-like model: 230 GiB of bf16 weights
split over ``tp`` ranks (57.5 GiB at TP4), 62 layers, 8 KV heads of dimension 128
(``max(1, 8 // tp)`` per rank), a vocabulary of 200064, on the default GPU of
102005473280 bytes (95 GiB). The steps mirror vLLM 0.33 (engines.md 1.6):

1. ``init_device``: the CUDA context, cuBLAS and (TP > 1) NCCL buffers are allocated
   (``context_bytes``) *before* vLLM's memory snapshot, so they come out of the
   ``(1 - utilization)`` slack. The snapshot check fails (``Free memory on device ...``)
   when ``free < ceil(total x utilization)``; free counts other processes' memory.
2. weights load (``weights_bytes``), then the profile run leaves the activation workspace
   (``activation_bytes``, scaling with ``max_num_batched_tokens``) cached by the allocator.
3. ``kv_bytes = requested - weights - non_torch - activation``; after the KV pool the
   process holds ``context + requested``.
4. CUDA graphs are captured after the KV pool; the twin models their pool
   (``graph_pool_bytes``, from the capture sizes) as taken from the slack, as vLLM <= 0.11
   did and as 0.33 does whenever its graph estimate falls short.
5. **The sampler warmup rule** (``oom_warmup``): the warmup allocates
   ``min(max_num_seqs, max_num_batched_tokens) x 200064 x 12`` bytes (fp32 sort values and
   int64 indices over the vocabulary), which must fit in the headroom
   ``total - utilization x total - graph pool - context``. With the defaults (1024 seqs,
   0.92) that is 2.29 GiB against 1.66 GiB: CUDA OOM. With ``--max-num-seqs 256``
   (0.57 GiB) or 512 (1.14 GiB) it fits; so does ``--gpu-memory-utilization 0.90``.
6. **The KV rule** (``kv_insufficient``): one request of ``max_model_len`` tokens needs
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
MODEL_WEIGHTS_BYTES = 230 * GiB
NUM_LAYERS = 62
NUM_KV_HEADS = 8
HEAD_DIM = 128
KV_DTYPE_BYTES = 2
VOCAB_SIZE = 200064
BLOCK_SIZE = 16
SAMPLER_BYTES_PER_ELEMENT = 12  # fp32 sort values + int64 indices
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
        return self.requested_bytes - self.weights_bytes - NON_TORCH_BYTES - self.activation_bytes

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
        """What is left on the GPU after the KV pool and the graphs."""
        return self.total_bytes - self.requested_bytes - self.graph_pool_bytes - self.context_bytes

    @property
    def sampler_fits(self) -> bool:
        return self.sampler_bytes <= self.sampler_headroom_bytes

    @property
    def weights_fit(self) -> bool:
        return self.weights_bytes + NON_TORCH_BYTES + self.activation_bytes < self.requested_bytes

    def serving_bytes(self) -> int:
        """What one GPU holds once the server is ready."""
        return self.context_bytes + self.requested_bytes + self.graph_pool_bytes


def gib(n: float) -> float:
    """Bytes to GiB (float)."""
    return n / GiB
