"""``bringup plan A [flags] --compare B [flags] ...``: several setups side by side.

The seed's decision, made before any download: Kimi-K2.5 in NVFP4 on 8 GPUs or MiniMax-M2.5 in
FP8 on 4, over PCIe split across two sockets? Each setup is a model and its own flags (``-tp``,
``--quantization``, ...); the flags that describe the machine rather than the setup
(:data:`SHARED`: the GPU, the interconnect, the bandwidth, the context, the engine version and
device) apply to every setup that does not set them, wherever they were given. A server command
after ``--`` belongs to the first setup. Exit 0 when every setup fits, else 1.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from bringup.cli.main import Context, command_parser
from bringup.core.plan.result import Plan
from bringup.errors import UsageError
from bringup.render.console import make_console
from bringup.render.json_out import print_json
from bringup.render.plan import CompareRow, print_compare

SHARED = (
    "gpu",
    "gpu_memory",
    "gpus_from",
    "interconnect",
    "memory_bandwidth",
    "context_tokens",
    "engine_version",
    "device",
)


MakePlan = Callable[[argparse.Namespace, Context], "Plan | dict[str, Any]"]


def run_compare(args: argparse.Namespace, ctx: Context, make: MakePlan) -> int:
    """Plan every setup with ``make`` (``plan``'s own, passed in: this module does not import
    ``plan``, which dispatches here), print one table (or ``{"setups": [...]}``); 0 when all fit."""
    setups = split_setups(args)
    made = [make(s, ctx) for s in setups]
    rows = [row(label(s), m) for s, m in zip(setups, made, strict=True)]
    if setups[0].json:
        print_json(
            {"setups": [{"setup": r.label, "plan": m} for r, m in zip(rows, made, strict=True)]},
            ctx.stdout,
        )
    else:
        print_compare(rows, make_console(ctx.stdout, ctx.environ))
    return 0 if all(r.fits for r in rows) else 1


def split_setups(args: argparse.Namespace) -> list[argparse.Namespace]:
    """The first setup and one per ``--compare``, shared flags filled in across them."""
    chunks: list[list[str]] = [[]]
    for word in args.compare or []:
        if word == "--compare":
            chunks.append([])
        else:
            chunks[-1].append(word)
    if any(not c or c[0].startswith("-") for c in chunks):
        raise UsageError(
            "--compare needs a model first, then its flags",
            hint="e.g. plan Kimi-K2 -tp 8 --compare MiniMax-M2.5 -tp 4 --gpu H100",
        )
    parser = command_parser("plan")
    first = argparse.Namespace(**{**vars(args), "compare": None})
    others = [parser.parse_args(chunk) for chunk in chunks]
    setups = [first, *others]
    as_json = any(s.json for s in setups)  # --json anywhere
    for s in setups:
        s.json = as_json
    for extra in others:
        extra.passthrough = None
    for dest in SHARED:
        default = parser.get_default(dest)
        given = next((getattr(s, dest) for s in setups if getattr(s, dest) != default), default)
        for s in setups:
            if getattr(s, dest) == default:
                setattr(s, dest, given)
    return setups


def label(args: argparse.Namespace) -> str:
    """How a setup is named in the table: the model and the flags that set it apart."""
    model = args.model or "(from the server command)"
    parts = [model.rstrip("/").rsplit("/", 1)[-1]]
    if args.quantization:
        parts.append(args.quantization)
    if args.tensor_parallel_size:
        parts.append(f"tp {args.tensor_parallel_size}")
    if args.pipeline_parallel_size:
        parts.append(f"pp {args.pipeline_parallel_size}")
    if args.enable_expert_parallel:
        parts.append("ep")
    return " ".join(parts)


def row(name: str, made: Plan | dict[str, Any]) -> CompareRow:
    """One column of the table, from a vLLM plan or a GGUF plan's JSON object."""
    if isinstance(made, Plan):
        s, v, d = made.settings, made.verdict, made.decode
        where = f"{s.world_size} x {d.processor if d else 'GPU'}"
        if d is not None and d.interconnect and s.world_size > 1:
            where += f", {d.interconnect}"
        return CompareRow(
            label=name,
            hardware=where,
            fits=v.fits,
            verdict="fits" if v.fits else f"{v.failure_class} at {v.phase}",
            weights_bytes=made.per_gpu.weights_bytes,
            kv_tokens=made.kv_cache.tokens,
            max_concurrency=made.kv_cache.max_concurrency,
            context=s.max_model_len,
            decode=made.decode,
        )
    v = made["verdict"]
    return CompareRow(
        label=name,
        hardware=f"llama.cpp, {made['memory']['where']}",
        fits=bool(v["fits"]),
        verdict="fits" if v["fits"] else f"{v['failure_class']} at {v['phase']}",
        weights_bytes=int(made["memory"]["weights_bytes"]),
        kv_tokens=int(made["kv_cache"]["tokens"]),
        max_concurrency=float(made["settings"]["n_parallel"]),
        context=int(made["settings"]["n_ctx_padded"]),
        decode=made["decode"],
    )
