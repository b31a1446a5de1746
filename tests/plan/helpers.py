"""Shared helpers: plan a bundled model on catalog GPUs without the CLI."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from bringup.core import gpu_catalog
from bringup.core.plan import GpuSet, Planner, Requested, assemble, parse_architecture, resolve
from bringup.core.plan.quant import format_from_config
from bringup.core.plan.result import Plan
from bringup.core.plan.settings import Settings
from bringup.core.plan.synth import synthesize

GiB = 1024**3
# the "decode" object of plan --json (issue 16 gives these keys)
DECODE_KEYS = {
    "ceiling_tokens_per_s",
    "expected_tokens_per_s",
    "bound_by",
    "bytes_per_token_per_gpu",
    "collectives_per_token",
    "collective_latency_seconds",
}


def bundled_config(name: str) -> dict[str, Any]:
    """A config.json shipped in bringup.data.models."""
    text = resources.files("bringup.data").joinpath("models").joinpath(f"{name}.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def catalog_gpus(model: gpu_catalog.GpuModel, count: int, free_bytes: int | None = None) -> GpuSet:
    """``count`` GPUs of a catalog model, all free unless ``free_bytes`` says otherwise."""
    return GpuSet(
        model.name,
        count,
        model.memory_bytes,
        model.memory_bytes if free_bytes is None else free_bytes,
        model.vllm_treats_as_a100,
        model.compute_capability,
        model.interconnect,
    )


def planner_for(
    config: dict[str, Any], gpu: str, count: int, tensors: Any = None, **req: Any
) -> tuple[Planner, Settings]:
    """A planner and resolved settings for ``config`` on ``count`` catalog GPUs."""
    arch = parse_architecture(config)
    model = gpu_catalog.lookup(gpu)
    gpus = catalog_gpus(model, count, req.pop("free_bytes", model.memory_bytes))
    settings = resolve(
        Requested(**req),
        memory_bytes=model.memory_bytes,
        treats_as_a100=model.vllm_treats_as_a100,
        max_position_embeddings=arch.max_position_embeddings,
        default_quantization=None,
        dense=arch.dense,
    )
    if tensors is None:
        tensors = synthesize(arch, format_from_config(arch.quantization, settings.quantization))
    return Planner(arch, tensors, gpus), settings


def plan(name: str, gpu: str, count: int, **req: Any) -> Plan:
    """Plan a bundled model."""
    planner, settings = planner_for(bundled_config(name), gpu, count, **req)
    return assemble.make_plan(planner, settings)
