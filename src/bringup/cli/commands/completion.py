"""``bringup completion SHELL``: the shell completion script for bash, zsh or fish, generated
by shtab from the parser every command parses with (so it cannot miss an option).

Exit codes: 0 printed (or installed), 2 an unknown shell or a file that cannot be written.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from bringup.errors import InputError

if TYPE_CHECKING:
    from bringup.cli.main import Context

SHELLS = ("bash", "zsh", "fish")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The shell, and ``--install``."""
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete bringup in")
    parser.add_argument(
        "--install",
        action="store_true",
        help="write it where the shell looks for completions, for this user "
        "(bash: $XDG_DATA_HOME/bash-completion/completions; zsh: ~/.zfunc, add it to "
        "fpath; fish: ~/.config/fish/completions), instead of printing it",
    )


def script(shell: str) -> str:
    """The completion script for ``shell``."""
    import shtab

    from bringup.cli.parser_tree import full_parser

    text: str = shtab.complete(full_parser(), shell=shell)
    return text


def install_path(shell: str, environ: Mapping[str, str]) -> Path:
    """Where ``shell`` finds a user's completion for ``bringup``."""
    home = Path(environ.get("HOME") or Path.home())
    if shell == "bash":
        data = Path(environ.get("XDG_DATA_HOME") or home / ".local" / "share")
        return data / "bash-completion" / "completions" / "bringup"
    if shell == "zsh":
        return home / ".zfunc" / "_bringup"
    config = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    return config / "fish" / "completions" / "bringup.fish"


def run(args: argparse.Namespace, ctx: Context) -> int:
    """Print the script, or install it for this user."""
    text = script(args.shell)
    if not args.install:
        ctx.stdout.write(text)
        return 0
    path = install_path(args.shell, ctx.environ)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror}") from None
    ctx.stdout.write(f"wrote {path}\n")
    if args.shell == "zsh":
        ctx.stdout.write(
            "add `fpath=(~/.zfunc $fpath); autoload -Uz compinit; compinit` to ~/.zshrc\n"
        )
    return 0
