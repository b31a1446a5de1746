"""The plan for one set of settings: the planner's evaluation, then the recommendations; and
the steps ``bringup plan`` and the demo both take to get there from a model's config and GPUs.

Kept apart from ``planner`` so that ``recommend`` (which asks the planner about other
settings) and the planner do not import each other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from bringup.core import gpu_catalog
from bringup.core.checkpoint import TensorInfo
from bringup.core.gpu import GpuReading
from bringup.core.plan import confidence, decode
from bringup.core.plan.arch import Architecture, architecture_warning
from bringup.core.plan.budget import Calibration, GpuSet
from bringup.core.plan.checks import check_dcp
from bringup.core.plan.planner import (
    Outcome,
    Planner,
    kv_cache,
    per_gpu,
    sampler_warmup,
    verdict,
)
from bringup.core.plan.quant import format_from_config
from bringup.core.plan.recommend import recommend
from bringup.core.plan.result import CalibrationReport, Plan
from bringup.core.plan.settings import Requested, Settings, nearest_known_version, resolve
from bringup.core.plan.synth import synthesize
from bringup.errors import UsageError


def make_plan(planner: Planner, s: Settings) -> Plan:
    """The full plan for ``s``, with recommendations."""
    outcome = planner.evaluate(s)
    return Plan(
        model=planner.model_info(),
        settings=s,
        per_gpu=per_gpu(outcome.rank),
        kv_cache=kv_cache(outcome.rank, s),
        verdict=verdict(outcome),
        recommendations=tuple(recommend(planner, outcome)),
        sampler_warmup=sampler_warmup(outcome),
    )


def gpus_from_readings(visible: Sequence[GpuReading], world: int, count: int | None) -> GpuSet:
    """The GPUs a ``world``-GPU instance uses, from the visible GPUs' readings (at least one):
    the smallest total and the least free memory among the first ``world`` of them, the
    catalog's facts for the first one's model; ``count`` GPUs available (default: all
    visible)."""
    used = visible[: max(1, world)]
    model = gpu_catalog.find(used[0].name)
    return GpuSet(
        name=model.name if model else used[0].name,
        count=count or len(visible),
        total_bytes=min(g.memory_total_bytes for g in used),
        free_bytes=min(g.memory_free_bytes for g in used),
        treats_as_a100="a100" in used[0].name.lower(),
        compute_capability=model.compute_capability if model else None,
        interconnect=model.interconnect if model else None,
    )


def gpus_of_model(model: gpu_catalog.GpuModel | None, count: int, memory_bytes: int) -> GpuSet:
    """``count`` GPUs of ``memory_bytes`` each, given by name (``--gpu``) and/or memory
    (``--gpu-memory``): the catalog model's facts (none for a GPU known by its memory
    alone, ``model`` None)."""
    return GpuSet(
        model.name if model else "GPU",
        count,
        memory_bytes,
        memory_bytes,
        bool(model and model.vllm_treats_as_a100),
        model.compute_capability if model else None,
        model.interconnect if model else None,
    )


def with_free(gpus: GpuSet, free_bytes: int, given: str) -> GpuSet:
    """The GPUs with ``free_bytes`` free at start (``--gpu-free``, as ``given``); UsageError
    when that is not between 0 and their memory."""
    if not 0 <= free_bytes <= gpus.total_bytes:
        raise UsageError(
            f"--gpu-free {given} must be between 0 and the GPU's "
            f"{gpus.total_bytes / 1024**3:.2f} GiB"
        )
    return dataclasses.replace(gpus, free_bytes=free_bytes)


def unified_memory_warning(gpu: gpu_catalog.GpuModel) -> str:
    """The caveat of a part whose memory the CPU shares (GB10, MI300A, Strix Halo)."""
    return (
        f"{gpu.name}'s memory is shared with the CPU: the OS and every other process hold part "
        f"of the {gpu.memory_bytes / 2**30:.0f} GiB planned here; give --gpu-free SIZE "
        "(what is free before the start) for a plan that counts them"
    )


def settings_for(req: Requested, arch: Architecture, gpus: GpuSet) -> Settings:
    """vLLM's settings for what was asked, on these GPUs, for this model."""
    return resolve(
        req,
        memory_bytes=gpus.total_bytes,
        treats_as_a100=gpus.treats_as_a100,
        max_position_embeddings=arch.max_position_embeddings,
        default_quantization=None,
        dense=arch.dense,
    )


def planner_for(
    arch: Architecture, tensors: Sequence[TensorInfo] | None, gpus: GpuSet, s: Settings
) -> Planner:
    """The planner; without a tensor list (a config.json alone) one is synthesized from the
    config in the settings' weight format."""
    if tensors is None:
        tensors = synthesize(arch, format_from_config(arch.quantization, s.quantization))
    return Planner(arch, tensors, gpus)


