"""A Diagnosis for people (timeline + diagnosis box) and for machines (the issue's JSON)."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from bringup.core.diagnosis import Candidate, Confidence, Diagnosis, Failure, Remedy

# Facts worth a glance in the human output, with their labels and units.
_FACT_LABELS = (
    ("model", "model", ""),
    ("tensor_parallel_size", "tensor parallel", ""),
    ("weights_gib_per_gpu", "weights per GPU", " GiB"),
    ("load_seconds", "load time", " s"),
    ("available_kv_gib", "KV cache memory", " GiB"),
    ("kv_cache_tokens", "KV cache tokens", ""),
    ("max_concurrency", "max concurrency", "x"),
    ("cuda_graph_gib", "CUDA graphs", " GiB"),
)


def to_json(d: Diagnosis) -> dict[str, Any]:
    """The ``bringup diagnose --json`` object, field for field as the issue specifies."""
    return {
        "engine": d.engine,
        "engine_version": d.engine_version,
        "outcome": d.outcome.value,
        "phase": d.phase.value,
        "failure": _failure_json(d.failure) if d.failure is not None else None,
        "timeline": [
            {"phase": t.phase.value, "line_number": t.line_number, "timestamp": t.timestamp}
            for t in d.timeline
        ],
        "facts": dict(d.facts),
        # a failure after ready (the server served, then died): what `run` reports live as
        # its failure after ready; the startup itself succeeded
        "after_ready": _failure_json(d.after_ready) if d.after_ready is not None else None,
        # said plainly: the startup succeeded and the server died after it (exit code 0:
        # diagnose judges the startup; the death is under after_ready)
        "died_after_ready": d.after_ready is not None,
    }


def _failure_json(f: Failure) -> dict[str, Any]:
    return {
        "class": f.failure_class.value,
        "phase": f.phase.value,
        "line": f.line or None,  # None: no line in the log states the cause
        "line_number": f.line_number or None,
        "summary": f.summary,
        "remedy": [remedy_json(r) for r in f.remedy],
        # how sure: certain (the engine's message for the cause, or a figure no healthy start
        # has), likely (a general rule read it), guess (nothing states a cause)
        "confidence": f.confidence.value,
        "candidates": [
            {
                "class": c.failure_class.value,
                "line_number": c.line_number or None,
                "line": c.line or None,
                "why": c.why,
            }
            for c in f.candidates
        ],
    }


def remedy_json(r: Remedy) -> dict[str, str | None]:
    """One remedy as {"text", "flag", "value", "env"}."""
    return {"text": r.text, "flag": r.flag, "value": r.value, "env": r.env}


def remedy_text(r: Remedy) -> str:
    """The remedy's sentence, and the flag or variable it sets when the sentence lacks it."""
    setting = (f"{r.flag} {r.value}" if r.value else r.flag) if r.flag else (r.env or "")
    if setting and setting not in r.text:
        return f"{r.text} [{setting}]"
    return r.text


def next_args(remedies: tuple[Remedy, ...]) -> str:
    """The first flag remedy as it would be appended to the server command, or ''."""
    for r in remedies:
        if r.flag:
            return f"{r.flag} {r.value}" if r.value else r.flag
        if r.env:
            return r.env
    return ""


def _headline(d: Diagnosis, source: str) -> str:
    engine = d.engine or "unknown engine"
    version = f" {d.engine_version}" if d.engine_version else ""
    if d.failure is None and d.after_ready is not None:
        return f"{source}: {engine}{version}, ready, then the server died after a good start"
    return f"{source}: {engine}{version}, {d.outcome.value}, reached {d.phase.value}"


