"""``bringup plan``: predict per-GPU memory of a vLLM server, and the failure, before launch.

Exit codes: 0 fits, 1 does not fit, 2 usage or bad input; an uncertain verdict
(``verdict.confidence``) exits as its nominal one.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bringup.cli import report_flags
from bringup.cli.commands import plan_decode
from bringup.cli.commands.plan_shared import cpu_processor, parse_memory, parse_rate
from bringup.cli.main import Context
from bringup.core import engine_args, engine_flags, fit_search, gpu_catalog, vllm_compile, wrappers
from bringup.core.checkpoint import Checkpoint, TensorInfo
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
    parse_architecture,
    resolve,
)
from bringup.core.plan.calibrate import calibrate, model_mismatches
from bringup.core.plan.calibrate import report as calibration_report
from bringup.core.plan.quant import format_from_config
from bringup.core.plan.result import CalibrationReport, Plan
from bringup.core.plan.settings import env_flag, rules_version, use_v1_from_env
from bringup.core.plan.synth import synthesize
from bringup.core.printable import printable
from bringup.core.vocab import Engine
from bringup.errors import AdapterError, InputError, UsageError
from bringup.render.busy import Busy, busy, quiet
from bringup.render.console import make_console
from bringup.render.gguf_plan import print_gguf_plan
from bringup.render.json_out import print_json
from bringup.render.plan import print_for_people
from bringup.units import parse_size

# bringup's own flag -> (dest, type) for vLLM flags also read from the server command
_VLLM_FLAGS: tuple[tuple[tuple[str, ...], str, type], ...] = (
    (("--tensor-parallel-size", "-tp"), "tensor_parallel_size", int),
    (("--pipeline-parallel-size", "-pp"), "pipeline_parallel_size", int),
    (("--data-parallel-size", "-dp"), "data_parallel_size", int),
    (("--data-parallel-size-local", "-dpl"), "data_parallel_size_local", int),
    (("--gpu-memory-utilization",), "gpu_memory_utilization", float),
    (("--max-model-len",), "max_model_len", str),
    (("--max-num-seqs",), "max_num_seqs", int),
    (("--max-num-batched-tokens",), "max_num_batched_tokens", int),
    (("--kv-cache-dtype",), "kv_cache_dtype", str),
    (("--quantization", "-q"), "quantization", str),
    (("--block-size",), "block_size", int),
    (("--cpu-offload-gb",), "cpu_offload_gb", float),
    (("--dtype",), "dtype", str),
    (("--speculative-config",), "speculative_config", str),
)
# dest -> (metavar: the value's unit, help) of each flag above
_FLAG_HELP: dict[str, tuple[str, str]] = {
    "tensor_parallel_size": ("N", "GPUs each copy of the model is split over (default 1)"),
    "pipeline_parallel_size": ("N", "pipeline stages, each on its own tp GPUs (default 1)"),
    "data_parallel_size": (
        "N",
        "engines, each with its own weights (over its tp x pp GPUs) and KV cache (default 1)",
    ),
    "data_parallel_size_local": ("N", "of the -dp engines, how many run on this node"),
    "gpu_memory_utilization": (
        "FRACTION",
        "share of each GPU's memory vLLM may use, 0 to 1 (default 0.92 from vLLM 0.33, else 0.9)",
    ),
    "max_model_len": (
        "TOKENS",
        "longest request in tokens, or auto (default: the model's context)",
    ),
    "max_num_seqs": (
        "N",
        "requests in one batch (default by GPU: 1024 on 70 GiB or more, else 256)",
    ),
    "max_num_batched_tokens": (
        "TOKENS",
        "tokens in one forward step, the profile run's size (default by GPU: 8192 or 2048)",
    ),
    "kv_cache_dtype": (
        "DTYPE",
        "element type of the KV cache: auto (the model's), fp8, fp8_e4m3, fp8_e5m2 (default auto)",
    ),
    "quantization": (
        "METHOD",
        "how the weights are stored when the config does not say: fp8, awq, gptq, mxfp4, nvfp4, ...",
    ),
    "block_size": ("TOKENS", "tokens per KV cache block (default: vLLM's, 16)"),
    "cpu_offload_gb": ("GIB", "GiB of each GPU's weights kept in CPU memory (default 0)"),
    "dtype": ("DTYPE", "the weights' type: auto (the config's), bfloat16, float16, float32"),
    "speculative_config": ("JSON", "vLLM's speculative decoding config, as JSON"),
}
# read by plan itself (the weights' type, speculative decoding), not part of Requested
_NOT_REQUESTED = ("dtype", "speculative_config")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bringup plan``."""
    parser.add_argument(
        "model",
        nargs="?",
        help="model folder, HF cache snapshot, config.json, or a bundled "
        "model name (e.g. MiniMax-M2.5); optional when the server command after -- names it",
    )
    gpu = parser.add_argument_group("GPUs (detected through NVML when none is given)")
    gpu.add_argument(
        "--gpu", metavar="NAME", help="a GPU from the catalog, e.g. H100, H200, 'RTX PRO 6000'"
    )
    gpu.add_argument(
        "--gpu-memory", metavar="SIZE", help="memory per GPU as CUDA reports it, e.g. 79.19GiB"
    )
    gpu.add_argument(
        "--gpu-free",
        metavar="SIZE",
        help="free memory per GPU at start when other processes hold some (default: all of it)",
    )
    gpu.add_argument("--gpus", type=int, metavar="N", help="GPUs available (default: tp x pp)")
    gpu.add_argument(
        "--gpus-from", metavar="FILE", help="read GPUs from a readings file instead of NVML"
    )
    eng = parser.add_argument_group(
        "engine settings (vLLM's names; also read from the command after --)"
    )
    for names, dest, kind in _VLLM_FLAGS:
        metavar, text = _FLAG_HELP.get(dest, (None, None))
        eng.add_argument(*names, dest=dest, type=kind, default=None, metavar=metavar, help=text)
    eng.add_argument(
        "--enable-expert-parallel",
        action="store_true",
        default=None,
        help="MoE experts spread whole over the GPUs (expert parallel) instead of each split",
    )
    eng.add_argument(
        "--enforce-eager",
        action="store_true",
        default=None,
        help="no CUDA graphs: no graph pool in memory, a slower decode",
    )
    eng.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default=None,
        help="cuda (GPUs, the default) or cpu: vLLM's CPU build, KV pool from "
        "VLLM_CPU_KVCACHE_SPACE",
    )
    eng.add_argument(
        "--kv-cache-memory-bytes",
        dest="kv_cache_memory_bytes",
        metavar="SIZE",
        default=None,
        help="the KV pool size vLLM is given (overrides the profile; on cpu, "
        "VLLM_CPU_KVCACHE_SPACE wins)",
    )
    eng.add_argument(
        "--engine-version", metavar="V", help="vLLM version the defaults follow (default 0.33)"
    )
    gg = parser.add_argument_group(
        "GGUF (llama.cpp): -c/-np/-ctk/-ctv/-fa are read from the llama.cpp command after --"
    )
    gg.add_argument(
        "--n-ctx",
        metavar="N",
        help="context length for a GGUF plan (default: the model's training context)",
    )
    plan_decode.add_arguments(parser)
    parser.add_argument(
        "--calibrate", metavar="LOG", help="a successful startup log of this model and GPUs"
    )
    parser.add_argument(
        "--force-calibrate",
        action="store_true",
        help="calibrate even with a log that looks like another model's",
    )
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    report_flags.add_markdown(parser)
    parser.add_argument(
        "--force",
        action="store_true",
        help="plan a checkpoint with missing or broken weight files from the tensors that "
        "are there (refused otherwise)",
    )
    parser.add_argument(
        "--list-models",
        action="store_true",
        help="list the bundled models (their Hugging Face ids, size and source) and exit",
    )
    parser.add_argument(
        "--list-gpus",
        action="store_true",
        help="list the GPU catalog (memory, bandwidth, datasheet) and exit",
    )
    parser.add_argument(
        "--compare",
        nargs=argparse.REMAINDER,
        metavar="MODEL [FLAGS]",
        help="plan another setup beside this one (repeatable): its model and its own flags; "
        "GPU, interconnect, nodes, bandwidth, context and engine flags given once apply to all",
    )


