"""The rows of a message table: each startup-path failure site with its template, pattern and
class (the mapping of ``message_classes``), and the table's coverage."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import message_classes
import message_extract as mx
from message_paths import RUNTIME_FUNCTIONS, STARTUP_READERS
from message_patterns import parse_template, pattern_of, readable, template_text

# a warning is listed only when it names a resource limit (it is a cause only with a death)
_RESOURCE = re.compile(
    r"memory|\bOOM\b|KV cache|cache blocks|/dev/shm|shared memory|GiB|\bMiB\b|timeout|timed out"
    r"|exceed|insufficient|not enough|too (?:large|small|many)|limit",
    re.IGNORECASE,
)


@dataclass
class Row:
    engine: str
    version: str
    file: str
    line: int
    function: str
    kind: str
    type: str
    template: str
    pattern: str | None
    cls: str | None
    rule: str | None
    load: bool
    why: str
    phase: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "engine": self.engine,
            "version": self.version,
            "file": self.file,
            "line": self.line,
            "function": self.function,
            "kind": self.kind,
            "type": self.type,
            "template": self.template,
            "pattern": self.pattern,
            "class": self.cls,
            "rule": self.rule,
            "load": self.load,
            "why": self.why,
            "phase": self.phase,
        }

    @classmethod
    def from_json(cls, d: dict[str, object]) -> Row:
        return cls(
            str(d["engine"]),
            str(d["version"]),
            str(d["file"]),
            int(str(d["line"])),
            str(d["function"]),
            str(d["kind"]),
            str(d["type"]),
            str(d["template"]),
            None if d["pattern"] is None else str(d["pattern"]),
            None if d["class"] is None else str(d["class"]),
            None if d["rule"] is None else str(d["rule"]),
            bool(d["load"]),
            str(d["why"]),
            None if d.get("phase") is None else str(d["phase"]),
        )


def classify(row: Row) -> Row:
    """The row with its class, rule, load and why set from the mapping and its pattern."""
    template = parse_template(row.template)
    text = readable(template)
    cls, rule = message_classes.classify(text, row.type, row.file, row.function)
    pattern, why = pattern_of(template)
    load = pattern is not None and cls is not None and row.kind not in APART
    if row.kind == "wrap":
        why = "only wraps another error (its own site says the message): listed apart"
    elif cls is None:
        why = why or "no rule of the mapping places it"
    elif row.kind == "log.warning":
        why = why or "a warning: a cause only when a death follows, never loaded on its own"
    row.cls, row.rule, row.pattern, row.load, row.why = cls, rule, pattern, load, why
    row.phase = message_classes.phase_of(cls, row.file)
    return row


def _ambiguous(rows: list[Row]) -> None:
    """One pattern, two classes (the same text checked in two layers): neither is loaded."""
    classes: dict[str, set[str]] = {}
    for row in rows:
        if row.load and row.pattern is not None and row.cls is not None:
            classes.setdefault(row.pattern, set()).add(row.cls)
    for row in rows:
        if row.load and row.pattern is not None and len(classes[row.pattern]) > 1:
            row.load = False
            row.why = "the same text has other classes elsewhere: " + ", ".join(
                sorted(classes[row.pattern])
            )


def build_rows(engine: str, version: str, found: Iterable[mx.Site]) -> list[Row]:
    rows = []
    seen = set()
    for site in found:
        if RUNTIME_FUNCTIONS.search(site.function) and not STARTUP_READERS.search(site.file):
            continue  # served requests, not the start
        if not site.template or all(p is None for p in site.template):
            continue  # a message that is only a value (``raise ValueError(msg)`` unresolved)
        if site.kind == "log.warning" and not _RESOURCE.search(readable(site.template)):
            continue
        key = (site.file, site.line, site.kind, site.template)
        if key in seen:
            continue
        seen.add(key)
        row = Row(
            engine,
            version,
            site.file,
            site.line,
            site.function,
            site.kind,
            site.type,
            template_text(site.template),
            None,
            None,
            None,
            False,
            "",
        )
        rows.append(classify(row))
    _ambiguous(rows)
    return rows


# rows outside the coverage's sites: resource warnings (a cause only with a death) and Go
# errors that only wrap another (``"%s: %w"``: the wrapped error's own site is counted)
APART = ("log.warning", "wrap")


def coverage(rows: list[Row]) -> dict[str, int | float]:
    """Sites (warnings and pure wraps apart), those with a class, those recognised (class and
    pattern)."""
    errors = [r for r in rows if r.kind not in APART]
    classed = [r for r in errors if r.cls is not None]
    loaded = [r for r in errors if r.load]
    share = round(100.0 * len(loaded) / len(errors), 1) if errors else 0.0
    return {
        "sites": len(errors),
        "with_class": len(classed),
        "recognised": len(loaded),
        "share_percent": share,
        "warnings": sum(r.kind == "log.warning" for r in rows),
        "wraps": sum(r.kind == "wrap" for r in rows),
    }


def reclassified(rows: list[Row]) -> list[Row]:
    """The rows given their class by the mapping as it is now (templates and places kept)."""
    fresh = [
        classify(
            Row(
                **{
                    **r.__dict__,
                    "pattern": None,
                    "cls": None,
                    "rule": None,
                    "load": False,
                    "why": "",
                }
            )
        )
        for r in rows
    ]
    _ambiguous(fresh)
    return fresh
