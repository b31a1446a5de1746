"""Reports from what bringup found: a diagnosis, a followed startup or a plan, made into
``core.report.model.ReportData`` and then into Markdown (``core.report.markdown``) or HTML
with the timeline drawn in (``report_html``). The caller gathers the machine's side (versions,
GPUs) through adapters and passes it in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bringup.core.diagnosis import Diagnosis, Failure
from bringup.core.live import StartupResult
from bringup.core.plan.result import Plan
from bringup.core.report.model import (
    Gpus,
    PlanRow,
    PlanSection,
    Remedy,
    ReportData,
    RootCause,
    TimelineRow,
)
from bringup.core.report.recording import Recording
from bringup.render.diagnosis import _FACT_LABELS
from bringup.render.verify import format_parameters
from bringup.units import format_bytes, format_seconds

TAIL = 200


def root_cause(
    failure: Failure | None,
    context: tuple[tuple[int, str], ...],
    *,
    after_ready: bool = False,
) -> RootCause | None:
    """The report's root-cause section of ``failure``."""
    if failure is None:
        return None
    return RootCause(
        failure_class=failure.failure_class.value,
        phase=failure.phase.value,
        summary=failure.summary,
        line=failure.line,
        line_number=failure.line_number,
        context=context,
        remedies=tuple(Remedy(r.text, _setting(r.flag, r.value, r.env)) for r in failure.remedy),
        after_ready=after_ready,
    )


def _setting(flag: str | None, value: str | None, env: str | None) -> str:
    if flag:
        return f"{flag} {value}" if value else flag
    return env or ""


def facts(values: Mapping[str, float | int | str]) -> tuple[tuple[str, str], ...]:
    """The facts worth a glance, labelled as ``diagnose`` labels them."""
    out = []
    for key, label, unit in _FACT_LABELS:
        if key in values:
            value = values[key]
            out.append((label, f"{value:,}{unit}" if isinstance(value, int) else f"{value}{unit}"))
    return tuple(out)


def from_diagnosis(
    d: Diagnosis,
    *,
    title: str,
    source: str,
    lines: Sequence[tuple[int, str]],
    total_lines: int,
    versions: tuple[tuple[str, str], ...] = (),
    gpus: Gpus | None = None,
    command: tuple[str, ...] = (),
    exit_note: str | None = None,
) -> ReportData:
    """The report of a log read whole: ``lines`` holds (at least) the cause's context and the
    last lines of the log, numbered."""
    failure = d.failure or d.after_ready
    context: tuple[tuple[int, str], ...] = ()
    if failure is not None and failure.line_number:
        context = tuple((n, t) for n, t in lines if abs(n - failure.line_number) <= 3)
    return ReportData(
        title=title,
        outcome=d.outcome.value,
        phase=d.phase.value,
        engine=_engine(d.engine, d.engine_version),
        versions=_with_engine(versions, d.engine, d.engine_version),
        gpus=gpus,
        command=command,
        timeline=_log_timeline(d),
        facts=facts(d.facts),
        cause=root_cause(failure, context, after_ready=d.failure is None),
        log_tail=tuple(t for _, t in lines[-TAIL:]),
        log_lines=total_lines,
        log_source=source,
        server_exit=exit_note,
    )


def _log_timeline(d: Diagnosis) -> tuple[TimelineRow, ...]:
    """The phases of a log, each with how long it took when the engine's timestamps say."""
    from bringup.core.report.recording import clock_seconds

    stamps = [clock_seconds(t.timestamp or "") for t in d.timeline]
    rows = []
    for i, t in enumerate(d.timeline):
        took = None
        start, end = stamps[i], stamps[i + 1] if i + 1 < len(stamps) else None
        if start is not None and end is not None and end >= start:
            took = format_seconds(end - start)
        rows.append(TimelineRow(t.phase.value, t.line_number, t.timestamp or None, took))
    return tuple(rows)