def run(args: argparse.Namespace, ctx: Context) -> int:
    """Make the plan (or the plans of ``--compare``) and print it; 0 fits, 1 does not fit."""
    if args.list_models or args.list_gpus:
        from bringup.cli.commands import plan_lists

        if args.list_models:
            return plan_lists.list_models(ctx, args.json)
        return plan_lists.list_gpus(ctx, args.json)
    if args.compare is not None:
        from bringup.cli.commands import plan_compare

        return plan_compare.run_compare(args, ctx, make)
    report_flags.check(args)
    made = make(args, ctx)
    if report_flags.markdown_target(args):
        from bringup.cli.plan_report import write_plan_report

        write_plan_report(args, ctx, made)
        ctx = report_flags.human_context(args, ctx)
    if args.json:
        print_json(made, ctx.stdout)
    elif isinstance(made, Plan):
        print_for_people(made, ctx.stdout, ctx.stderr, ctx.environ)
    else:
        print_gguf_plan(made, make_console(ctx.stdout, ctx.environ))
    return 0 if fits(made) else 1


def _busy(args: argparse.Namespace, ctx: Context) -> Busy:
    """The spinner for the seconds a plan measures this CPU's bandwidth: on stderr, only on
    a terminal, never under ``--json``."""
    return busy(ctx.stderr, ctx.environ, json_output=bool(getattr(args, "json", False)))


