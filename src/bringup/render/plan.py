"""Human output of ``bringup plan``: the per-GPU table, KV capacity, verdict, flags to append."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TextIO

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from bringup.core.plan.decode import DecodeSpeed
from bringup.core.plan.result import Plan, Verdict
from bringup.render.console import fit, make_console
from bringup.render.startup_time import print_startup
from bringup.render.verify import format_parameters
from bringup.units import format_bytes

_ROWS = (
    ("weights", "weights_bytes", "this rank's share of the checkpoint"),
    ("activation peak", "activation_peak_bytes", "profile run at max_num_batched_tokens"),
    ("non-torch", "non_torch_bytes", "CUDA context, NCCL, cuBLAS"),
    ("CUDA graphs", "cuda_graph_bytes", "graph pool"),
    ("KV cache", "kv_cache_bytes", "what is left of the budget"),
    ("sampler warmup", "sampler_warmup_bytes", "warmup beyond the profile run"),
    ("headroom", "headroom_bytes", "free at the worst moment"),
)

_CPU_ROWS = (
    ("weights", "weights_bytes", "one worker's share of the checkpoint"),
    ("KV cache", "kv_cache_bytes", "VLLM_CPU_KVCACHE_SPACE (or the estimate)"),
    ("left", "headroom_bytes", "host memory not taken by weights and KV"),
)


def format_plan(plan: Plan) -> Group:
    """The plan as rich renderables."""
    s, g = plan.settings, plan.per_gpu
    head = Text(
        f"{plan.model.architecture}: {format_parameters(plan.model.parameters)} parameters, "
        f"{format_bytes(plan.model.weights_bytes_total)} of weights; vLLM {s.engine_version}, "
        f"tp {s.tensor_parallel_size}, pp {s.pipeline_parallel_size}"
        f"{f', dp {s.data_parallel_size}' if s.data_parallel_size > 1 else ''}"
        f"{', expert parallel' if s.enable_expert_parallel else ''}, "
        f"utilization {s.gpu_memory_utilization}, max_num_seqs {s.max_num_seqs}, "
        f"max_num_batched_tokens {s.max_num_batched_tokens}, max_model_len {s.max_model_len}, "
        f"kv-cache-dtype {s.kv_cache_dtype}"
    )
    cpu = s.device == "cpu"
    title = (
        f"host memory, vLLM's CPU build ({format_bytes(g.total_bytes)} total)"
        if cpu
        else f"per GPU ({format_bytes(g.total_bytes)} total)"
    )
    table = Table(title=title, title_justify="left")
    table.add_column("part")
    table.add_column("bytes", justify="right")
    table.add_column("share", justify="right")
    table.add_column("what")
    for label, field, what in _CPU_ROWS if cpu else _ROWS:
        value = getattr(g, field)
        style = "red" if field == "headroom_bytes" and value < 0 else None
        table.add_row(
            label, format_bytes(value), f"{100 * value / g.total_bytes:.1f}%", what, style=style
        )
    kv = plan.kv_cache
    across = (
        f" (tokens and concurrency counted across the DCP group of {kv.dcp_group_size} GPUs,"
        " bytes per token on one)"
        if kv.dcp_group_size > 1
        else ""
    )
    if s.data_parallel_size > 1:
        across += (
            f" in each of the {s.data_parallel_size} data-parallel engines (each its own KV cache:"
            f" {s.data_parallel_size * kv.tokens:,} tokens in all)"
        )
    low = (
        f" ({kv.tokens_low:,} at the low end of the plan's error bar)"
        if kv.tokens_low is not None
        else ""
    )
    kv_line = Text(
        f"KV cache: {kv.bytes_per_token:,} bytes per token, {kv.tokens:,} tokens{low}, "
        f"max concurrency {kv.max_concurrency:.2f} at {s.max_model_len:,} tokens per request"
        f"{across}"
    )
    return Group(
        head,
        table,
        kv_line,
        *_decode(plan),
        *_warmup(plan),
        *_calibration(plan),
        *_verdict(plan),
        *_recommendations(plan),
        *_what_fits(plan),
    )


def _calibration(plan: Plan) -> list[Text]:
    c = plan.calibration
    if c is None:
        return []
    version = f", vLLM {c.engine_version} rules" if c.engine_version else ""
    lines = [Text(f"calibrated from {c.log}{version}:")]
    lines += [Text(f"  forced despite: {m}", style="yellow") for m in c.mismatches]
    for ch in c.changes:
        lines.append(Text(f"  {ch.what}: {ch.before} -> {ch.after}"))
        if ch.line:
            lines.append(Text(f"      from: {ch.line}", style="dim"))
    if not c.changes:
        lines.append(Text("  nothing changed (the log has no memory figures)"))
    return lines


def _decode(plan: Plan) -> list[Text]:
    d = plan.decode
    if d is None:
        return [Text("decode: no memory bandwidth known for this GPU (give --memory-bandwidth)")]
    caveat = expected_caveat(d)
    expected = d.expected_line() + (f"; {caveat}" if caveat else "")
    return [Text(d.ceiling_line()), Text(expected)]


def expected_caveat(d: DecodeSpeed) -> str | None:
    """The caveat that goes with an MoE or MLA model's expected speed, on the line that prints
    it: public measurements of such setups ran from about 0.3 to 1.6 times it, set by the
    engine version and its MoE kernels (bench/results/decode_points.md, issue 25)."""
    if d.arch_class not in ("moe", "mla"):
        return None
    return (
        f"caveat: {d.arch_class.upper()} setups have run from 0.3x to 1.6x this in public "
        "measurements (the engine version and its MoE kernels set it): bringup bench the server"
    )


def _warmup(plan: Plan) -> list[Text]:
    """The sampler-warmup arithmetic: what is outside vLLM's budget and what the warmup needs."""
    s, g, w = plan.settings, plan.per_gpu, plan.sampler_warmup
    if s.device == "cpu" or w is None or g.kv_cache_bytes <= 0:
        return []
    fb = format_bytes
    requested = math.ceil(g.total_bytes * s.gpu_memory_utilization)
    outside = g.total_bytes - requested
    graphs = 0 if s.cuda_graphs_in_budget else g.cuda_graph_bytes
    context = outside - graphs - g.sampler_warmup_bytes - g.headroom_bytes
    where = "inside the budget (0.21+)" if s.cuda_graphs_in_budget else "outside the budget"
    shape = f"{w.requests} requests x {w.vocab_size:,} vocab"
    if w.extra_bytes_per_element:
        need = (
            f"the warmup (V2 model runner) needs beyond its profile run {shape} x "
            f"{w.extra_bytes_per_element} B = {fb(w.extra_bytes)}"
        )
    else:
        need = (
            "the warmup (V1 model runner) repeats the profile run's sampler pass, "
            f"{shape} x {w.profile_bytes_per_element} B = {fb(w.profile_bytes)}, "
            "already inside the budget"
        )
    return [
        Text(
            f"sampler warmup (vLLM {s.engine_version} rules, utilization "
            f"{s.gpu_memory_utilization}): outside the budget {fb(g.total_bytes)} - "
            f"{fb(requested)} = {fb(outside)}; there already: CUDA context and NCCL "
            f"{fb(context)}"
            + (f", CUDA graphs {fb(graphs)}" if graphs else f"; CUDA graphs {where}")
            + f"; {need}; left {fb(g.headroom_bytes)}"
        )
    ]


