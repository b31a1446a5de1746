"""The report as GitHub-flavoured Markdown, ready to paste into an issue (pure: values in, text
out). Every text that came from the outside (command, log lines, sentences) goes through the
redactor; log text goes into fenced blocks whose fence is longer than any backtick run inside,
and table cells have their pipes escaped, so nothing a log holds can break the layout."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from bringup.core.printable import printable
from bringup.core.report.model import Gpus, PlanSection, ReportData, RootCause
from bringup.core.report.redact import SECRET, Redactor
from bringup.units import format_bytes, format_seconds

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_SPECIAL = re.compile(r"([\\`*_\[\]<>|~#!])")
_TICKS = re.compile(r"`+")
TAIL_LINES = 200


def build_markdown(data: ReportData, redactor: Redactor) -> str:
    """The whole report."""
    r = _Writer(redactor)
    parts = [
        _head(data, r),
        _versions(data, r),
        _gpus(data.gpus, r),
        _command(data.command, r),
        _plan(data.plan, r),
        _timeline(data, r),
        _cause(data.cause, r),
        _facts(data, r),
        _log(data, r),
        _notes(data, r),
    ]
    return "\n\n".join(p for p in parts if p) + "\n"


class _Writer:
    """Redacted, escaped pieces of Markdown."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor

    def clean(self, text: str) -> str:
        """One line: escapes stripped, unprintables shown, secrets out."""
        return self.redactor.text(printable(_ANSI.sub("", text)))

    def prose(self, text: str) -> str:
        """A sentence as Markdown text (its punctuation escaped)."""
        return _SPECIAL.sub(r"\\\1", self.clean(text))

    def code(self, text: str) -> str:
        """An inline code span that holds ``text`` whatever backticks it has."""
        body = self.clean(text)
        ticks = "`" * (max((len(t) for t in _TICKS.findall(body)), default=0) + 1)
        pad = " " if body.startswith("`") or body.endswith("`") else ""
        return f"{ticks}{pad}{body}{pad}{ticks}"

    def block(self, lines: Iterable[str], info: str = "text") -> str:
        """A fenced code block of ``lines``."""
        body = [self.clean(line) for line in lines]
        longest = max((len(t) for line in body for t in _TICKS.findall(line)), default=0)
        fence = "`" * max(3, longest + 1)
        return "\n".join([f"{fence}{info}", *body, fence])

    @staticmethod
    def cell(text: str) -> str:
        """Markdown already made, fit for a table cell."""
        return text.replace("|", "\\|").replace("\n", " ")

    def table(self, header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(self.cell(c) for c in row) + " |" for row in rows]
        return "\n".join(lines)


def _head(data: ReportData, r: _Writer) -> str:
    outcome = data.outcome.upper() if data.outcome else "UNKNOWN"
    where = f" in {r.code(data.phase)}" if data.phase and data.outcome != "ready" else ""
    lines = [f"## {r.prose(data.title)}: {outcome}{where}"]
    said = []
    if data.engine:
        said.append(f"engine {r.code(data.engine)}")
    if data.time_to_ready_seconds is not None:
        said.append(f"ready in {format_seconds(data.time_to_ready_seconds)}")
    if data.cause is not None:
        summary = r.prose(data.cause.summary.rstrip(". "))
        said.append(f"cause: **{r.prose(data.cause.failure_class)}**: {summary}")
    if data.server_exit:
        said.append(f"server: {r.prose(data.server_exit)}")
    if data.exit_code is not None:
        said.append(f"bringup exit code {data.exit_code}")
    if said:
        lines += ["", "; ".join(said) + "."]
    return "\n".join(lines)


def _versions(data: ReportData, r: _Writer) -> str:
    if not data.versions:
        return ""
    rows = [(r.prose(name), r.code(value)) for name, value in data.versions]
    return "### Versions\n\n" + r.table(("component", "version"), rows)


def _gpus(gpus: Gpus | None, r: _Writer) -> str:
    if gpus is None:
        return ""
    out = ["### GPUs"]
    if gpus.gpus:
        rows = [
            (
                str(g.index),
                r.prose(g.name),
                format_bytes(g.memory_total_bytes),
                "" if g.memory_used_bytes is None else format_bytes(g.memory_used_bytes),
            )
            for g in gpus.gpus
        ]
        out.append(r.table(("GPU", "name", "memory", "used at the report"), rows))
    driver = [
        f"driver {r.code(gpus.driver)}" if gpus.driver else "",
        f"CUDA (driver) {r.code(gpus.cuda_driver)}" if gpus.cuda_driver else "",
    ]
    if any(driver):
        out.append(", ".join(d for d in driver if d))
    if gpus.topology:
        out.append("Topology (as `nvidia-smi topo -m`):\n\n" + r.block(_matrix(gpus.topology)))
    if gpus.note:
        out.append(r.prose(gpus.note))
    return "\n\n".join(out)


