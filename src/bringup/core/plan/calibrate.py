"""Calibration: refine the prediction with the numbers a successful startup log reported.

``bringup diagnose`` reads a vLLM log into facts (``weights_gib_per_gpu``,
``available_kv_gib``, ``kv_cache_tokens``, ``cuda_graph_gib`` and the settings it ran with).
The planner predicts the same startup, and the differences become corrections:

- weights: measured / predicted, a factor (repacking, padding the model does that we miss);
- the rest of the budget: ``u x T - weights - KV`` measured is activations + non-torch
  (+ graphs from 0.21); measured minus predicted is added to the activation peak;
- CUDA graphs: the measured pool replaces the estimate;
- KV bytes per token: ``available KV / tokens`` measured over predicted, a factor.
"""

from __future__ import annotations

from collections.abc import Mapping

from bringup.core.plan.budget import Calibration
from bringup.core.plan.planner import Planner
from bringup.core.plan.settings import Settings

GiB = 1024**3

Facts = Mapping[str, float | int | str]


def measured_settings(base: Settings, facts: Facts) -> Settings:
    """The settings the logged startup ran with (``base`` where the log does not say)."""

    def num(name: str, default: float) -> float:
        value = facts.get(name)
        return float(value) if isinstance(value, (int, float)) else default

    return base.with_(
        tensor_parallel_size=int(num("tensor_parallel_size", base.tensor_parallel_size)),
        gpu_memory_utilization=num("gpu_memory_utilization", base.gpu_memory_utilization),
        max_num_seqs=int(num("max_num_seqs", base.max_num_seqs)),
        max_num_batched_tokens=int(num("max_num_batched_tokens", base.max_num_batched_tokens)),
        max_model_len=int(num("max_model_len", base.max_model_len)),
    )


def calibrate(planner: Planner, base: Settings, facts: Facts) -> Calibration:
    """Corrections from a successful startup's facts (an empty Calibration if it says nothing)."""
    s = measured_settings(base, facts)
    predicted = Planner(planner.arch, planner.tensors, planner.gpus).evaluate(s).rank
    weights = _gib(facts, "weights_gib_per_gpu")
    kv = _gib(facts, "available_kv_gib")
    graphs = _gib(facts, "cuda_graph_gib")
    tokens = facts.get("kv_cache_tokens")
    weights_scale = weights / predicted.weights if weights and predicted.weights else 1.0
    delta = 0
    if weights is not None and kv is not None:
        measured_rest = predicted.requested - weights - kv
        graphs_in = (
            (graphs if graphs is not None else predicted.graphs)
            if predicted.graphs_in_budget
            else 0
        )
        delta = round(
            measured_rest - predicted.activation - predicted.non_torch_in_budget - graphs_in
        )
    kv_scale = 1.0
    if kv and isinstance(tokens, (int, float)) and tokens > 0 and predicted.spec.bytes_per_token:
        kv_scale = (kv / float(tokens)) / predicted.spec.bytes_per_token
    return Calibration(
        weights_scale, delta, round(graphs) if graphs is not None else None, kv_scale
    )


def _gib(facts: Facts, name: str) -> float | None:
    value = facts.get(name)
    return float(value) * GiB if isinstance(value, (int, float)) else None
