"""The non-weight, non-KV memory of one GPU rank: activations, sampler, graphs, non-torch.

All are estimates (vLLM measures them at startup); each function says what it counts.

**The sampler: in the profile run, and in the warmup after the KV pool.** Every V1 startup
runs the sampler on ``N = min(max_num_seqs, max_num_batched_tokens)`` dummy rows over the
padded vocabulary ``V`` twice: once at the end of the profile run (inside the measured
peak, so inside the budget) and once more after the KV pool exists (the warmup that prints
"CUDA out of memory occurred when warming up sampler with N dummy requests"). What the warmup
needs *beyond* what the profile measured depends on the model runner
(:func:`~bringup.core.plan.settings.model_runner`):

- **V1 runner** (``vllm/v1/worker/gpu_model_runner.py``, 0.8 on): ``profile_run`` ends with
  ``_dummy_sampler_run(last_hidden_states)`` on the same ``N`` rows and with the same dummy
  metadata (top-k ``V - 1``, top-p 0.9) as the warmup in ``gpu_worker.py::
  compile_or_warm_up_model``, whose forward (``N`` tokens) is smaller than the profile's. The
  warmup needs nothing beyond the profile's peak ``A``: it runs in the room ``A`` left in the
  budget, after the CUDA graphs (captured into that same room and, before 0.21, into the
  memory outside the budget). Its ``[N, V]`` tensors at the peak of the PyTorch top-k/top-p
  path, in bytes per element:

  ====  ==========================================================================
   2    logits in the model dtype (held by ``_dummy_sampler_run``)
   4    the fp32 copy the sampler works on (``logits.to(torch.float32)``)
   4    sorted values (``logits.sort``)
   8    int64 sort indices — with the values, the 12·N·V "Tried to allocate" of vllm#15105
   4    softmax of the sorted logits (top-p)
   2    the top-k and top-p boolean masks
   4    the scattered result
  ====  ==========================================================================

  28 bytes per element (:data:`SAMPLER_BYTES_PER_ELEMENT`), counted in ``A``.
- **V2 runner** (``vllm/v1/worker/gpu/model_runner.py``): the profile's dummy batch has no
  sampling parameters (the NOTE(woosuk) in its ``_dummy_sampler_run``: "the sampler may skip
  top_k, top_p, and logprobs"), so the profile holds only the logits (2 bytes per element,
  :data:`MRV2_PROFILE_SAMPLER_BYTES_PER_ELEMENT`). The warmup (``gpu/warmup.py::
  _warmup_kernels``, after the KV pool and before graph capture) samples with
  ``SamplingParams.for_sampler_warmup()`` (top-k 50, top-p, min-p, penalties, 5 logprobs),
  which adds the fp32 copy of the logits (``apply_sampling_params``), the top-k/top-p and
  min-p output over it and the logprobs' log-softmax: 3 x 4 bytes per element beyond the
  profile (:data:`MRV2_WARMUP_EXTRA_BYTES_PER_ELEMENT`; vllm PR #48601 and #57926 fix this
  gap in later code). That extra comes out of the memory outside the budget.
- **V0 engine** (``vllm/worker/model_runner.py::profile_run``, 0.5.0-0.10): the sampler runs
  inside the profile (``SamplingParams(top_p=0.99, top_k=self.vocab_size - 1)``, one row per
  dummy sequence, ``max_num_seqs`` of them); there is no warmup after the KV pool. Its
  ``execute_model`` runs the whole forward first (each layer frees its intermediates), then
  ``compute_logits`` on the pruned hidden states and ``self.model.sample``, with only the
  forward's output ``[t, h]`` still held, and only the driver worker (TP rank 0) samples
  (``if not self.is_driver_worker: return []``). So the profile's peak is the *larger* of the
  forward's (:func:`~bringup.core.plan.activation.forward_peak_bytes`) and ``t·h·d`` plus the
  sampler's ``[N, V]`` tensors, not their sum (:func:`v0_sampler_bytes_per_element`: 30, 40
  or 38 bytes per element by release), and there is no kernel workspace at that peak: V0
  attention is FlashAttention on compute capability 8.0 and up and xFormers below
  (``vllm/attention/selector.py::which_attn_to_use``, ``platforms/cuda.py`` from 0.7), and
  neither keeps a workspace; FlashInfer's 256 MiB ``FLASHINFER_WORKSPACE_BUFFER_SIZE``
  (``attention/backends/flashinfer.py``) is only taken with ``VLLM_ATTENTION_BACKEND=
  FLASHINFER``, which the plan is not given. Checked against vllm#10517 (Llama-3.1-8B on an
  RTX 3090, 0.6.4): ``peak_torch_memory`` minus the weights is 2.07 GiB at 20,000 tokens, the
  forward alone (2.06 GiB), with the sampler's 1.3 GiB below it.

For MiniMax-M2.5 (V = 200,064) at N = 1,024: 5.34 GiB in the profile of the V1 runner; 2.29
GiB beyond the profile for the V2 runner's warmup.

**Where the constants come from.** The byte counts per logit element follow vLLM's code
(above). The others are fixed numbers, not fitted by any code: set once (commit 26939af) from
the public figures in ``shared/reference/memory.md`` and unchanged since: the graph pool per
layer and captured size from two startups (Llama-3-8B on an H100, 0.67 GiB; Qwen3-235B TP8 EP
on L40S, 3.45 GiB), non-torch memory from the 0.2-0.5 GiB per GPU seen on 3090/A100/L40S at
TP 2-8, the CUDA context, NCCL and kernel workspaces as round figures in that range. The
per-version rules were written while reading the 50 startups of the bench, so its KV-token
median is in-sample; ``bench/bench_plan_memory.py`` refits the one scale the corpus can
refit (the graph pool's, from its "Graph capturing finished ... took X GiB" lines) and
reports the leave-one-out figure beside it.
"""

