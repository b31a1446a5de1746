"""The plan ``bringup plan`` prints, made from its parsed flags: the model read (a folder, the
HF cache, a bundled name, a GGUF file), the GPUs (given, or detected through NVML), the
calibration log read; the planning itself is ``core.plan``'s.

Also what ``bench`` asks of plan (:func:`predict_decode`, :func:`is_gguf`) and what a report
asks (:func:`make`).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bringup.cli.commands.plan_shared import cpu_processor, parse_memory, parse_rate
from bringup.cli.main import Context
from bringup.core import engine_args, engine_flags, fit_search, gpu_catalog
from bringup.core.checkpoint import Checkpoint, TensorInfo, refuse_incomplete
from bringup.core.gpu import select_visible
from bringup.core.plan import (
    Architecture,
    Calibration,
    GpuSet,
    Planner,
    Requested,
    Settings,
    assemble,
    cpu,
    decode,
    flags,
    parse_architecture,
    resolve,
)
from bringup.core.plan.calibrate import calibrate, is_source_line, model_mismatches
from bringup.core.plan.calibrate import report as calibration_report
from bringup.core.plan.quant import format_from_config
from bringup.core.plan.result import CalibrationReport, Plan
from bringup.core.plan.synth import synthesize
from bringup.core.printable import printable
from bringup.core.vocab import Engine
from bringup.errors import AdapterError, InputError, UsageError
from bringup.render.busy import Busy, busy, quiet


def make(args: argparse.Namespace, ctx: Context) -> Plan | dict[str, Any]:
    """The plan for the parsed flags: a ``Plan`` (vLLM, with its startup prediction), or the
    GGUF plan's JSON object."""
    made = _make(args, ctx)
    if not isinstance(made, Plan):
        return made
    from bringup.follow import startup_time

    command = engine_args.parse_server_command(args.passthrough) if args.passthrough else None
    model = args.model or (command.model if command else None) or ""
    words = command.flags if command else ()
    return dataclasses.replace(made, startup=startup_time.for_plan(made, model, words, ctx.environ))


def _make(args: argparse.Namespace, ctx: Context) -> Plan | dict[str, Any]:
    command = engine_args.parse_server_command(args.passthrough) if args.passthrough else None
    words = command.flags if command else ()
    # the server's environment: bringup's own, then NAME=value words of the command
    # (`env VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve ...`)
    environ = {**ctx.environ, **(flags.command_environment(command.entry) if command else {})}
    req = flags.requested(vars(args), words, environ)
    model_arg = args.model or (command.model if command else None)
    if not model_arg:
        raise UsageError(
            "no model given", hint="bringup plan MODEL, or a server command after -- that names one"
        )
    gguf = _gguf_checkpoint(model_arg)
    if gguf is not None:
        from bringup.cli.commands import plan_gguf

        plan_gguf.check_not_mixed(args)
        return plan_gguf.build_gguf(gguf, args, args.passthrough or (), _busy(args, ctx))
    revision = engine_args.get_flag(command.flags, "--revision") if command else None
    config, tensors, _origin = _load_model(model_arg, ctx.environ, revision, force=args.force)
    dtype = flags.flag_text(vars(args), words, "dtype")
    config, tensors = engine_flags.with_dtype(config, tensors, dtype)
    arch = parse_architecture(config)
    warnings = (*assemble.warnings_for(req, arch), *_flag_warnings(args, command, req))
    if req.device == "cpu":
        if (req.decode_context_parallel_size or 1) != 1:
            raise UsageError(
                "--decode-context-parallel-size is planned for GPUs only",
                hint="drop -dcp with --device cpu",
            )
        cpu_plan = _run_cpu(args, ctx, req, arch, tensors, words)
        return dataclasses.replace(cpu_plan, warnings=warnings)
    world = (req.tensor_parallel_size or 1) * (req.pipeline_parallel_size or 1)
    gpus = _gpus(args, ctx, world)
    version_before = assemble.settings_for(req, arch, gpus).engine_version  # checks req early
    log = _calibration_log(args.calibrate, ctx) if args.calibrate else None
    planned = req
    if log is not None and log.version and not req.engine_version:
        # the log's vLLM version is the one whose rules apply
        planned = dataclasses.replace(req, engine_version=flags.short_version(log.version))
    bandwidth = parse_rate(args.memory_bandwidth) if args.memory_bandwidth else None
    gpu = gpu_catalog.find(args.gpu or gpus.name)
    if gpu is not None and gpu.unified and not args.gpu_free:
        warnings = (*warnings, assemble.unified_memory_warning(gpu))
    plan = assemble.gpu_plan(
        arch,
        tensors,
        gpus,
        planned,
        setup=flags.decode_setup(vars(args), words),
        gpu=gpu,
        bandwidth=bandwidth,
        warnings=warnings,
        calibrate=_calibrator(args, log, model_arg, version_before) if log is not None else None,
        free_known=bool(args.gpu_free),
    )
    if plan.verdict.fits:
        return plan
    changes = fit_search.changes_that_fit(
        arch, tensors, gpus, plan.settings, _quantized_variants(model_arg, config)
    )
    return dataclasses.replace(
        plan, what_fits=fit_search.not_recommended(changes, plan.recommendations)
    )


