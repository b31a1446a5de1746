"""``bringup plan``: predict per-GPU memory of a vLLM server, and the failure, before launch.

Exit codes: 0 fits, 1 does not fit, 2 usage or bad input.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from bringup.cli.main import Context
from bringup.core import engine_args, gpu_catalog
from bringup.core.checkpoint import Checkpoint, TensorInfo
from bringup.core.gpu import select_visible
from bringup.core.plan import GpuSet, Planner, Requested, parse_architecture, resolve
from bringup.core.plan.calibrate import calibrate
from bringup.core.plan.quant import format_from_config
from bringup.core.plan.synth import synthesize
from bringup.errors import AdapterError, InputError, UsageError
from bringup.render.console import make_console
from bringup.render.json_out import print_json
from bringup.render.plan import print_plan
from bringup.units import parse_size

# bringup's own flag -> (dest, type) for vLLM flags also read from the server command
_VLLM_FLAGS: tuple[tuple[tuple[str, ...], str, type], ...] = (
    (("--tensor-parallel-size", "-tp"), "tensor_parallel_size", int),
    (("--pipeline-parallel-size", "-pp"), "pipeline_parallel_size", int),
    (("--gpu-memory-utilization",), "gpu_memory_utilization", float),
    (("--max-model-len",), "max_model_len", str),
    (("--max-num-seqs",), "max_num_seqs", int),
    (("--max-num-batched-tokens",), "max_num_batched_tokens", int),
    (("--kv-cache-dtype",), "kv_cache_dtype", str),
    (("--quantization", "-q"), "quantization", str),
)


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
    gpu.add_argument("--gpus", type=int, metavar="N", help="GPUs available (default: tp x pp)")
    gpu.add_argument(
        "--gpus-from", metavar="FILE", help="read GPUs from a readings file instead of NVML"
    )
    eng = parser.add_argument_group(
        "engine settings (vLLM's names; also read from the command after --)"
    )
    for names, dest, kind in _VLLM_FLAGS:
        eng.add_argument(*names, dest=dest, type=kind, default=None)
    eng.add_argument("--enable-expert-parallel", action="store_true", default=None)
    eng.add_argument("--enforce-eager", action="store_true", default=None)
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
    parser.add_argument(
        "--calibrate", metavar="LOG", help="a successful startup log of this model and GPUs"
    )
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")


def run(args: argparse.Namespace, ctx: Context) -> int:
    """Make the plan and print it; 0 fits, 1 does not fit."""
    command = engine_args.parse_server_command(args.passthrough) if args.passthrough else None
    req = _requested(args, command.flags if command else ())
    model_arg = args.model or (command.model if command else None)
    if not model_arg:
        raise UsageError(
            "no model given", hint="bringup plan MODEL, or a server command after -- that names one"
        )
    gguf = _gguf_checkpoint(model_arg)
    if gguf is not None:
        from bringup.cli.commands import plan_gguf

        plan_gguf.check_not_mixed(args)
        return plan_gguf.run_gguf(gguf, args, args.passthrough or (), ctx)
    config, tensors = _load_model(model_arg)
    arch = parse_architecture(config)
    world = (req.tensor_parallel_size or 1) * (req.pipeline_parallel_size or 1)
    gpus = _gpus(args, ctx, world)
    settings = resolve(
        req,
        memory_bytes=gpus.total_bytes,
        treats_as_a100=gpus.treats_as_a100,
        max_position_embeddings=arch.max_position_embeddings,
        default_quantization=None,
    )
    if tensors is None:
        tensors = synthesize(arch, format_from_config(arch.quantization, settings.quantization))
    planner = Planner(arch, tensors, gpus)
    if args.calibrate:
        planner.calibration = calibrate(planner, settings, _facts(args.calibrate))
    plan = planner.plan(settings)
    if args.json:
        print_json(plan, ctx.stdout)
    else:
        print_plan(plan, make_console(ctx.stdout, ctx.environ))
    return 0 if plan.verdict.fits else 1


def _requested(args: argparse.Namespace, flags: Sequence[str]) -> Requested:
    values: dict[str, Any] = {}
    for names, dest, kind in _VLLM_FLAGS:
        own = getattr(args, dest)
        text = own if own is not None else engine_args.get_flag(flags, *names)
        if text is not None:
            values[dest] = _convert(names[0], str(text), kind)
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
    )


def _convert(flag: str, text: str, kind: type) -> Any:
    if kind is int and text.lower().endswith("k") and text[:-1].isdigit():
        return int(text[:-1]) * 1024
    try:
        return kind(text)
    except ValueError as exc:
        raise UsageError(f"{flag}: not a {kind.__name__}: {text!r}") from exc


def _load_model(name: str) -> tuple[dict[str, Any], list[TensorInfo] | None]:
    """(config, tensors) from a config.json, a checkpoint, or a bundled config (tensors None)."""
    path = Path(name).expanduser()
    if path.is_file() and path.suffix == ".json":
        return _read_json(path), None
    if path.exists():
        from bringup.adapters.checkpoint import scan_checkpoint

        ckpt = scan_checkpoint(path)
        if ckpt.format != "safetensors":
            raise UsageError(
                f"{name}: the planner reads safetensors checkpoints; GGUF planning is separate"
            )
        if ckpt.config is None:
            raise InputError(
                f"{name}: no readable config.json", hint="the planner needs the architecture"
            )
        return dict(ckpt.config), list(ckpt.tensors) or None
    bundled = _bundled(name)
    if bundled is None:
        raise InputError(
            f"no such model: {name}",
            hint=f"give a folder or config.json, or a bundled model: {', '.join(_bundled_names())}",
        )
    return bundled, None


def _gguf_checkpoint(name: str) -> Checkpoint | None:
    """The scanned checkpoint when ``name`` is a GGUF file (llama.cpp's buffers are planned
    by their own model), else None."""
    path = Path(name).expanduser()
    if not (path.is_file() and path.suffix == ".gguf"):
        return None
    from bringup.adapters.checkpoint import scan_checkpoint

    return scan_checkpoint(path)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise InputError(f"{path} is not a config.json object")
    return data


def _bundled_names() -> list[str]:
    folder = resources.files("bringup.data").joinpath("models")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))


def _bundled(name: str) -> dict[str, Any] | None:
    wanted = name.rstrip("/").rsplit("/", 1)[-1].lower()
    for known in _bundled_names():
        if known.lower() == wanted:
            text = (
                resources.files("bringup.data")
                .joinpath("models")
                .joinpath(f"{known}.json")
                .read_text(encoding="utf-8")
            )
            data: dict[str, Any] = json.loads(text)
            return data
    return None


def _gpus(args: argparse.Namespace, ctx: Context, world: int) -> GpuSet:
    count = args.gpus or world
    if args.gpu_memory:
        size = parse_size(args.gpu_memory)
        model = gpu_catalog.lookup(args.gpu) if args.gpu else None
        return GpuSet(
            model.name if model else "GPU",
            count,
            size,
            size,
            bool(model and model.vllm_treats_as_a100),
        )
    if args.gpu:
        model = gpu_catalog.lookup(args.gpu)
        return GpuSet(
            model.name, count, model.memory_bytes, model.memory_bytes, model.vllm_treats_as_a100
        )
    return _detected(args, ctx, world)


def _detected(args: argparse.Namespace, ctx: Context, world: int) -> GpuSet:
    from bringup.adapters.gpus import open_source

    try:
        readings = open_source(args.gpus_from).read()
    except AdapterError as exc:
        raise UsageError(
            f"no GPU detected ({exc.message})",
            hint="give --gpu NAME (e.g. --gpu H100) or --gpu-memory SIZE, and --gpus N",
        ) from exc
    visible = select_visible(readings, ctx.environ.get("CUDA_VISIBLE_DEVICES"))
    if not visible:
        raise UsageError("no visible GPU", hint="check CUDA_VISIBLE_DEVICES, or give --gpu NAME")
    used = visible[: max(1, world)]
    model = gpu_catalog.find(used[0].name)
    return GpuSet(
        name=model.name if model else used[0].name,
        count=args.gpus or len(visible),
        total_bytes=min(g.memory_total_bytes for g in used),
        free_bytes=min(g.memory_free_bytes for g in used),
        treats_as_a100="a100" in used[0].name.lower(),
    )


def _facts(path: str) -> dict[str, float | int | str]:
    try:
        from bringup.core.analyzer import diagnose_bytes  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise UsageError(
            "--calibrate needs `bringup diagnose`, which is not available in this build"
        ) from exc
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from exc
    diagnosis = diagnose_bytes(data)
    if diagnosis.failure is not None:
        raise InputError(
            f"{path}: not a successful startup ({diagnosis.failure.summary})",
            hint="calibrate with the log of a startup that reached ready",
        )
    facts: dict[str, float | int | str] = dict(diagnosis.facts)
    return facts
