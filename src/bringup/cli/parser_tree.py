"""The whole command line as one argparse tree (``bringup COMMAND ...`` as subparsers), made
from the same ``add_arguments`` each command parses with: shell completion (shtab), the man
page (argparse-manpage) and the docs' usage blocks are generated from it, never written by hand.
"""

from __future__ import annotations

import argparse

from bringup import __version__
from bringup.cli.main import COMMANDS, fill_parser

DESCRIPTION = "From weights on disk to verified serving, and exactly why not."


def full_parser() -> argparse.ArgumentParser:
    """``bringup`` with every command as a subparser, each with its help and exit codes."""
    top = argparse.ArgumentParser(prog="bringup", description=DESCRIPTION)
    top.add_argument("--version", action="version", version=f"bringup {__version__}")
    sub = top.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for name, text in COMMANDS.items():
        parser = sub.add_parser(
            name,
            help=text,
            description=text,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        fill_parser(name, parser)
    return top


def command_help(name: str, width: int = 100) -> str:
    """``bringup NAME --help`` as printed at ``width`` columns (for the docs)."""
    from bringup.cli.main import command_parser

    parser = command_parser(name)
    parser.formatter_class = _fixed_width(width)
    return parser.format_help()


def _fixed_width(width: int) -> type[argparse.HelpFormatter]:
    class Fixed(argparse.RawDescriptionHelpFormatter):
        def __init__(self, prog: str) -> None:
            super().__init__(prog, width=width, max_help_position=32)

    return Fixed