def fits(made: Plan | dict[str, Any]) -> bool:
    """Whether a plan (vLLM's, or the GGUF plan's JSON object) fits."""
    return made.verdict.fits if isinstance(made, Plan) else bool(made["verdict"]["fits"])


def make(args: argparse.Namespace, ctx: Context) -> Plan | dict[str, Any]:
    """The plan for the parsed flags: a ``Plan`` (vLLM, with its startup prediction), or the
    GGUF plan's JSON object."""
    made = _make(args, ctx)
    if not isinstance(made, Plan):
        return made
    from bringup.follow import startup_time

    command = engine_args.parse_server_command(args.passthrough) if args.passthrough else None
    model = args.model or (command.model if command else None) or ""
    flags = command.flags if command else ()
    return dataclasses.replace(made, startup=startup_time.for_plan(made, model, flags, ctx.environ))


def _make(args: argparse.Namespace, ctx: Context) -> Plan | dict[str, Any]:
    command = engine_args.parse_server_command(args.passthrough) if args.passthrough else None
    # the server's environment: bringup's own, then NAME=value words of the command
    # (`env VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve ...`)
    environ = {**ctx.environ, **(command_environment(command.entry) if command else {})}
    req = _requested(args, command.flags if command else (), environ)
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
    flags = command.flags if command else ()
    config, tensors = engine_flags.with_dtype(config, tensors, _flag(args, flags, "dtype"))
    arch = parse_architecture(config)
    warnings = (*assemble.warnings_for(req, arch), *_flag_warnings(args, command, req))
    if req.device == "cpu":
        if (req.decode_context_parallel_size or 1) != 1:
            raise UsageError(
                "--decode-context-parallel-size is planned for GPUs only",
                hint="drop -dcp with --device cpu",
            )
        cpu_plan = _run_cpu(args, ctx, req, arch, tensors, command.flags if command else ())
        return dataclasses.replace(cpu_plan, warnings=warnings)
    world = (req.tensor_parallel_size or 1) * (req.pipeline_parallel_size or 1)
    gpus = _gpus(args, ctx, world)
    version_before = assemble.settings_for(req, arch, gpus).engine_version  # checks req early
    log = _calibration_log(args.calibrate, ctx) if args.calibrate else None
    planned = req
    if log is not None and log.version and not req.engine_version:
        # the log's vLLM version is the one whose rules apply
        planned = dataclasses.replace(req, engine_version=_short_version(log.version))

    def calibrator(planner: Planner, settings: Settings) -> tuple[Calibration, CalibrationReport]:
        assert log is not None
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

    bandwidth = parse_rate(args.memory_bandwidth) if args.memory_bandwidth else None
    gpu = gpu_catalog.find(args.gpu or gpus.name)
    if gpu is not None and gpu.unified and not args.gpu_free:
        warnings = (*warnings, unified_memory_warning(gpu))
    plan = assemble.gpu_plan(
        arch,
        tensors,
        gpus,
        planned,
        setup=plan_decode.decode_setup(args, command.flags if command else ()),
        gpu=gpu,
        bandwidth=bandwidth,
        warnings=warnings,
        calibrate=calibrator if log is not None else None,
        free_known=bool(args.gpu_free),
    )
    if plan.verdict.fits:
        return plan
    changes = fit_search.changes_that_fit(
        arch, tensors, gpus, plan.settings, _quantized_variants(model_arg, config)
    )
    appended = {(r.flag, r.value) for r in plan.recommendations}
    new = tuple(
        c for c in changes if c.model or tuple(c.flags[:2]) not in appended or len(c.flags) != 2
    )
    return dataclasses.replace(plan, what_fits=new)


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


