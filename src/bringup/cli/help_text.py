"""What ``--help`` and a usage error say beyond argparse's own: each command's exit codes
(its epilog), "did you mean" for a mistyped command or option (difflib over the parser's own
names), and the ``--`` hint when a server command is given without it."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable, Sequence

# command -> its exit codes, (code, meaning); the same codes as bringup.exit_codes.
EXIT_CODES: dict[str, tuple[tuple[str, str], ...]] = {
    "verify": (
        ("0", "no problems"),
        ("1", "problems found"),
        ("3", "no problems, but --hash had nothing to compare the sums with"),
        ("2", "usage or unreadable input"),
    ),
    "plan": (
        ("0", "fits (an uncertain fit too)"),
        ("1", "does not fit (an uncertain failure too)"),
        ("2", "usage or bad input"),
    ),
    "guard": (
        ("0", "the GPUs are free"),
        ("5", "timed out with the GPUs still held (holders listed)"),
        ("2", "usage or unreadable input"),
    ),
    "unit": (("0", "written (or installed)"), ("2", "usage, unreadable input, systemctl failed")),
    "run": (
        ("0", "ready (--exit-when-ready), or stopped on request after ready"),
        ("1", "failed (also: the server died after ready)"),
        ("4", "stalled or past --deadline"),
        ("2", "usage (no command, a command that does not exist)"),
        ("128+N", "interrupted by signal N before a verdict (130 Ctrl-C, 143 SIGTERM)"),
    ),
    "up": (
        ("0", "ready (the model answered)"),
        ("1", "failed"),
        ("4", "stalled or past --deadline"),
        ("2", "usage, or a unit that cannot be started or followed"),
        ("128+N", "interrupted by signal N before a verdict"),
    ),
    "watch": (
        ("0", "ready (with --follow: stopped watching after ready)"),
        ("1", "failed"),
        ("4", "stalled or past --deadline"),
        ("2", "usage, or a source that cannot be followed"),
        ("128+N", "interrupted by signal N before a verdict"),
    ),
    "status": (
        ("0", "ready: active and the model answered"),
        ("1", "failed, or active and the model does not answer"),
        ("3", "starting or unknown (activating, auto-restart, inactive, not loaded)"),
        ("2", "usage"),
    ),
    "diagnose": (
        ("0", "ready"),
        ("1", "failed or hung"),
        ("3", "incomplete: the log ends mid-startup with no verdict"),
        ("2", "usage or unreadable input"),
    ),
    "report": (
        ("0", "the run was ready"),
        ("1", "failed or hung"),
        ("3", "the log ends before a verdict"),
        ("2", "usage or an unreadable folder"),
    ),
    "bench": (
        ("0", "no request failed"),
        ("1", "some requests failed, or the server kept failing"),
        ("3", "the server could not be asked at all"),
        ("2", "usage or bad input"),
    ),
    "demo": (("0", "the story went as it should"), ("1", "otherwise")),
    "twin": (("0", "clean shutdown"), ("1", "the startup failed"), ("2", "bad flags")),
    "completion": (("0", "the script was printed"), ("2", "an unknown shell")),
}

# commands that take the server command after ``--``
SERVER_COMMANDS = ("run", "unit", "plan", "bench", "guard")


def epilog(command: str) -> str:
    """``exit codes:`` and one line per code, for the command's ``--help``."""
    rows = EXIT_CODES.get(command, ())
    if not rows:
        return ""
    width = max(len(code) for code, _ in rows)
    return "exit codes:\n" + "\n".join(f"  {code:<{width}}  {text}" for code, text in rows)


def option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every option string the parser knows (``--tensor-parallel-size``, ``-tp``...)."""
    return [s for action in parser._actions for s in action.option_strings]


def closest(word: str, names: Iterable[str]) -> str | None:
    """The one name ``word`` most likely meant, or None when none is close.

    >>> closest("plna", ["plan", "run", "unit"])
    'plan'
    >>> closest("--tp", ["--tensor-parallel-size", "-tp", "--json"])
    '-tp'
    >>> closest("--xyzzy", ["--json"]) is None
    True
    """
    pool = list(names)
    bare = word.lstrip("-")
    if word.startswith("-"):
        same = [n for n in pool if n.lstrip("-") == bare]  # the right name, the wrong dashes
        if same:
            return same[0]
    found = difflib.get_close_matches(word, pool, n=1, cutoff=0.6)
    return found[0] if found else None


def unrecognized_hint(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str | None:
    """What to say about ``unrecognized arguments``: the option meant, or the ``--``."""
    command = parser.prog.removeprefix("bringup ").strip()
    words = [w for w in extras if not w.startswith("-")]
    if command in SERVER_COMMANDS and words and not extras[0].startswith("-"):
        return (
            f"the server command goes after `--`: bringup {command} [options] -- {' '.join(extras)}"
        )
    names = option_strings(parser)
    for word in extras:
        if word.startswith("-"):
            meant = closest(word.split("=", 1)[0], names)
            if meant is not None:
                return f"did you mean {meant}? see `{parser.prog} --help`"
    flags = [w for w in extras if w.startswith("-")]
    if command in ("plan", "run", "unit") and flags:
        # `plan M -O0`: a flag of the server's own (vLLM's -O0, -cc ...) is read after `--`
        return (
            f"{flags[0]} is not a bringup option; a server flag goes in the server command "
            f"after `--`: bringup {command} [options] -- vllm serve MODEL {flags[0]} ..."
        )
    return None
