"""A citation of a Markdown file's section in the source names a file that has that section
(``engines.md section 1`` cited a docs/engines.md that has no sections)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# ``docs/x.md`` section 3, ../shared/reference/x.md §2
CITATION = re.compile(r"([\w./-]*\.md)`*\s+(?:section|§)\s*(\d+)")


def _problems(text: str, where: str) -> list[str]:
    problems = []
    for path, number in CITATION.findall(text):
        if "/" not in path:
            problems.append(f"{where}: {path} section {number}: name the file's folder")
            continue
        cited = (ROOT / path).resolve()
        if not cited.is_relative_to(ROOT):  # the shared reference, beside the repository
            continue
        heading = re.compile(rf"^#+\s+(?:§\s*)?{number}\b", re.MULTILINE)
        if not cited.is_file() or not heading.search(cited.read_text()):
            problems.append(f"{where}: {path} has no section {number}")
    return problems


def test_each_cited_section_is_there() -> None:
    problems = [
        problem
        for path in sorted((ROOT / "src").rglob("*.py"))
        for problem in _problems(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert problems == []


def test_a_section_the_file_lacks_is_found() -> None:
    """The check can fail: a bare name, and a docs page without the section."""
    assert _problems("from engines.md section 1", "x") == [
        "x: engines.md section 1: name the file's folder"
    ]
    assert _problems("``docs/engines.md`` section 1", "x") == [
        "x: docs/engines.md has no section 1"
    ]
    assert _problems("``../shared/reference/engines.md`` section 1", "x") == []