def _calibrator(
    args: argparse.Namespace, log: _Log, model_arg: str, version_before: str
) -> assemble.Calibrator:
    """``--calibrate LOG``'s corrections of the planner, and their report; InputError when the
    log is another model's (unless ``--force-calibrate``)."""

    def calibrator(planner: Planner, settings: Settings) -> tuple[Calibration, CalibrationReport]:
        mismatches = model_mismatches(planner, settings, log.facts, model_arg)
        if mismatches and not args.force_calibrate:
            raise InputError(
                f"{args.calibrate} is a log of another model: {'; '.join(mismatches)}",
                hint="calibrate with a log of this model, or add --force-calibrate",
            )
        calibration = calibrate(planner, settings, log.facts)
        return calibration, calibration_report(
            args.calibrate,
            log.lines,
            planner,
            settings,
            calibration,
            engine_version=settings.engine_version if log.version else None,
            version_before=version_before,
            mismatches=mismatches,
        )

    return calibrator


def _busy(args: argparse.Namespace, ctx: Context) -> Busy:
    """The spinner for the seconds a plan measures this CPU's bandwidth: on stderr, only on
    a terminal, never under ``--json``."""
    return busy(ctx.stderr, ctx.environ, json_output=bool(getattr(args, "json", False)))


def _quantized_variants(model_arg: str, config: Mapping[str, Any]) -> list[fit_search.Variant]:
    """The bundled quantized checkpoints of the same model (``Qwen3-30B-A3B-FP8`` for
    ``Qwen/Qwen3-30B-A3B``), for an unquantized model bringup bundles."""
    from bringup.adapters import model_catalog

    found = model_catalog.find(model_arg)
    if found is None or parse_architecture(config).quantization is not None:
        return []
    out: list[fit_search.Variant] = []
    for other in model_catalog.catalog():
        if other.name.lower().startswith(found.name.lower() + "-"):
            arch = parse_architecture(model_catalog.config(other))
            if arch.quantization is not None:
                out.append((other.hf_ids[0], arch))
    return out


def _flag_warnings(
    args: argparse.Namespace, command: engine_args.ServerCommand | None, req: Requested
) -> list[str]:
    """Warnings for the engine flags: every vLLM flag after -- this plan does not model (and
    every word that is not a vLLM flag), speculative decoding, offloaded weights."""
    out: list[str] = []
    if command is not None and command.engine == Engine.VLLM:
        names = _vllm_flag_names()
        line = engine_flags.unplanned_warning(
            command.flags, names["flags"], names["version"], names["frontend_flags"]
        )
        if line:
            out.append(line)
    spec = flags.flag_text(vars(args), command.flags if command else (), "speculative_config")
    if spec:
        out.append(engine_flags.speculative_warning(engine_flags.parse_speculative(spec)))
    if req.cpu_offload_gb:
        out.append(engine_flags.offload_warning(req.cpu_offload_gb))
    return out


@functools.cache
def _vllm_flag_names() -> dict[str, Any]:
    """``data/vllm_flags.json`` (scripts/vllm_flag_names.py): vLLM serve's flag names."""
    import json
    from importlib import resources

    data = json.loads(resources.files("bringup.data").joinpath("vllm_flags.json").read_text())
    return {
        "version": data["version"],
        "flags": frozenset(data["flags"]),
        "frontend_flags": frozenset(data["frontend_flags"]),
    }


