"""``bringup plan A [flags] --compare B [flags] ...``: several setups side by side.

The seed's decision, made before any download: Kimi-K2.5 in NVFP4 on 8 GPUs or MiniMax-M2.5 in
FP8 on 4, over PCIe split across two sockets? Each setup is a model and its own flags (``-tp``,
``--quantization``, ...); the flags that describe the machine rather than the setup
(:data:`SHARED`: the GPU, the interconnect, the nodes and their network, the bandwidth, the
context, the engine version and device) apply to every setup that does not set them, wherever they were given. A server command
after ``--`` belongs to the first setup. Exit 0 when every setup fits, else 1.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from bringup.cli.main import Context, command_parser
from bringup.core.plan.result import Plan
from bringup.core.plan.settings import Settings
from bringup.errors import UsageError
from bringup.render.console import make_console
from bringup.render.json_out import print_json
from bringup.render.plan import CompareRow, print_compare

SHARED = (
    "gpu",
    "gpu_memory",
    "gpus_from",
    "interconnect",
    "nnodes",
    "node_interconnect",
    "memory_bandwidth",
    "context_tokens",
    "engine_version",
    "device",
)


MakePlan = Callable[[argparse.Namespace, Context], "Plan | dict[str, Any]"]


def run_compare(args: argparse.Namespace, ctx: Context, make: MakePlan) -> int:
    """Plan every setup with ``make`` (``plan``'s own, passed in: this module does not import
    ``plan``, which dispatches here), print one table (or ``{"setups": [...], "pick": ...}``)
    labelled by what differs, ending with the pick and why; 0 when all fit."""
    setups = split_setups(args)
    made = [make(s, ctx) for s in setups]
    rows = [row(name, m) for name, m in zip(labels(setups, made), made, strict=True)]
    chosen, why = pick(rows)
    if setups[0].json:
        print_json(
            {
                "setups": [{"setup": r.label, "plan": m} for r, m in zip(rows, made, strict=True)],
                "pick": {"setup": rows[chosen].label if chosen is not None else None, "why": why},
            },
            ctx.stdout,
        )
    else:
        print_compare(rows, make_console(ctx.stdout, ctx.environ))
        name = rows[chosen].label if chosen is not None else "none"
        ctx.stdout.write(f"pick: {name}: {why}\n")
    return 0 if all(r.fits for r in rows) else 1


def pick(rows: list[CompareRow]) -> tuple[int | None, str]:
    """The setup to take and why: of those that fit, the fastest expected batch-1 decode
    (within 5 %: the one with more KV cache tokens, so more requests at once); none when
    none fits."""
    fitting = [i for i, r in enumerate(rows) if r.fits]
    if not fitting:
        return None, "no setup fits (each column's fits row says why)"
    if len(fitting) == 1:
        only = rows[fitting[0]]
        return fitting[0], f"the only one that fits ({only.kv_tokens:,} KV cache tokens)"

    def expected(i: int) -> float:
        d = rows[i].decode
        return float(d.expected_tokens_per_s) if d is not None else 0.0

    fastest = max(expected(i) for i in fitting)
    close = [i for i in fitting if expected(i) >= 0.95 * fastest]
    best = max(close, key=lambda i: (rows[i].kv_tokens, expected(i)))
    others = [i for i in fitting if i != best]
    runner = max(others, key=expected)
    r, other = rows[best], rows[runner]
    if expected(best) > 1.05 * expected(runner):
        ratio = expected(best) / expected(runner) if expected(runner) else float("inf")
        return best, (
            f"fits, the fastest expected decode ({expected(best):,.1f} tok/s, {ratio:.2f}x "
            f"{other.label}'s), {r.kv_tokens:,} KV cache tokens"
        )
    return best, (
        f"fits, decode within 5 % of the fastest ({expected(best):,.1f} tok/s), and the most "
        f"KV cache tokens of those ({r.kv_tokens:,} against {other.label}'s {other.kv_tokens:,})"
    )


# what sets setups apart, in label order: (the flag's dest, its value's text in a plan's settings)
_SETTING_PARTS: tuple[tuple[str, Callable[[Settings], str]], ...] = (
    ("quantization", lambda s: s.quantization or "as stored"),
    ("kv_cache_dtype", lambda s: f"kv {s.kv_cache_dtype}"),
    ("tensor_parallel_size", lambda s: f"tp {s.tensor_parallel_size}"),
    ("pipeline_parallel_size", lambda s: f"pp {s.pipeline_parallel_size}"),
    ("enable_expert_parallel", lambda s: "ep" if s.enable_expert_parallel else "no ep"),
    ("decode_context_parallel_size", lambda s: f"dcp {s.decode_context_parallel_size}"),
    ("max_model_len", lambda s: f"len {s.max_model_len}"),
    ("max_num_seqs", lambda s: f"seqs {s.max_num_seqs}"),
    ("max_num_batched_tokens", lambda s: f"batched {s.max_num_batched_tokens}"),
    ("gpu_memory_utilization", lambda s: f"util {s.gpu_memory_utilization:g}"),
    ("enforce_eager", lambda s: "eager" if s.enforce_eager else "graphs"),
    ("block_size", lambda s: f"block {s.block_size or 'default'}"),
    ("cpu_offload_gb", lambda s: f"offload {s.cpu_offload_bytes / 2**30:g}GiB"),
    ("engine_version", lambda s: f"vLLM {s.engine_version}"),
)


def labels(setups: list[argparse.Namespace], made: list[Plan | dict[str, Any]]) -> list[str]:
    """Each setup's name: what differs between the setups. Setups of one model: every
    planned setting whose value differs (flags after -- included) and the GPU where it
    differs; setups of several models: the model, then the settings that differ and that a
    setup set. A setup nothing sets apart gets its position."""
    models = [_model_name(s) for s in setups]
    parts: list[list[str]] = [[m] if len(set(models)) > 1 else [] for m in models]
    plans = [m for m in made if isinstance(m, Plan)]
    if len(plans) == len(made):
        given = _given(setups)
        for dest, text in _SETTING_PARTS:
            values = [text(m.settings) for m in plans]
            if len(set(values)) > 1 and (len(set(models)) == 1 or dest in given):
                for out, value in zip(parts, values, strict=True):
                    out.append(value)
        gpus = [m.decode.processor if m.decode else "GPU" for m in plans]
        if len(set(gpus)) > 1:
            for out, value in zip(parts, gpus, strict=True):
                out.append(f"on {value}")
    names = [" ".join(p) or models[i] for i, p in enumerate(parts)]
    if len(set(names)) < len(names):
        names = [f"{n} #{i + 1}" for i, n in enumerate(names)]
    return names


def _given(setups: list[argparse.Namespace]) -> set[str]:
    """The settings' dests any setup set, as its own flag or in the server command."""
    from bringup.core import engine_args

    out = {dest for dest, _ in _SETTING_PARTS for s in setups if getattr(s, dest, None)}
    command = (
        engine_args.parse_server_command(setups[0].passthrough) if setups[0].passthrough else None
    )
    if command is not None:
        for dest, _ in _SETTING_PARTS:
            if engine_args.has_flag(command.flags, "--" + dest.replace("_", "-")):
                out.add(dest)
    return out


def _model_name(args: argparse.Namespace) -> str:
    """The model's last path part: the setup's own, else its server command's."""
    from bringup.core import engine_args

    model = args.model
    if not model and args.passthrough:
        model = engine_args.parse_server_command(args.passthrough).model
    return str(model or "(from the server command)").rstrip("/").rsplit("/", 1)[-1]


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
            uncertain=v.confidence == "uncertain",
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
