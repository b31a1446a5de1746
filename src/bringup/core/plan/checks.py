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
"""

from __future__ import annotations

from bringup.core.plan.arch import Architecture


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