def predict_decode(
    model_arg: str,
    *,
    gpu: str | None,
    memory_bandwidth: float | None,
    tensor_parallel: int,
    setup: decode.DecodeSetup,
    environ: Mapping[str, str],
    cpu_threads: int | None = None,
    pipeline_parallel: int = 1,
    expert_parallel: bool = False,
    quantization: str | None = None,
    busy: Busy = quiet,
    engine_python: str | None = None,
) -> decode.DecodeSpeed:
    """Batch-1 decode speed of the model ``plan`` would plan for ``model_arg`` (bench uses it):
    on ``gpu`` (catalog name), or on this machine's CPU when ``gpu`` is None (its read
    bandwidth measured with ``cpu_threads`` threads, unless ``memory_bandwidth`` is given).
    ``quantization`` (``--quantization``) sets the weight format of a bundled model, as in
    ``plan``."""
    model = gpu_catalog.lookup(gpu) if gpu else None
    processor = (
        decode.gpu_processor(model, memory_bandwidth)
        if model is not None
        else cpu_processor(memory_bandwidth, cpu_threads, busy, engine_python)
    )
    decode.check_setup(setup, tensor_parallel)
    gguf = _gguf_checkpoint(model_arg)
    if gguf is not None:
        from bringup.cli.commands import plan_gguf

        workload = plan_gguf.decode_workload(gguf, setup.context_tokens)
    else:
        config, tensors, _origin = _load_model(model_arg, environ)
        arch = parse_architecture(config)
        if tensors is None:
            tensors = synthesize(arch, format_from_config(arch.quantization, quantization))
        workload = decode.vllm_workload(
            arch,
            tensors,
            tensor_parallel=tensor_parallel,
            pipeline_parallel=pipeline_parallel,
            expert_parallel=expert_parallel,
            kv_cache_dtype="auto",
            setup=setup,
            weight_format=format_from_config(arch.quantization, quantization).method,
        )
    world = tensor_parallel * pipeline_parallel
    link = decode.setup_link(model, setup, tensor_parallel=tensor_parallel, world=world)
    return decode.predict(workload, processor, link)


def _load_model(
    name: str, environ: Mapping[str, str], revision: str | None = None, *, force: bool = False
) -> tuple[dict[str, Any], list[TensorInfo] | None, str]:
    """(config, tensors or None, where it came from) for a path, an HF cache name or a
    bundled name (see ``adapters.model_source``)."""
    from bringup.adapters.model_source import load_model, locate_model

    loaded = load_model(locate_model(name, environ, revision=revision, hub=True))
    if loaded.checkpoint is not None and not force:
        refuse_incomplete(name, loaded.checkpoint.problems)
    return loaded.config, loaded.tensors, loaded.source.origin


def is_gguf(name: str) -> bool:
    """``name`` is a GGUF file (planned as llama.cpp's, not vLLM's)."""
    path = Path(name).expanduser()
    return path.is_file() and path.suffix == ".gguf"


def _gguf_checkpoint(name: str) -> Checkpoint | None:
    """The scanned checkpoint when ``name`` is a GGUF file (llama.cpp's buffers are planned
    by their own model), else None."""
    path = Path(name).expanduser()
    if not is_gguf(name):
        return None
    from bringup.adapters.checkpoint import scan_checkpoint

    return scan_checkpoint(path)


def _gpus(args: argparse.Namespace, ctx: Context, world: int) -> GpuSet:
    gpus = _gpus_given(args, ctx, world)
    if args.gpu_free:
        gpus = assemble.with_free(gpus, parse_memory("--gpu-free", args.gpu_free), args.gpu_free)
    return gpus


def _gpus_given(args: argparse.Namespace, ctx: Context, world: int) -> GpuSet:
    count = args.gpus or world
    if args.gpu_memory:
        size = parse_memory("--gpu-memory", args.gpu_memory)
        model = gpu_catalog.lookup(args.gpu) if args.gpu else None
        return assemble.gpus_of_model(model, count, size)
    if args.gpu:
        model = gpu_catalog.lookup(args.gpu)
        return assemble.gpus_of_model(model, count, model.memory_bytes)
    return _detected(args, ctx, world)


