"""Build the man page ``man/bringup.1`` from the parser (argparse-manpage), never by hand.

``python scripts/build_man.py [OUT]`` writes it (default ``man/bringup.1``); ``make man``
runs it and ``make test`` builds it (tests/test_cli_help.py renders it with ``man -l``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from argparse_manpage.manpage import Manpage

from bringup import __version__
from bringup.cli.help_text import EXIT_CODES
from bringup.cli.parser_tree import full_parser

ROOT = Path(__file__).resolve().parent.parent


def build() -> str:
    """The man page's roff source."""
    page = Manpage(
        full_parser(),
        _data={
            "project_name": "bringup",
            "version": __version__,
            "manual_title": "bringup manual",
            "description": "From weights on disk to verified serving, and exactly why not.",
            "date": "2026-12-01",
        },
    )
    page.add_section("exit status", "=", exit_status())
    page.add_section(
        "see also", "=", "The documentation site (docs/ in the source, `mkdocs serve`)."
    )
    return str(page)


def exit_status() -> str:
    """One tagged paragraph per command: its exit codes (the ones its ``--help`` lists)."""
    out: list[str] = []
    for command, rows in EXIT_CODES.items():
        codes = "; ".join(f"{code} {text}" for code, text in rows)
        out += [".TP", f".B bringup {command}", codes.replace("-", "\\-")]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else ROOT / "man" / "bringup.1"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(build())
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