def warnings_for(req: Requested, arch: Architecture) -> tuple[str, ...]:
    """What the plan assumes: the nearest known vLLM version, a generic architecture."""
    out: list[str] = []
    if req.engine_version:
        _, version_warning = nearest_known_version(req.engine_version)
        if version_warning:
            out.append(version_warning)
    arch_warning = architecture_warning(arch)
    if arch_warning:
        out.append(arch_warning)
    if req.compilation.problem:
        out.append(req.compilation.problem)
    if (
        req.allow_long_max_model_len
        and req.max_model_len
        and req.max_model_len > arch.max_position_embeddings
    ):
        out.append(
            f"max_model_len {req.max_model_len} is above the model's "
            f"{arch.max_position_embeddings} ({arch.max_len_key}): VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 "
            "lets vLLM start, and a RoPE model's positions past it give NaN, an absolute-position "
            "model's an out-of-bounds CUDA error (vLLM's own warning)"
        )
    return tuple(out)


def gpu_decode(
    planner: Planner,
    s: Settings,
    setup: decode.DecodeSetup,
    *,
    gpu: gpu_catalog.GpuModel | None,
    bandwidth: float | None = None,
) -> decode.DecodeSpeed | None:
    """Batch-1 decode speed on ``gpu`` (the catalog's entry; ``bandwidth`` overrides its peak,
    or stands alone for a GPU the catalog lacks); None when no bandwidth is known."""
    decode.check_setup(setup, s.tensor_parallel_size)
    link = decode.setup_link(gpu, setup, tensor_parallel=s.tensor_parallel_size, world=s.world_size)
    if gpu is None and bandwidth is None:
        return None
    processor = (
        decode.gpu_processor(gpu, bandwidth)
        if gpu is not None
        else decode.Processor(planner.gpus.name, "gpu", float(bandwidth or 0), "given")
    )
    workload = decode.workload_for(planner.arch, planner.tensors, s, setup)
    return decode.predict(workload, processor, link)


def full_plan(
    planner: Planner,
    s: Settings,
    *,
    speed: decode.DecodeSpeed | None,
    warnings: tuple[str, ...] = (),
    calibration: CalibrationReport | None = None,
) -> Plan:
    """:func:`make_plan` with the decode speed, the warnings and what calibration changed:
    the whole ``bringup plan --json`` object of a GPU plan."""
    return dataclasses.replace(
        make_plan(planner, s), decode=speed, warnings=warnings, calibration=calibration
    )


# what ``--calibrate LOG`` does once the planner exists: the corrections and their report
Calibrator = Callable[[Planner, Settings], tuple[Calibration, CalibrationReport]]


def gpu_plan(
    arch: Architecture,
    tensors: Sequence[TensorInfo] | None,
    gpus: GpuSet,
    req: Requested,
    *,
    setup: decode.DecodeSetup,
    gpu: gpu_catalog.GpuModel | None,
    bandwidth: float | None = None,
    warnings: tuple[str, ...] | None = None,
    calibrate: Calibrator | None = None,
    free_known: bool = False,
) -> Plan:
    """The whole plan of a vLLM server on GPUs, as ``bringup plan`` and the demo make it:
    vLLM's settings for ``req``, its DCP checks, the planner (calibrated when ``calibrate`` is
    given), the plan with its recommendations, the decode speed on ``gpu``, the warnings
    (``warnings_for(req, arch)`` unless given) and the verdict's confidence
    (:mod:`~bringup.core.plan.confidence`; ``free_known``: the free memory was given, which
    settles what a unified-memory ``gpu`` holds for the OS)."""
    settings = settings_for(req, arch, gpus)
    check_dcp(arch, settings.tensor_parallel_size, settings.decode_context_parallel_size)
    planner = planner_for(arch, tensors, gpus, settings)
    report = None
    if calibrate is not None:
        planner.calibration, report = calibrate(planner, settings)
    plan = full_plan(
        planner,
        settings,
        speed=gpu_decode(planner, settings, setup, gpu=gpu, bandwidth=bandwidth),
        warnings=warnings_for(req, arch) if warnings is None else warnings,
        calibration=report,
    )
    facts = confidence.Facts(
        version_known=req.engine_version is not None,
        calibrated=calibrate is not None,
        unified_gpu=gpu.name if gpu is not None and gpu.unified and not free_known else None,
    )

    def outcome_at(version: str) -> Outcome:
        at = settings_for(dataclasses.replace(req, engine_version=version), arch, gpus)
        return planner.evaluate(at)

    return confidence.assess(plan, planner, facts, outcome_at)