def _detected(args: argparse.Namespace, ctx: Context, world: int) -> GpuSet:
    from bringup.adapters.gpus import open_source

    try:
        readings = open_source(
            args.gpus_from, hint="no NVIDIA driver here? use --gpu NAME or --gpus-from FILE"
        ).read()
    except AdapterError as exc:
        raise UsageError(
            f"no GPU detected ({exc.message})",
            hint="give --gpu NAME (e.g. --gpu H100) or --gpu-memory SIZE, and --gpus N",
        ) from exc
    visible = select_visible(readings, ctx.environ.get("CUDA_VISIBLE_DEVICES"))
    if not visible:
        raise UsageError("no visible GPU", hint="check CUDA_VISIBLE_DEVICES, or give --gpu NAME")
    return assemble.gpus_from_readings(visible, world, args.gpus)


@dataclasses.dataclass(frozen=True)
class _Log:
    facts: dict[str, float | int | str]
    version: str | None
    lines: list[str]


def _calibration_log(path: str, ctx: Context) -> _Log:
    """The facts, vLLM version and figure lines of a successful startup log (``diagnose``)."""
    from bringup.adapters import files
    from bringup.cli.commands.diagnose import diagnose_path

    diagnosis = diagnose_path(path, None, ctx)
    if diagnosis.failure is not None:
        raise InputError(
            f"{printable(path)}: not a successful startup ({diagnosis.failure.summary})",
            hint="calibrate with the log of a startup that reached ready",
        )
    if not diagnosis.facts:
        raise InputError(
            f"{printable(path)}: no startup figures in it (no engine's startup log was found)",
            hint="calibrate with the log of a startup that reached ready",
        )
    lines: list[str] = []
    if path != "-":
        with files.open_file(path, what="log file") as fh:
            carry = b""
            for block in files.iter_blocks(fh, path=path, what="log file"):
                *whole, carry = (carry + block).split(b"\n")
                carry = carry[-4096:]  # a line without end is kept bounded
                for raw in whole:
                    line = raw[:400].decode("utf-8", "replace")
                    if is_source_line(line):
                        lines.append(printable(line.rstrip()))
                if len(lines) >= 64:
                    break
    return _Log(dict(diagnosis.facts), diagnosis.engine_version, lines)


def _cpu_memory_total() -> int:
    """Host memory as vLLM's CPU worker reads it (psutil), for the CPU plan."""
    import psutil

    return int(psutil.virtual_memory().total)


def _run_cpu(
    args: argparse.Namespace,
    ctx: Context,
    req: Requested,
    arch: Architecture,
    tensors: list[TensorInfo] | None,
    words: Sequence[str],
) -> Plan:
    """``plan --device cpu``: the KV pool of vLLM's CPU build (``core.plan.cpu``)."""
    total = (
        parse_memory("--gpu-memory", args.gpu_memory) if args.gpu_memory else _cpu_memory_total()
    )
    settings = resolve(
        req,
        memory_bytes=total,
        treats_as_a100=False,
        max_position_embeddings=arch.max_position_embeddings,
        default_quantization=None,
        dense=arch.dense,
    )
    if tensors is None:
        tensors = synthesize(arch, format_from_config(arch.quantization, settings.quantization))
    pool, estimate = cpu.kv_pool(
        arch,
        tensors,
        settings,
        memory_total_bytes=total,
        env_value=ctx.environ.get("VLLM_CPU_KVCACHE_SPACE"),
        explicit=args.kv_cache_memory_bytes
        or engine_args.get_flag(words, "--kv-cache-memory-bytes"),
    )
    plan = cpu.plan_cpu(
        arch,
        tensors,
        settings,
        pool_bytes=pool,
        memory_total_bytes=total,
        pool_is_estimate=estimate,
    )
    setup = flags.decode_setup(vars(args), words)
    decode.check_setup(setup, settings.tensor_parallel_size)
    bandwidth = parse_rate(args.memory_bandwidth) if args.memory_bandwidth else None
    workload = decode.workload_for(arch, tensors, settings, setup)
    speed = decode.predict(workload, cpu_processor(bandwidth, None, _busy(args, ctx)), None)
    return dataclasses.replace(plan, decode=speed)