def unified_memory_warning(gpu: gpu_catalog.GpuModel) -> str:
    """The caveat of a part whose memory the CPU shares (GB10, MI300A, Strix Halo)."""
    return (
        f"{gpu.name}'s memory is shared with the CPU: the OS and every other process hold part "
        f"of the {gpu.memory_bytes / 2**30:.0f} GiB planned here; give --gpu-free SIZE "
        "(what is free before the start) for a plan that counts them"
    )


def _flag(args: argparse.Namespace, flags: Sequence[str], dest: str) -> str | None:
    """A flag of :data:`_VLLM_FLAGS` as text: bringup's own, else the server command's."""
    names = next(n for n, d, _ in _VLLM_FLAGS if d == dest)
    own = getattr(args, dest, None)
    return str(own) if own is not None else engine_args.get_flag(flags, *names)


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
    spec = _flag(args, command.flags if command else (), "speculative_config")
    if spec:
        out.append(engine_flags.speculative_warning(engine_flags.parse_speculative(spec)))
    if req.cpu_offload_gb:
        out.append(
            f"--cpu-offload-gb {req.cpu_offload_gb:g}: that much of each GPU's weights stays in "
            "CPU memory and crosses PCIe in every forward pass (vLLM's UVA offload): decode "
            "runs far below the speed shown"
        )
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


def _short_version(text: str) -> str:
    """``"0.11.1rc3.dev29+g3fa2c1218"`` → ``"0.11"``: the part the rules read (per minor
    version, and per patch for 0.5 and 0.6: ``settings.rules_version``)."""
    return rules_version(text)


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


def _requested(
    args: argparse.Namespace, flags: Sequence[str], environ: Mapping[str, str] | None = None
) -> Requested:
    values: dict[str, Any] = {}
    for names, dest, kind in _VLLM_FLAGS:
        own = getattr(args, dest)
        text = own if own is not None else engine_args.get_flag(flags, *names)
        if text is not None:
            values[dest] = _convert(names[0], str(text), kind)
    for dest in _NOT_REQUESTED:
        values.pop(dest, None)
    max_len = values.pop("max_model_len", None)
    if max_len is not None:
        values["max_model_len"] = (
            -1 if str(max_len) in ("auto", "-1") else _convert("--max-model-len", max_len, int)
        )
    return Requested(
        **values,
        enable_expert_parallel=bool(
            args.enable_expert_parallel or engine_args.has_flag(flags, "--enable-expert-parallel")
        ),
        enforce_eager=bool(args.enforce_eager or engine_args.has_flag(flags, "--enforce-eager")),
        engine_version=args.engine_version,
        use_v1=use_v1_from_env((environ or {}).get("VLLM_USE_V1")),
        allow_long_max_model_len=env_flag((environ or {}).get("VLLM_ALLOW_LONG_MAX_MODEL_LEN")),
        device=args.device or "cuda",
        decode_context_parallel_size=plan_decode.dcp_size(args, flags),
        compilation=vllm_compile.parse(flags),
    )


def command_environment(entry: Sequence[str]) -> dict[str, str]:
    """The ``NAME=value`` words before the server's entry point (bare or after ``env``)."""
    return dict(w.split("=", 1) for w in entry if wrappers.is_assignment(w))


def _convert(flag: str, text: str, kind: type) -> Any:
    if kind is int and text.lower().endswith("k") and text[:-1].isdigit():
        return int(text[:-1]) * 1024
    try:
        return kind(text)
    except ValueError as exc:
        raise UsageError(f"{flag}: not a {kind.__name__}: {text!r}") from exc