def doubt_suffix(v: Verdict) -> str:
    """`` (uncertain: version not given, KV margin)`` for an uncertain verdict, else ``""``."""
    if v.confidence != "uncertain":
        return ""
    return f" (uncertain: {', '.join(v.uncertain_labels or ('see why',))})"


def _verdict(plan: Plan) -> list[Text]:
    """The verdict line, ``FITS (uncertain: ...)`` when it is, then why, one line a reason."""
    v = plan.verdict
    doubt = doubt_suffix(v)
    if v.fits:
        line = Text(
            f"verdict: FITS{doubt} - {v.reason.removeprefix('fits: ')}",
            style="yellow" if doubt else "green",
        )
    else:
        line = Text(
            f"verdict: DOES NOT FIT{doubt} - {v.failure_class} at {v.phase}: {v.reason}",
            style="bold red",
        )
    return [line, *(Text(f"  uncertain: {why}", style="yellow") for why in v.uncertain_because)]


def _what_fits(plan: Plan) -> list[Text]:
    if not plan.what_fits:
        return []
    lines = [Text("what would fit (each planned):")]
    lines += [
        Text(
            f"  {c.change:<52} # {c.gpus} GPU{'s' if c.gpus > 1 else ''}, "
            f"{format_bytes(c.weights_per_gpu_bytes)} of weights per GPU, "
            f"{c.kv_tokens:,} KV tokens"
        )
        for c in plan.what_fits
    ]
    return lines


