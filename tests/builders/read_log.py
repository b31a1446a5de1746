"""A whole log read line by line through the public ``LogAnalyzer`` (no screen shortcut),
as ``diagnose`` reads a log it cannot screen."""

from __future__ import annotations

from collections.abc import Iterable

from bringup.core.analyzer import LogAnalyzer
from bringup.core.diagnosis import Diagnosis
from bringup.core.vocab import Engine


def read_lines(lines: Iterable[str], engine: Engine | None = None) -> Diagnosis:
    """The verdict on a whole log given as lines (without newlines)."""
    analyzer = LogAnalyzer(engine)
    for line in lines:
        analyzer.feed(line)
    return analyzer.finish(whole_log=True)