def _load_model(
    name: str, environ: Mapping[str, str], revision: str | None = None, *, force: bool = False
) -> tuple[dict[str, Any], list[TensorInfo] | None, str]:
    """(config, tensors or None, where it came from) for a path, an HF cache name or a
    bundled name (see ``adapters.model_source``)."""
    from bringup.adapters.model_source import load_model, locate_model

    loaded = load_model(locate_model(name, environ, revision=revision, hub=True))
    if loaded.checkpoint is not None and not force:
        _refuse_incomplete(name, loaded.checkpoint.problems)
    return loaded.config, loaded.tensors, loaded.source.origin


# checkpoint problems (core.checkpoint.PROBLEM_KINDS) that leave tensors out of the scan: a plan
# of what is left would be a plan of a smaller model
_INCOMPLETE = (
    "missing_shard",
    "truncated",
    "header_invalid",
    "header_too_large",
    "lfs_pointer",
    "index_tensor_missing",
)


def _refuse_incomplete(name: str, problems: Sequence[Any]) -> None:
    """InputError naming the first problem that leaves weights out, if any."""
    found = [p for p in problems if p.kind in _INCOMPLETE]
    if not found:
        return
    first = found[0]
    more = f" and {len(found) - 1} more" if len(found) > 1 else ""
    where = f"{first.file}: " if first.file else ""
    raise InputError(
        f"{printable(name)}: the checkpoint is incomplete ({first.kind}: {where}{first.detail}"
        f"{more}); its plan would be a smaller model's",
        hint=f"{first.fix} (bringup verify {printable(name)} lists them), or add --force to "
        "plan the tensors that are there",
    )


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
        free = parse_memory("--gpu-free", args.gpu_free)
        if not 0 <= free <= gpus.total_bytes:
            raise UsageError(
                f"--gpu-free {args.gpu_free} must be between 0 and the GPU's "
                f"{gpus.total_bytes / 1024**3:.2f} GiB"
            )
        gpus = dataclasses.replace(gpus, free_bytes=free)
    return gpus


def _gpus_given(args: argparse.Namespace, ctx: Context, world: int) -> GpuSet:
    count = args.gpus or world
    if args.gpu_memory:
        size = parse_memory("--gpu-memory", args.gpu_memory)
        model = gpu_catalog.lookup(args.gpu) if args.gpu else None
        return GpuSet(
            model.name if model else "GPU",
            count,
            size,
            size,
            bool(model and model.vllm_treats_as_a100),
            model.compute_capability if model else None,
            model.interconnect if model else None,
        )
    if args.gpu:
        model = gpu_catalog.lookup(args.gpu)
        return GpuSet(
            model.name,
            count,
            model.memory_bytes,
            model.memory_bytes,
            model.vllm_treats_as_a100,
            model.compute_capability,
            model.interconnect,
        )
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


_SOURCE_PHRASES = (
    "Model loading took",
    "Loading model weights took",
    "Available KV cache memory",
    "Graph capturing finished",
    "KV cache size",
    "version",
    "LLM engine (v",
)


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
                    if any(p in line for p in _SOURCE_PHRASES):
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
    flags: Sequence[str],
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
    env_text = ctx.environ.get("VLLM_CPU_KVCACHE_SPACE")
    try:
        pool = cpu.kv_space_from_env(env_text)
    except ValueError as exc:
        raise UsageError(
            f"VLLM_CPU_KVCACHE_SPACE must be a whole number of GiB, got {env_text!r}"
        ) from exc
    explicit = args.kv_cache_memory_bytes or engine_args.get_flag(flags, "--kv-cache-memory-bytes")
    if pool is None and explicit is not None:
        pool = parse_size(str(explicit))
    estimate = pool is None
    if pool is None:
        # vLLM: ceil(total x utilization) - the worker's RSS; the RSS holds at least the weights
        weights = cpu.weights_per_rank(arch, tensors, settings)
        pool = max(0, math.ceil(total * settings.gpu_memory_utilization) - weights)
    plan = cpu.plan_cpu(
        arch,
        tensors,
        settings,
        pool_bytes=pool,
        memory_total_bytes=total,
        pool_is_estimate=estimate,
    )
    setup = plan_decode.decode_setup(args, flags)
    decode.check_setup(setup, settings.tensor_parallel_size)
    bandwidth = parse_rate(args.memory_bandwidth) if args.memory_bandwidth else None
    workload = decode.workload_for(arch, tensors, settings, setup)
    speed = decode.predict(workload, cpu_processor(bandwidth, None, _busy(args, ctx)), None)
    return dataclasses.replace(plan, decode=speed)