def _recommendations(plan: Plan) -> list[Text]:
    if not plan.recommendations:
        return []
    lines = [Text("append one of:")]
    for r in plan.recommendations:
        flag = r.flag if r.value is None else f"{r.flag} {r.value}"
        lines.append(Text(f"  {flag:<34} # {r.why}"))
    return lines


def print_plan(plan: Plan, console: Console) -> None:
    """Print the plan (on a terminal, long lines wrap with a hanging indent)."""
    console.print(fit(console, format_plan(plan)))


def print_for_people(
    plan: Plan, stdout: TextIO, stderr: TextIO, environ: Mapping[str, str]
) -> None:
    """``bringup plan``'s output without ``--json``: each warning on ``stderr``, then the plan
    and its startup prediction on ``stdout``."""
    for warning in plan.warnings:
        stderr.write(f"warning: {warning}\n")
    print_plan(plan, make_console(stdout, environ))
    if plan.startup is not None:
        print_startup(plan.startup, make_console(stdout, environ))


@dataclass(frozen=True, slots=True)
class CompareRow:
    """One setup of ``plan --compare``: what the table shows of it."""

    label: str
    hardware: str
    fits: bool
    verdict: str
    weights_bytes: int  # per GPU
    kv_tokens: int
    max_concurrency: float
    context: int  # max_model_len (vLLM) or n_ctx (llama.cpp)
    decode: DecodeSpeed | None
    uncertain: bool = False  # the verdict's confidence (core.plan.confidence)


def format_compare(rows: list[CompareRow]) -> Table:
    """Setups side by side, one column each: fits, KV capacity, decode speed."""
    table = Table(title="setups compared", title_justify="left")
    table.add_column("")
    for r in rows:
        table.add_column(r.label, justify="right")

    def line(name: str, cells: list[str]) -> None:
        table.add_row(name, *cells)

    def speed(d: DecodeSpeed | None, which: str) -> str:
        if d is None:
            return "-"
        text = f"{getattr(d, which):,.1f} tok/s"
        if which == "expected_tokens_per_s" and expected_caveat(d):
            text += f" ({d.arch_class.upper()}: 0.3-1.6x)"
        return text

    line("hardware", [r.hardware for r in rows])
    line(
        "fits",
        [
            ("yes" if r.fits else f"NO: {r.verdict}") + (" (uncertain)" if r.uncertain else "")
            for r in rows
        ],
    )
    line("weights per GPU", [format_bytes(r.weights_bytes) for r in rows])
    line("KV cache tokens", [f"{r.kv_tokens:,}" for r in rows])
    line("max concurrency", [f"{r.max_concurrency:.2f} at {r.context:,} tokens" for r in rows])
    line("decode ceiling", [speed(r.decode, "ceiling_tokens_per_s") for r in rows])
    line("decode expected", [speed(r.decode, "expected_tokens_per_s") for r in rows])
    line("bound by", [r.decode.bound_by_words if r.decode else "-" for r in rows])
    return table


def print_compare(rows: list[CompareRow], console: Console) -> None:
    """Print the comparison table."""
    console.print(format_compare(rows))
