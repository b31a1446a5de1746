"""Reference points from public vLLM logs, and the planner's error on each.

Each row: what ran (model config bundled in bringup.data.models, GPU, settings), what vLLM
logged ("Model loading took", "Available KV cache memory", "GPU KV cache size"), and where
it was published. Notes say what is uncertain about a row.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from bringup.core.plan.kv import tokens_in
from plan.helpers import GiB, bundled_config, planner_for


@dataclass(frozen=True)
class Point:
    """One logged startup."""

    name: str
    model: str
    gpu: str
    gpus: int
    settings: dict[str, Any]
    source: str
    weights_gib: float | None = None  # "Model loading took X GiB" (per rank)
    kv_gib: float | None = None  # "Available KV cache memory: Y GiB"
    kv_tokens: int | None = None  # "GPU KV cache size: N tokens"
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


POINTS: tuple[Point, ...] = (
    Point(
        "llama8b-h100",
        "Llama-3.1-8B",
        "H100",
        1,
        {"engine_version": "0.11"},
        "public vLLM logs of meta-llama/Llama-3.1-8B-Instruct (GKE vLLM tutorials and many issues; "
        "not pinned to one URL)",
        weights_gib=14.99,
    ),
    Point(
        "qwen3-30b-a3b-tp4",
        "Qwen3-30B-A3B",
        "H100",
        4,
        {"engine_version": "0.8", "tensor_parallel_size": 4},
        "https://github.com/vllm-project/vllm/issues/17469",
        weights_gib=14.2474,
        note="vLLM 0.8.5, TP4; model inferred from the issue (Qwen3 MoE, 14.25 GiB per rank), GPU not stated",
    ),
    Point(
        "gpt-oss-120b-h100-0.10",
        "gpt-oss-120b",
        "H100",
        1,
        {"engine_version": "0.10"},
        "https://github.com/vllm-project/vllm/issues/23278",
        weights_gib=65.9651,
        kv_gib=-2.14,
        note="vLLM 0.10.1, MXFP4 through Marlin on Hopper (repacked scales are not modelled)",
    ),
    Point(
        "gpt-oss-120b-h100-0.14",
        "gpt-oss-120b",
        "H100",
        1,
        {"engine_version": "0.14"},
        "https://github.com/vllm-project/vllm/issues/33155",
        weights_gib=64.38,
        note="vLLM 0.14.1, OOM after upgrading; Triton MXFP4 backend",
    ),
    Point(
        "gpt-oss-120b-h100-gmu095",
        "gpt-oss-120b",
        "H100",
        1,
        {"engine_version": "0.11", "gpu_memory_utilization": 0.95, "max_num_batched_tokens": 1024},
        "https://github.com/vllm-project/vllm/issues/27508",
        kv_gib=1.71,
        note="`vllm serve openai/gpt-oss-120b --gpu-memory-utilization 0.95 --max-num-batched-tokens 1024`; "
        "kv_cache_insufficient at 131072",
    ),
    Point(
        "qwen3-235b-fp8-tp4-h100",
        "Qwen3-235B-A22B",
        "H100",
        4,
        {"engine_version": "0.9", "tensor_parallel_size": 4, "quantization": "fp8"},
        "https://github.com/vllm-project/vllm/issues/21348",
        kv_gib=8.11,
        kv_tokens=178_880,
        note="vLLM ~0.9.2 with an LMCache KV connector; the run started (no failure reported)",
    ),
)


def evaluate(p: Point) -> dict[str, Any]:
    """Predicted vs measured for one point: weights, KV GiB and tokens, and their errors."""
    planner, s = planner_for(bundled_config(p.model), p.gpu, p.gpus, **p.settings)
    o = planner.evaluate(s)
    r = o.rank
    out: dict[str, Any] = {
        "name": p.name,
        "weights_gib": r.weights / GiB,
        "kv_gib": r.kv / GiB,
        "verdict": o.failure.failure_class.value if o.failure else "fits",
    }
    if p.weights_gib is not None:
        out["weights_error"] = (r.weights / GiB - p.weights_gib) / p.weights_gib
    if p.kv_tokens is not None:
        predicted = tokens_in(r.spec, r.kv)
        out["kv_tokens"] = predicted
        out["kv_tokens_error"] = (predicted - p.kv_tokens) / p.kv_tokens
        # bytes per token alone: tokens vLLM would report for the pool it measured
        out["kv_tokens_from_measured_pool_error"] = (
            (tokens_in(r.spec, round(p.kv_gib * GiB)) - p.kv_tokens) / p.kv_tokens
            if p.kv_gib
            else None
        )
    if p.kv_gib is not None:
        out["kv_gib_error"] = r.kv / GiB - p.kv_gib
    return out


def accuracy() -> dict[str, Any]:
    """Median absolute errors over the table."""
    rows = [evaluate(p) for p in POINTS]
    weights = [abs(r["weights_error"]) for r in rows if "weights_error" in r]
    tokens = [abs(r["kv_tokens_error"]) for r in rows if "kv_tokens_error" in r]
    return {
        "rows": rows,
        "median_weights_error": statistics.median(weights),
        "median_kv_tokens_error": statistics.median(tokens) if tokens else None,
    }