from __future__ import annotations

from bringup.core.plan.activation import forward_peak_bytes
from bringup.core.plan.arch import Architecture
from bringup.core.plan.settings import NEWEST_KNOWN
from bringup.core.vllm_compile import GraphCapture
from bringup.core.vllm_graphs import capture_sizes, largest_capture_size
from bringup.units import MiB

SAMPLER_BYTES_PER_ELEMENT = 28  # the V1 runner's sampler pass (profile and warmup alike)
MRV2_PROFILE_SAMPLER_BYTES_PER_ELEMENT = 2  # the V2 runner's profile: the logits only
MRV2_WARMUP_EXTRA_BYTES_PER_ELEMENT = 12  # the V2 warmup beyond its profile: 3 fp32 [N, V]
PROFILE_LOGITS_BYTES_PER_ELEMENT = 6  # model-dtype logits + their fp32 copy
KERNEL_WORKSPACE_BYTES = 256 * MiB  # attention / GEMM / MoE workspaces seen by torch (V1, V2)
# The V0 sampler's [N, V] tensors at its peak, bytes per element (16-bit logits), by release
# (vllm/model_executor/layers/sampler.py, Sampler.forward and _apply_top_k_top_p, read in the
# 0.5.0 to 0.10.1 wheels). The sort's own working set is torch's: ``logits.sort`` on CUDA
# (pytorch aten/src/ATen/native/cuda/Sort.cu::segmented_sort_pairs) allocates int64
# ``reverse_indices`` (8) and calls cub's DeviceSegmentedRadixSort::SortPairs without a
# DoubleBuffer, whose temporary storage holds a 3rd keys and a 3rd values buffer (NVIDIA/cccl
# cub/device/dispatch/dispatch_radix_sort.cuh: keys + 8 bytes), for 128 rows or more (fewer
# take Sort.cu's segmented_sort_pairs_by_full_sort, not modelled apart).
V0_SAMPLER_BYTES_BEFORE_0_5_5 = 30  # no fp32 copy: logits 2, at the sort: values 2 + indices 8
# + reverse indices 8 + cub's 2 + 8 (the end of _apply_top_k_top_p holds 28)
V0_SAMPLER_BYTES_BEFORE_0_6_2 = 40  # ``logits.to(torch.float)`` (0.5.5): 2 + 4; at the end of
# _apply_top_k_top_p: sorted 4 + indices 8, top-k mask 1, probs_sort 4, probs_sum 4, top-p
# mask 1, the inverse permutation ``logits_idx_inv`` 8 and its gather 4
V0_SAMPLER_BYTES = 38  # 0.6.2 on (the re-sort is one ``scatter_``, 32 at the end): at the
# sort, logits 2 + fp32 4 + values 4 + indices 8 + reverse indices 8 + cub's 4 + 8
GRAPH_BYTES_PER_LAYER_PER_SIZE_DENSE = round(0.40 * MiB)  # fitted: Llama-3-8B on H100, 0.67 GiB
GRAPH_BYTES_PER_LAYER_PER_SIZE_MOE = round(
    0.70 * MiB
)  # fitted: Qwen3-235B TP8 EP on L40S, 3.45 GiB
CUDA_CONTEXT_BYTES = 512 * MiB  # CUDA context and cuBLAS handles, before vLLM's snapshot
NCCL_BYTES = 256 * MiB  # NCCL communicators and buffers (TP/PP > 1), before the snapshot
NON_TORCH_GROWTH_BYTES = 96 * MiB  # non-torch growth during profiling, single GPU
NON_TORCH_GROWTH_DISTRIBUTED_BYTES = 256 * MiB  # with TP/PP > 1 (collectives' workspaces)
VOCAB_PADDING = 64
NEWEST = (NEWEST_KNOWN[0], NEWEST_KNOWN[1], 0)  # what a missing ``release`` stands for