def _matrix(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(len(rows[0]))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip() for row in rows
    ]


def _command(argv: Sequence[str], r: _Writer) -> str:
    if not argv:
        return ""
    words = [_shell_word(word) for word in r.redactor.argv(argv)]
    return "### Command\n\n" + r.block([" ".join(words)], "sh")


def _shell_word(word: str) -> str:
    """``word`` as a shell reads it (quoted when it must be); a redacted value stays bare, a
    placeholder to fill in."""
    rest = word.replace(SECRET, "")
    if word and (not rest or re.fullmatch(r"[\w@%+=:,./\[\]-]+", rest)):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


def _plan(plan: PlanSection | None, r: _Writer) -> str:
    if plan is None:
        return ""
    out = ["### Plan"]
    if plan.note:
        out.append(r.prose(plan.note))
    if plan.headline:
        out.append(r.prose(plan.headline))
    if plan.rows:
        rows = [(r.prose(p.part), p.value, p.share, r.prose(p.what)) for p in plan.rows]
        out.append(r.table(("part", "per GPU", "share", "what"), rows))
    out += [r.prose(line) for line in plan.lines]
    if plan.verdict:
        out.append(f"**verdict**: {r.prose(plan.verdict)}")
    if plan.flags:
        out.append("Flags the plan suggests:\n\n" + "\n".join(f"- {r.code(f)}" for f in plan.flags))
    return "\n\n".join(out)


def _timeline(data: ReportData, r: _Writer) -> str:
    if not data.timeline:
        return ""
    rows = [
        (
            r.code(t.phase),
            "" if t.line_number is None else str(t.line_number),
            t.at or "",
            t.took or "",
        )
        for t in data.timeline
    ]
    return "### Timeline\n\n" + r.table(("phase", "log line", "at", "took"), rows)


def _cause(cause: RootCause | None, r: _Writer) -> str:
    if cause is None:
        return ""
    where = (
        "after ready (the startup succeeded)" if cause.after_ready else f"in {r.code(cause.phase)}"
    )
    out = [
        "### Root cause",
        f"**{r.prose(cause.failure_class)}** {where}: {r.prose(cause.summary)}",
    ]
    if cause.line:
        context = cause.context or ((cause.line_number, cause.line),)
        width = len(str(context[-1][0]))
        lines = [
            f"{'>' if n == cause.line_number else ' '} {str(n).rjust(width)} | {text}"
            for n, text in context
        ]
        out.append(f"Line {cause.line_number} of the log (marked `>`):\n\n" + r.block(lines))
    else:
        out.append("No line in the log states the cause.")
    if cause.remedies:
        items = []
        for i, remedy in enumerate(cause.remedies, start=1):
            setting = f" ({r.code(remedy.setting)})" if remedy.setting else ""
            items.append(f"{i}. {r.prose(remedy.text)}{setting}")
        out.append("### Remedies\n\n" + "\n".join(items))
    return "\n\n".join(out)


def _facts(data: ReportData, r: _Writer) -> str:
    if not data.facts:
        return ""
    rows = [(r.prose(k), r.prose(v)) for k, v in data.facts]
    return "### What the log stated\n\n" + r.table(("fact", "value"), rows)


def _log(data: ReportData, r: _Writer) -> str:
    if not data.log_tail:
        return ""
    shown = len(data.log_tail)
    total = max(data.log_lines, shown)
    what = f"the last {shown} of {total} lines" if total > shown else f"all {total} lines"
    source = f" of {r.prose(data.log_source)}" if data.log_source else ""
    return "\n".join(
        [
            "<details>",
            f"<summary>Log: {what}{source}</summary>",
            "",
            r.block(data.log_tail),
            "",
            "</details>",
        ]
    )


def _notes(data: ReportData, r: _Writer) -> str:
    if not data.notes:
        return ""
    return "\n".join(f"- {r.prose(n)}" for n in data.notes)
