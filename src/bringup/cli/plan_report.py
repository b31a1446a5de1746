"""``bringup plan --markdown``: the plan as a report to paste (versions, GPUs, the command,
the per-GPU lines and the verdict), redacted as every report is."""

from __future__ import annotations

import argparse
from typing import Any

from bringup.cli.main import Context
from bringup.cli.report_flags import markdown_target, report_redactor, world_size, write_text
from bringup.core.plan.result import Plan
from bringup.core.report.markdown import build_markdown
from bringup.core.report.model import PlanSection, ReportData


def write_plan_report(args: argparse.Namespace, ctx: Context, made: Plan | dict[str, Any]) -> None:
    """The report of ``made`` where ``--markdown``/``--markdown-file`` say."""
    from bringup.adapters import report_env
    from bringup.render.report import plan_section

    target = markdown_target(args)
    if target is None:
        return
    argv = tuple(args.passthrough or ())
    if isinstance(made, Plan):
        section = plan_section(made)
        fits = made.verdict.fits
        world = made.settings.tensor_parallel_size * made.settings.pipeline_parallel_size
    else:  # a GGUF plan (llama.cpp): its JSON verdict
        verdict = made.get("verdict", {})
        fits = bool(verdict.get("fits"))
        section = PlanSection(
            verdict=f"{'FITS' if fits else 'DOES NOT FIT'}: {verdict.get('reason', '')}"
        )
        world = world_size(argv)
    model = args.model or ""
    data = ReportData(
        title=f"bringup plan {model}".rstrip(),
        outcome="fits" if fits else "does not fit",
        versions=report_env.versions(argv, ctx.environ),
        gpus=None if args.gpu else report_env.gpus(args.gpus_from, world),
        command=argv,
        plan=section,
    )
    write_text(target, build_markdown(data, report_redactor(args, ctx, argv)), ctx.stdout)
