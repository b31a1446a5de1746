"""What an attempt of ``run``/``up``/``watch`` writes when it ends: the Markdown report, the
timeline picture, the metrics' last values; and the plan both are given (best effort: a
command ``plan`` cannot plan gets a note in the report, never an error)."""

from __future__ import annotations

import argparse
import io
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from bringup.cli.main import Context
from bringup.cli.report_flags import markdown_target, report_redactor, world_size, write_text
from bringup.core.live import StartupResult
from bringup.core.plan.result import Plan
from bringup.core.report.markdown import build_markdown
from bringup.core.report.model import PlanSection
from bringup.core.report.recording import Recording
from bringup.core.report.timeline import draw
from bringup.errors import BringupError


def finished(
    args: argparse.Namespace,
    ctx: Context,
    result: StartupResult,
    recording: Recording,
    *,
    title: str,
    argv: tuple[str, ...],
    metrics: Any,
    plan: Callable[[tuple[str, ...]], PlanSection],
    versions: Callable[[tuple[str, ...]], tuple[tuple[str, str], ...]],
    stdout: TextIO,
) -> None:
    """Write the report, picture and metrics of an attempt that just ended."""
    if metrics is not None:
        metrics.facts(result.facts)
    if getattr(args, "timeline", None):
        from bringup.adapters.commands import write_local

        lanes = [recording.lanes[k] for k in sorted(recording.lanes)]
        svg = draw(lanes, f"{title}: {result.outcome.value}")
        write_local(args.timeline, svg, hint="give --timeline a path in a writable folder")
    target = markdown_target(args)
    if target is None:
        return
    from bringup.adapters import report_env
    from bringup.render.report import from_startup

    data = from_startup(
        result,
        recording,
        title=title,
        versions=versions(argv),
        gpus=report_env.gpus(args.gpus_from, world_size(argv)),
        plan=plan(argv),
        engine_version=_engine_version(recording),
    )
    write_text(target, build_markdown(data, report_redactor(args, ctx, argv)), stdout)


def plan_for(
    argv: tuple[str, ...], environ: Mapping[str, str], *, device: str | None = None
) -> tuple[PlanSection, Plan | None]:
    """``bringup plan -- ARGV`` made quietly and offline, as a report section; a command it
    cannot plan gives a section that says why."""
    from bringup.cli.commands import plan_make as plan_command
    from bringup.cli.main import command_parser
    from bringup.render.report import plan_section

    if not argv:
        return PlanSection(note="not planned: no server command known"), None
    quiet = Context(
        stdout=io.StringIO(),
        stderr=io.StringIO(),
        stdin=io.StringIO(),
        environ={**environ, "HF_HUB_OFFLINE": "1"},
    )
    try:
        namespace = command_parser("plan").parse_args([])
        namespace.passthrough = list(argv)
        if device is not None and namespace.device is None:
            namespace.device = device
        made = plan_command.make(namespace, quiet)
    except BringupError as exc:
        return PlanSection(note=f"not planned: {exc}"), None
    if not isinstance(made, Plan):
        return PlanSection(note="a GGUF plan: see `bringup plan -- ...` for it"), None
    return plan_section(made), made


def predicted(plan: Plan) -> dict[str, float]:
    """The plan's figures that a startup also measures (``bringup_predicted``): memory, KV
    capacity, and (``plan``'s startup block) the time to ready and each phase's seconds."""
    out = {
        "weights_bytes": float(plan.per_gpu.weights_bytes),
        "kv_cache_bytes": float(plan.per_gpu.kv_cache_bytes),
        "kv_cache_tokens": float(plan.kv_cache.tokens),
    }
    if plan.startup is not None:
        out["time_to_ready_seconds"] = plan.startup.total_seconds
        out.update({f"phase_seconds:{p.phase.value}": p.seconds for p in plan.startup.phases})
    return out


def is_cpu_build(versions: tuple[tuple[str, str], ...]) -> bool:
    """vLLM's CPU build (its version says ``+cpu``): plan it with ``--device cpu``."""
    return any(name == "vllm" and "+cpu" in value for name, value in versions)


def _engine_version(recording: Recording) -> str | None:
    """The engine's version as its first lines state it."""
    from bringup.core.logfeed import diagnose_chunks

    head = "".join(line + "\n" for line in recording.head)
    return diagnose_chunks([head.encode("utf-8", "surrogateescape")], None).engine_version
