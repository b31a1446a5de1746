"""The README is short, hand-written, and its commands work as written."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.cli.main import COMMANDS, command_parser

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _code_lines() -> list[str]:
    """The lines of the README's fenced blocks, comments taken off."""
    blocks = re.findall(r"^```\n(.*?)^```", README, flags=re.S | re.M)
    lines = [line.split("  #", 1)[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line]


def test_readme_fits_in_250_lines() -> None:
    """Two screens, not 2,536 lines: everything else is in docs/."""
    assert len(README.splitlines()) <= 250


def test_every_command_has_a_row_and_its_page() -> None:
    """Each command is in the table, linked to its docs page, and the page exists."""
    for name in COMMANDS:
        row = f"| `bringup {name}` |"
        assert row in README, name
        assert f"(docs/cli/{name}.md)" in README, name
        assert (ROOT / "docs" / "cli" / f"{name}.md").is_file(), name


def test_links_point_at_files() -> None:
    """Every relative link of the README names a file of the checkout."""
    for target in re.findall(r"\]\(([^)#]+)\)", README):
        if "://" not in target:
            assert (ROOT / target).exists(), target


@pytest.mark.parametrize("line", [ln for ln in _code_lines() if ln.startswith("bringup ")])
def test_bringup_lines_parse(line: str) -> None:
    """Each ``bringup ...`` line of the README is accepted by that command's own parser."""
    words = shlex.split(line.split(">", 1)[0])
    name, rest = words[1], words[2:]
    if name.startswith("-"):
        assert name == "--version"
        return
    before = rest[: rest.index("--")] if "--" in rest else rest
    command_parser(name).parse_args(before)


def test_make_targets_exist() -> None:
    """The README's ``make X`` lines name targets of the Makefile."""
    makefile = (ROOT / "Makefile").read_text()
    for line in _code_lines():
        if line.startswith("make "):
            target = line.split()[1]
            assert re.search(rf"^{re.escape(target)}:", makefile, flags=re.M), target


def test_version_runs() -> None:
    """``bringup --version``, as the install section says to check."""
    proc = subprocess.run(
        [sys.executable, "-m", "bringup", "--version"], capture_output=True, text=True, check=True
    )
    assert proc.stdout.startswith("bringup ")


def test_startup_excerpt_is_what_plan_prints(tmp_path: Path) -> None:
    """The README's ``time to ready`` excerpt is a cut of what ``plan`` prints now: each
    line a prefix of the real line (the basis column cut), in the same order."""
    import io

    from bringup.cli.main import Context, main

    block = README[README.index("$ bringup plan Llama-3.1-8B --gpu H100") :]
    block = block[: block.index("```")]
    command, *shown = block.rstrip("\n").splitlines()
    out = io.StringIO()
    env = {"NO_COLOR": "1", "VLLM_CACHE_ROOT": str(tmp_path / "vllm-cache")}
    code = main(shlex.split(command)[2:], Context(stdout=out, stderr=io.StringIO(), environ=env))
    printed = out.getvalue().splitlines()
    start = printed.index("time to ready (predicted):")
    assert code == 0
    assert len(shown) == 9  # the heading, 6 phases, the total, the start timeout
    for want, got in zip(shown, printed[start : start + len(shown)], strict=True):
        assert got.startswith(want), (want, got)
