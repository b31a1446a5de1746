"""Rerun the docs' examples and check their output is what the pages show.

An example is a fenced block in ``docs/**/*.md`` whose lines start ``$ bringup ...`` (a
trailing ``\\`` continues the command), each followed by its output, and ``$ echo $?`` by the
exit status. The examples that need nothing but this checkout (``diagnose`` of a log in the
repository, ``plan`` of a bundled model) are rerun here: ``--check`` exits 1 naming each one
whose output changed, ``--write`` puts the new output into the page. A line ``...`` in the shown output stands for any lines
(``--write`` puts the whole output back). The others (a twin, a
GPU, an ssh host, files made elsewhere) were recorded from real runs; they are listed as such.

    python scripts/docs_examples.py --check | --write | --list
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RERUN = ("diagnose", "plan")  # deterministic from the checkout alone
FENCE = re.compile(r"^(```|~~~)")


@dataclass
class Example:
    """One ``$ bringup ...`` of a page: where its output lines are, and what it shows."""

    page: Path
    command: str
    start: int  # first output line (index into the page's lines)
    end: int  # one past the last output line
    shown: list[str]
    status: int | None  # the `$ echo $?` that follows it, if any
    status_line: int | None


def examples(page: Path) -> list[Example]:
    """The examples of one page, in order."""
    lines = page.read_text().splitlines()
    found: list[Example] = []
    in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if FENCE.match(line):
            in_fence = not in_fence
            i += 1
            continue
        if in_fence and line.startswith("$ bringup "):
            command = line[2:]
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command[:-1].rstrip() + " " + lines[i].strip()
            start = i + 1
            j = start
            while j < len(lines) and not lines[j].startswith("$ ") and not FENCE.match(lines[j]):
                j += 1
            status = status_line = None
            if j < len(lines) and lines[j].strip() == "$ echo $?" and j + 1 < len(lines):
                status_line = j + 1
                status = int(lines[j + 1]) if lines[j + 1].strip().isdigit() else None
            found.append(Example(page, command, start, j, lines[start:j], status, status_line))
            i = j
            continue
        i += 1
    return found


def rerunnable(example: Example) -> bool:
    """Whether the example needs nothing but this checkout."""
    words = shlex.split(example.command)
    if len(words) < 2 or words[1] not in RERUN or "--host" in words or ".gguf" in example.command:
        return False
    if words[1] == "diagnose":
        return (ROOT / words[-1]).is_file()
    return True


def rerun(example: Example) -> tuple[list[str], int]:
    """The example's output (stdout then stderr, as a terminal-less shell shows them) and
    its exit status."""
    words = shlex.split(example.command)
    env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "100"}
    env.pop("FORCE_COLOR", None)
    proc = subprocess.run(
        [sys.executable, "-m", "bringup", *words[1:]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    out = (proc.stdout + proc.stderr).rstrip("\n")
    return [line.rstrip() for line in out.splitlines()], proc.returncode


def matches(shown: list[str], out: list[str]) -> bool:
    """Whether ``out`` is what the page shows; a line ``...`` there stands for any lines.

    >>> matches(["a", "...", "d"], ["a", "b", "c", "d"]), matches(["a", "..."], ["b"])
    (True, False)
    """
    if not shown:
        return not out
    if shown[0] == "...":
        return any(matches(shown[1:], out[i:]) for i in range(len(out) + 1))
    return bool(out) and shown[0] == out[0] and matches(shown[1:], out[1:])


def all_examples() -> list[Example]:
    """Every example of every page."""
    return [e for page in sorted((ROOT / "docs").rglob("*.md")) for e in examples(page)]


def main(argv: list[str]) -> int:
    mode = argv[0] if argv else "--check"
    stale: list[str] = []
    edits: dict[Path, list[tuple[Example, list[str], int]]] = {}
    for example in all_examples():
        where = f"{example.page.relative_to(ROOT)}: $ {example.command}"
        if not rerunnable(example):
            if mode == "--list":
                print(f"recorded  {where}")
            continue
        if mode == "--list":
            print(f"rerun     {where}")
            continue
        out, code = rerun(example)
        shown = [line.rstrip() for line in example.shown]
        if not matches(shown, out) or (example.status is not None and code != example.status):
            stale.append(where)
            edits.setdefault(example.page, []).append((example, out, code))
    if mode == "--write":
        for page, changes in edits.items():
            lines = page.read_text().splitlines()
            for example, out, code in sorted(changes, key=lambda c: -c[0].start):
                if example.status_line is not None:
                    lines[example.status_line] = str(code)
                lines[example.start : example.end] = out
            page.write_text("\n".join(lines) + "\n")
        for where in stale:
            print(f"rewrote {where}")
        return 0
    for where in stale:
        print(f"stale example (run scripts/docs_examples.py --write): {where}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