def padded_vocab(arch: Architecture) -> int:
    """The vocabulary rounded up to vLLM's padding (a multiple of 64)."""
    return -(-arch.vocab_size // VOCAB_PADDING) * VOCAB_PADDING


def sampler_requests(max_num_seqs: int, max_num_batched_tokens: int) -> int:
    """How many dummy requests the sampler warmup uses."""
    return min(max_num_seqs, max_num_batched_tokens)


def warmup_extra_bytes_per_element(runner: str) -> int:
    """Bytes per ``[N, V]`` element the warmup needs beyond the profile's peak."""
    return MRV2_WARMUP_EXTRA_BYTES_PER_ELEMENT if runner == "v2" else 0


def v0_sampler_bytes_per_element(release: tuple[int, int, int]) -> int:
    """The V0 engine's sampler at its peak, bytes per ``[N, V]`` element (the constants)."""
    if release < (0, 5, 5):
        return V0_SAMPLER_BYTES_BEFORE_0_5_5
    if release < (0, 6, 2):
        return V0_SAMPLER_BYTES_BEFORE_0_6_2
    return V0_SAMPLER_BYTES


def profile_sampler_bytes_per_element(runner: str, release: tuple[int, int, int] = NEWEST) -> int:
    """Bytes per ``[N, V]`` element of the profile run's sampler pass (inside ``A``)."""
    if runner == "v0":
        return v0_sampler_bytes_per_element(release)
    return MRV2_PROFILE_SAMPLER_BYTES_PER_ELEMENT if runner == "v2" else SAMPLER_BYTES_PER_ELEMENT


def sampler_warmup_bytes(
    arch: Architecture, max_num_seqs: int, max_num_batched_tokens: int, runner: str = "v1"
) -> int:
    """What the sampler warmup needs on one rank beyond the profile run's peak (module
    docstring): 0 for the V1 runner and the V0 engine, 12 bytes per element for V2."""
    n = sampler_requests(max_num_seqs, max_num_batched_tokens)
    return n * padded_vocab(arch) * warmup_extra_bytes_per_element(runner)


def activation_peak_bytes(
    arch: Architecture,
    tp: int,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    *,
    last_stage: bool = True,
    expert_parallel: bool = False,
    runner: str = "v1",
    dp: int = 1,
    release: tuple[int, int, int] = NEWEST,
) -> int:
    """Peak torch memory of the profile run above the weights, one rank.

    The dummy forward of ``max_num_batched_tokens`` tokens: the live tensors of one layer
    (:func:`~bringup.core.plan.activation.forward_peak_bytes`), and on the last stage
    the logits of ``min(max_num_seqs, max_num_batched_tokens)`` rows and the sampler pass
    over them (28 bytes per element for the V1 runner, the logits alone for V2: module
    docstring), plus kernel workspaces. The V0 engine (``runner="v0"``, ``release`` its
    version): the larger of the forward and the forward's output plus the sampler, no
    workspace (module docstring).
    """
    t = max_num_batched_tokens
    forward = forward_peak_bytes(arch, tp, t, expert_parallel=expert_parallel, dp=dp)
    if runner == "v0":
        if not last_stage:
            return forward
        rows = sampler_requests(max_num_seqs, t) * padded_vocab(arch)
        output = t * arch.hidden_size * arch.dtype_bytes
        return max(forward, output + rows * v0_sampler_bytes_per_element(release))
    if last_stage:
        rows = sampler_requests(max_num_seqs, t) * padded_vocab(arch)
        # the forward's activations are freed before the sampler runs: the peak is the larger
        if runner == "v2":
            forward += rows * MRV2_PROFILE_SAMPLER_BYTES_PER_ELEMENT
        else:
            forward = max(
                forward + rows * PROFILE_LOGITS_BYTES_PER_ELEMENT, rows * SAMPLER_BYTES_PER_ELEMENT
            )
    return forward + KERNEL_WORKSPACE_BYTES


def capture_ceiling(arch: Architecture) -> int | None:
    """A model's own largest capture size, where vLLM sets one: 1024 for gpt-oss
    (``vllm/model_executor/models/config.py::GptOssForCausalLMConfig``: "Increase the max
    capture size from 512 to 1024 for performance ... from 67 to 83" graphs), unless the
    user sets capture sizes; None for the others."""
    return 1024 if arch.name == "GptOssForCausalLM" else None


def cuda_graph_bytes(
    arch: Architecture,
    layers_on_rank: int,
    max_num_seqs: int,
    *,
    enforce_eager: bool,
    version: tuple[int, int] = (0, 33),
    v0_engine: bool = False,
    max_num_batched_tokens: int | None = None,
    capture: GraphCapture | None = None,
) -> int:
    """The CUDA graph pool on one rank: a per-layer, per-captured-size cost (fixed numbers
    from two public figures, module docstring) over the sizes this version captures, plus
    static buffers at the largest size. ``capture`` (``vllm_compile.graph_capture``): the
    sizes and mode the engine flags set; mode NONE is no pool, and sizes the flags fix (an
    explicit list, a ``max_cudagraph_capture_size``, FULL_DECODE_ONLY's decode sizes) are
    counted as they are, their largest setting the buffers."""
    if enforce_eager or (capture is not None and capture.mode == "NONE"):
        return 0
    per = GRAPH_BYTES_PER_LAYER_PER_SIZE_MOE if arch.moe else GRAPH_BYTES_PER_LAYER_PER_SIZE_DENSE
    if capture is not None and capture.from_flags:
        sizes, largest = len(capture.sizes), max(capture.sizes, default=0)
    else:
        ceiling = capture_ceiling(arch)
        largest = largest_capture_size(max_num_seqs, version, v0_engine=v0_engine, ceiling=ceiling)
        if max_num_batched_tokens:
            largest = min(largest, max_num_batched_tokens)
        sizes = capture_sizes(
            max_num_seqs,
            version,
            v0_engine=v0_engine,
            max_num_batched_tokens=max_num_batched_tokens,
            ceiling=ceiling,
        )
    return layers_on_rank * sizes * per + largest * (6 * arch.hidden_size) * arch.dtype_bytes


def context_bytes(world_size: int) -> int:
    """Memory used before vLLM's snapshot (CUDA context, NCCL): outside the budget."""
    return CUDA_CONTEXT_BYTES + nccl_bytes(world_size)


def nccl_bytes(world_size: int) -> int:
    """NCCL's communicators and buffers, with more than one rank."""
    return NCCL_BYTES if world_size > 1 else 0


def non_torch_growth_bytes(world_size: int) -> int:
    """Non-torch memory that appears during profiling (inside the budget)."""
    return NON_TORCH_GROWTH_DISTRIBUTED_BYTES if world_size > 1 else NON_TORCH_GROWTH_BYTES
