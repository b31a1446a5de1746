"""The parallel layouts vLLM itself accepts for a model, with its own reasons when it refuses.

From vLLM's code (the same rules from 0.5 to 0.33):

- ``vllm/config/model.py::verify_with_parallel_config`` (``vllm/config.py`` before 0.10):
  "Total number of attention heads (H) must be divisible by tensor parallel size (T)."
- ``vllm/model_executor/layers/linear.py::QKVParallelLinear``: with ``T >= kv_heads`` every
  rank keeps one KV head, replicated ``divide(T, kv_heads)`` times; otherwise each rank keeps
  ``divide(kv_heads, T)`` heads. ``divide`` asserts exact division, so the KV heads must
  divide T, or T the KV heads (MiniMax-M2.5 has 8 KV heads: TP 3 and 6 are refused while
  its 48 attention heads divide by both). MLA models have one latent, replicated: no rule.
- ``_verify_with_expert_parallelism``: ``--enable-expert-parallel`` needs a MoE model.
- Pipeline parallel splits the decoder layers into contiguous stages
  (``vllm/distributed/utils.py::get_pp_indices``): at most one stage per layer.

Decode context parallelism (``-dcp N``), vLLM 0.32's rules (applied to every version planned):

- ``vllm/config/parallel.py::ParallelConfig`` (without prefill context parallelism, which
  bringup does not plan): DCP reuses the TP ranks, "tp_size=T must be divisible by dcp_size=N";
- ``vllm/config/model.py::verify_with_parallel_config``, GQA/MQA (not MLA): T must exceed
  the model's KV heads K, N ≤ T // K, and the query heads per KV head must divide by N;
- ``vllm/v1/kv_cache_interface.py::SlidingWindowSpec.max_memory_usage_bytes`` asserts "DCP
  not support sliding window": a model with sliding-window layers takes only N = 1.
"""

from __future__ import annotations

from bringup.core.plan.arch import Architecture
from bringup.errors import UsageError


def parallel_problem(
    arch: Architecture, tp: int, pp: int = 1, *, expert_parallel: bool = False
) -> str | None:
    """Why vLLM refuses this layout (its own wording where it has one), or None."""
    if arch.num_heads % tp:
        return (
            f"Total number of attention heads ({arch.num_heads}) must be divisible by "
            f"tensor parallel size ({tp})"
        )
    kv = arch.num_kv_heads
    if arch.mla is None and kv > 0 and (tp % kv if tp >= kv else kv % tp):
        return (
            f"the {kv} KV heads cannot be split over tensor parallel size {tp}: vLLM needs "
            f"the KV heads to divide TP (replication) or TP to divide them"
        )
    if expert_parallel and arch.moe is None:
        return "Number of experts in the model must be greater than 0 when expert parallelism is enabled"
    if pp > arch.num_layers:
        return f"pipeline parallel size {pp} exceeds the model's {arch.num_layers} layers"
    return None


def accepted_tp_sizes(arch: Architecture, limit: int) -> list[int]:
    """The tensor-parallel sizes up to ``limit`` vLLM accepts for this model."""
    return [tp for tp in range(1, limit + 1) if parallel_problem(arch, tp) is None]


def dcp_problem(arch: Architecture, tp: int, dcp: int) -> str | None:
    """Why vLLM refuses ``--decode-context-parallel-size dcp`` at TP ``tp``, or None."""
    if dcp == 1:
        return None
    if dcp < 1:
        return "it must be at least 1"
    if tp % dcp:
        return (
            f"it must divide the tensor parallel size {tp} "
            f"(vLLM: tp_size={tp} must be divisible by dcp_size={dcp})"
        )
    if "sliding" in arch.layer_kinds:
        return "DCP does not support sliding-window attention (this model has such layers)"
    kv = arch.num_kv_heads
    if arch.mla is None and kv > 0:
        if tp <= kv:
            return (
                f"DCP for GQA/MQA requires --tensor-parallel-size ({tp}) to be greater than "
                f"the model's {kv} KV heads"
            )
        if dcp > tp // kv:
            return f"it exceeds the maximum ({tp // kv}) for TP {tp} and {kv} KV heads"
        if (arch.num_heads // kv) % dcp:
            return (
                f"the model's {arch.num_heads // kv} query heads per KV head must be "
                f"divisible by it"
            )
    return None


def accepted_dcp_sizes(arch: Architecture, tp: int) -> list[int]:
    """The decode-context-parallel sizes vLLM accepts for this model at TP ``tp``."""
    return [n for n in range(1, tp + 1) if dcp_problem(arch, tp, n) is None]


def check_dcp(arch: Architecture, tp: int, dcp: int) -> None:
    """UsageError (exit 2) naming the allowed values when vLLM would refuse ``-dcp dcp``."""
    problem = dcp_problem(arch, tp, dcp)
    if problem is not None:
        allowed = ", ".join(str(n) for n in accepted_dcp_sizes(arch, tp))
        raise UsageError(
            f"--decode-context-parallel-size {dcp} is refused by vLLM here: {problem}",
            hint=f"allowed at --tensor-parallel-size {tp}: {allowed}",
        )