def from_startup(
    result: StartupResult,
    recording: Recording,
    *,
    title: str,
    versions: tuple[tuple[str, str], ...] = (),
    gpus: Gpus | None = None,
    plan: PlanSection | None = None,
    engine_version: str | None = None,
) -> ReportData:
    """The report of a startup bringup followed (run, up, watch)."""
    failure = result.failure
    context = recording.context(failure.line_number) if failure and failure.line_number else ()
    engine = result.engine.value if result.engine is not None else None
    summary = result.summary
    return ReportData(
        title=title,
        outcome=result.outcome.value,
        phase=str(summary.get("phase") or "") or None,
        engine=_engine(engine, engine_version),
        time_to_ready_seconds=result.time_to_ready_seconds,
        exit_code=result.exit_code,
        server_exit=result.server_exit.phrase() if result.server_exit is not None else None,
        versions=_with_engine(versions, engine, engine_version),
        gpus=gpus,
        command=result.argv,
        plan=plan,
        timeline=_live_timeline(summary.get("timeline") or [], recording),
        facts=facts(result.facts),
        cause=root_cause(failure, context),
        log_tail=recording.tail(TAIL),
        log_lines=recording.count,
        log_source="the server's output",
    )


def _live_timeline(
    rows: Sequence[Mapping[str, Any]], recording: Recording
) -> tuple[TimelineRow, ...]:
    lane = recording.lanes.get("")
    # line 0: a phase no log line said (ready from the model's answer)
    first_line = {p: n for _t, p, n in reversed(lane.phases) if n} if lane else {}
    return tuple(
        TimelineRow(
            str(t["phase"]),
            first_line.get(str(t["phase"])),
            f"{format_seconds(float(t['t']))}",
            f"{format_seconds(float(t['duration_seconds']))}",
        )
        for t in rows
    )


def _engine(engine: str | None, version: str | None) -> str | None:
    if engine is None:
        return None
    return f"{engine} {version}" if version else engine


def _with_engine(
    versions: tuple[tuple[str, str], ...], engine: str | None, version: str | None
) -> tuple[tuple[str, str], ...]:
    """``versions`` with the engine's version from the log when its environment gave none."""
    if engine is None or version is None or any(name == engine for name, _ in versions):
        return versions
    return (*versions[:1], (f"{engine} (from the log)", version), *versions[1:])


def plan_section(plan: Plan) -> PlanSection:
    """The plan's per-GPU lines, KV capacity, verdict and suggested flags."""
    from bringup.render.plan import _CPU_ROWS, _ROWS, doubt_suffix

    s, g, kv, v = plan.settings, plan.per_gpu, plan.kv_cache, plan.verdict
    rows = tuple(
        PlanRow(
            label,
            format_bytes(getattr(g, name)),
            f"{100 * getattr(g, name) / g.total_bytes:.1f}%" if g.total_bytes else "",
            what,
        )
        for label, name, what in (_CPU_ROWS if s.device == "cpu" else _ROWS)
    )
    head = (
        f"{plan.model.architecture}: {format_parameters(plan.model.parameters)} parameters, "
        f"{format_bytes(plan.model.weights_bytes_total)} of weights; vLLM {s.engine_version} rules, "
        f"tp {s.tensor_parallel_size}, pp {s.pipeline_parallel_size}, utilization "
        f"{s.gpu_memory_utilization}, max_model_len {s.max_model_len:,}; "
        f"{format_bytes(g.total_bytes)} per {'host' if s.device == 'cpu' else 'GPU'}"
    )
    lines = [
        (
            f"KV cache: {kv.bytes_per_token:,} bytes per token, {kv.tokens:,} tokens, "
            f"max concurrency {kv.max_concurrency:.2f}"
        )
    ]
    if plan.decode is not None:
        lines.append(plan.decode.expected_line())
    verdict = (
        f"FITS{doubt_suffix(v)}: {v.reason.removeprefix('fits: ')}"
        if v.fits
        else f"DOES NOT FIT{doubt_suffix(v)}: {v.failure_class} at {v.phase}: {v.reason}"
    )
    lines += [f"uncertain: {why}" for why in v.uncertain_because]
    flags = tuple(
        r.flag if r.value is None else f"{r.flag} {r.value}" for r in plan.recommendations
    )
    return PlanSection(head, rows, tuple(lines), verdict, flags)
