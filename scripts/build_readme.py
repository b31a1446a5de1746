"""Build README.md from docs/readme-head.md and one section per command in docs/cli/.

Each command's page is written next to its code (docs/cli/<command>.md, with real output);
the README is their concatenation, in the order of the story, with headings shifted so each
page's title is a level-3 heading. `--check` exits 1 when README.md is out of date (a test
runs it), so the README cannot drift from the pages.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ORDER = [
    "verify",
    "plan",
    "guard",
    "unit",
    "run",
    "up",
    "watch",
    "status",
    "diagnose",
    "report",
    "bench",
    "demo",
    "twin",
    "remote",
]
FENCE = re.compile(r"^(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s")


def shift(text: str, top: int = 3) -> str:
    """Shift headings (outside code fences) so the page's first heading has level ``top``."""
    lines = text.splitlines()
    in_fence = False
    first: int | None = None
    out = []
    for line in lines:
        if FENCE.match(line):
            in_fence = not in_fence
        m = None if in_fence else HEADING.match(line)
        if m:
            level = len(m.group(1))
            first = level if first is None else first
            line = "#" * min(6, max(top, level - first + top)) + line[level:]
        out.append(line)
    return "\n".join(out).strip() + "\n"


def build() -> str:
    parts = [(ROOT / "docs" / "readme-head.md").read_text().rstrip() + "\n"]
    pages = {p.stem: p for p in (ROOT / "docs" / "cli").glob("*.md")}
    names = ORDER + sorted(set(pages) - set(ORDER))
    parts.extend(shift(pages[name].read_text()) for name in names if name in pages)
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    text = build()
    readme = ROOT / "README.md"
    if "--check" in argv:
        if readme.read_text() != text:
            print("README.md is out of date: run `python scripts/build_readme.py`", file=sys.stderr)
            return 1
        return 0
    readme.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