def format_plain(d: Diagnosis, source: str) -> str:
    """Plain text: a headline, the phase timeline, facts, and the diagnosis."""
    out = [_headline(d, source)]
    if d.engine is None:
        out.append("  the engine was not recognised; pass --engine vllm|sglang|tgi|llamacpp|ollama")
    if d.timeline:
        out.append("timeline:")
        out += [
            f"  {t.phase.value:<20} line {t.line_number:<7} {t.timestamp or ''}".rstrip()
            for t in d.timeline
        ]
    facts = _facts(d)
    if facts:
        out.append("facts:")
        out += [f"  {label:<20} {value}" for label, value in facts]
    f = d.failure
    if f is None:
        out.append(
            "diagnosis: ready"
            if d.outcome.value == "ready"
            else "diagnosis: no verdict yet (the log ends mid-startup)"
        )
        if d.after_ready is not None:
            out[-1] = (
                "diagnosis: the startup succeeded, then the server died after a good start "
                "(not a startup failure):"
            )
            out += _failure_lines(d.after_ready, "after ready")
        return "\n".join(out) + "\n"
    out += ["diagnosis:", *_failure_lines(f, f"in {f.phase.value}")]
    return "\n".join(out) + "\n"


def _failure_lines(f: Failure, where: str) -> list[str]:
    out = [
        f"  class     {f.failure_class.value} ({where})",
        f"  {_where(f)}",
        f"  summary   {f.summary}",
    ]
    for i, r in enumerate(f.remedy, start=1):
        out.append(f"  remedy {i}  {remedy_text(r)}")
    args = next_args(f.remedy)
    if args:
        out.append(f"  next run  {args}")
    if f.confidence is not Confidence.CERTAIN:
        out.append(f"  confidence {f.confidence.value}: {f.why or 'no line states the cause'}")
        out += [f"  candidate {i}  {_candidate(c)}" for i, c in enumerate(f.candidates, 1)]
    return out


def _candidate(c: Candidate) -> str:
    where = f"line {c.line_number}" if c.line_number else "no line"
    return f"{c.failure_class.value} ({where}): {c.why}"


def _where(f: Failure) -> str:
    """The root-cause line, or that no line states one."""
    return f"line {f.line_number}: {f.line}" if f.line else "no line in the log states the cause"


def _facts(d: Diagnosis) -> list[tuple[str, str]]:
    rows = []
    for key, label, unit in _FACT_LABELS:
        if key in d.facts:
            value = d.facts[key]
            shown = f"{value:,}" if isinstance(value, int) else str(value)
            rows.append((label, f"{shown}{unit}"))
    return rows


def print_diagnosis(d: Diagnosis, console: Console, source: str) -> None:
    """Rich on a terminal, plain lines otherwise."""
    if not console.is_terminal:
        console.file.write(format_plain(d, source))
        return
    style = {"ready": "green", "failed": "red", "hung": "red"}.get(d.outcome.value, "yellow")
    died = d.failure is None and d.after_ready is not None
    if died:
        style = "red"  # a good start, then a dead server: not a green result
    console.print(Text(_headline(d, source), style=f"bold {style}"))
    if d.timeline:
        table = Table(show_header=True, header_style="bold", box=None, padding=(0, 2))
        for col in ("phase", "line", "time"):
            table.add_column(col)
        for t in d.timeline:
            table.add_row(t.phase.value, str(t.line_number), t.timestamp or "")
        console.print(table)
    f = d.failure if d.failure is not None else d.after_ready
    if f is None:
        return
    body = Table.grid(padding=(0, 2))
    body.add_column(style="bold")
    body.add_column()
    where = "after ready: not a startup failure" if died else f"in {f.phase.value}"
    body.add_row("class", f"{f.failure_class.value} ({where})")
    if f.line:
        body.add_row(f"line {f.line_number}", Text(f.line))
    else:
        body.add_row("line", "no line in the log states the cause")
    body.add_row("summary", f.summary)
    for i, r in enumerate(f.remedy, start=1):
        body.add_row(f"remedy {i}", remedy_text(r))
    if f.confidence is not Confidence.CERTAIN:
        body.add_row("confidence", f"{f.confidence.value}: {f.why or 'no line states the cause'}")
        for i, c in enumerate(f.candidates, start=1):
            body.add_row(f"candidate {i}", _candidate(c))
    args = next_args(f.remedy)
    parts: list[Any] = [body]
    if args:
        parts.append(Text(f"next run: {args}", style="bold"))
    title = "died after a good start" if died else "diagnosis"
    console.print(Panel(Group(*parts), title=title, border_style=style))
