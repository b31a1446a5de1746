"""The ``bringup`` command line: a thin dispatcher over one module per command.

Each command lives in ``bringup.cli.commands.<name>`` and provides::

    def add_arguments(parser: argparse.ArgumentParser) -> None: ...
    def run(args: argparse.Namespace, ctx: Context) -> int: ...

Everything after the first ``--`` is not parsed: it arrives as ``args.passthrough``
(a list, or None when there was no ``--``), for commands that wrap a server command.

Modules are imported only when their command runs, so ``bringup diagnose`` does not pay
for HTTP or NVML imports. Errors become one line on stderr and an exit code; a traceback
is shown only with BRINGUP_DEBUG=1.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from bringup import __version__, exit_codes
from bringup.cli import help_text
from bringup.errors import BringupError

# name -> one-line help. The order is the order of the story: verify, plan, guard, run...
COMMANDS: dict[str, str] = {
    "verify": "check a checkpoint is complete and intact before the engine reads it",
    "plan": "predict per-GPU memory and the failure, before launch",
    "guard": "wait until the GPUs are free, naming who holds them",
    "unit": "write a systemd unit that runs the server under bringup",
    "run": "start a server and follow it to a verified answer (or a diagnosis)",
    "up": "start a systemd unit and follow it to a verdict",
    "watch": "follow a server bringup did not start (unit, container, log, pid)",
    "status": "one look at a service: state, phase, last failure",
    "diagnose": "read a startup log: phase reached, root-cause line, remedy",
    "report": "a past run's report to paste into an issue, from its run folder",
    "bench": "measure what a ready server delivers, beside what the hardware allows",
    "demo": "the whole story on a machine without a GPU, with the engine twin",
    "twin": "run the engine twin (a stand-in vLLM for tests and demos)",
    "completion": "print the shell completion script for bash, zsh or fish",
}

EXIT_USAGE = exit_codes.EXIT_USAGE
# With --host these run bringup itself on the remote host (bringup.cli.remote, bringup.adapters.ssh_forward); the flags are taken out.
REMOTE_COMMANDS = ("verify", "plan", "guard", "diagnose", "unit", "run")
REMOTE_FLAGS = ("--host", "--accept-new-host-key", "--sudo", "--remote-bringup")


@dataclass
class Context:
    """What a command may touch: its streams and environment, passed in for testability."""

    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    stdin: TextIO = field(default_factory=lambda: sys.stdin)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so errors print as one line; an unknown
    option gets the one it most likely meant, a server command without ``--`` the ``--``."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise BringupError(f"{self.prog}: {message}", hint=f"see `{self.prog} --help`")

    def parse_args(self, args: Sequence[str] | None = None, namespace: object = None) -> Any:  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            raise BringupError(
                f"{self.prog}: unrecognized arguments: {' '.join(extras)}",
                hint=help_text.unrecognized_hint(self, extras) or f"see `{self.prog} --help`",
            )
        return parsed


def _top_parser() -> argparse.ArgumentParser:
    width = max(len(n) for n in COMMANDS)
    epilog = "commands:\n" + "\n".join(f"  {n:<{width}}  {h}" for n, h in COMMANDS.items())
    parser = _Parser(
        prog="bringup",
        description="From weights on disk to verified serving, and exactly why not.",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"bringup {__version__}")
    parser.add_argument("command", nargs="?", metavar="COMMAND", help="one of the commands below")
    return parser


def command_parser(name: str) -> argparse.ArgumentParser:
    """The argument parser of one command (imports its module)."""
    parser = _Parser(
        prog=f"bringup {name}",
        description=COMMANDS[name],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fill_parser(name, parser)
    return parser


def fill_parser(name: str, parser: argparse.ArgumentParser) -> None:
    """Add command ``name``'s arguments and exit codes to ``parser`` (its own, or a subparser
    of the tree that completion, the man page and the docs are made from)."""
    add_arguments(name, parser)
    parser.epilog = "\n\n".join(p for p in (parser.epilog, help_text.epilog(name)) if p)


def add_arguments(name: str, parser: argparse.ArgumentParser) -> None:
    """Command ``name``'s own arguments, and the remote ones where it runs over ``--host``."""
    module = importlib.import_module(f"bringup.cli.commands.{name}")
    module.add_arguments(parser)
    if name in REMOTE_COMMANDS:
        from bringup.cli import remote

        remote.add_remote_arguments(parser)


def main(argv: Sequence[str] | None = None, ctx: Context | None = None) -> int:
    """Run bringup with ``argv``; return the exit code."""
    ctx = ctx or Context()
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return _dispatch(args, ctx)
    except BringupError as exc:
        ctx.stderr.write(f"bringup: error: {exc}\n")
        if "--json" in _split_dashes(args)[0]:  # scripts read one object, as for any outcome
            from bringup.render.json_out import write_line

            error = {"error": exc.message, "hint": exc.hint, "exit_code": exc.exit_code}
            write_line(error, ctx.stdout)
        return exc.exit_code
    except KeyboardInterrupt:
        ctx.stderr.write("bringup: interrupted\n")
        return exit_codes.SIGNAL_BASE + exit_codes.SIGINT
    except BrokenPipeError:
        # the reader went away (`bringup plan --list-models | head`): stop without a word,
        # as a command that SIGPIPE ends does, and drop what Python would flush at exit
        _silence(ctx.stdout)
        return exit_codes.SIGNAL_BASE + exit_codes.SIGPIPE
    except Exception as exc:
        if ctx.environ.get("BRINGUP_DEBUG"):
            raise
        ctx.stderr.write(
            f"bringup: internal error: {type(exc).__name__}: {exc} "
            "(set BRINGUP_DEBUG=1 for a traceback, and please report it)\n"
        )
        return exit_codes.EXIT_INTERNAL


def _silence(stream: TextIO) -> None:
    """Point ``stream``'s file descriptor at /dev/null (a stream without one is left)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _dispatch(args: list[str], ctx: Context) -> int:
    top = _top_parser()
    if not args or args[0] in ("-h", "--help"):
        top.print_help(ctx.stdout)
        return 0 if args else EXIT_USAGE
    if args[0] == "--version":
        ctx.stdout.write(f"bringup {__version__}\n")
        return 0
    args = _command_first(args)
    name, rest = args[0], args[1:]
    if name in _LEADING_FLAGS:
        raise BringupError(
            "no command given", hint="bringup COMMAND [options]; see `bringup --help`"
        )
    if name not in COMMANDS:
        meant = help_text.closest(name, COMMANDS)
        hint = f"did you mean `bringup {meant}`?" if meant else "see `bringup --help` for the list"
        raise BringupError(f"unknown command {name!r}", hint=hint)
    parser = command_parser(name)
    if rest and rest[0] in ("-h", "--help"):
        parser.print_help(ctx.stdout)
        return 0
    if name in REMOTE_COMMANDS and any(
        a.split("=", 1)[0] in REMOTE_FLAGS for a in _split_dashes(rest)[0]
    ):
        from bringup.adapters import ssh_forward
        from bringup.cli import remote

        call = remote.split_remote_flags(rest)
        if call is not None:
            return ssh_forward.forward(
                name,
                call,
                stdin=ctx.stdin,
                stdout=ctx.stdout,
                stderr=ctx.stderr,
                environ=ctx.environ,
            )
    before, after = _split_dashes(rest)
    namespace = parser.parse_args(before)
    namespace.passthrough = after
    module = importlib.import_module(f"bringup.cli.commands.{name}")
    code: int = module.run(namespace, ctx)
    return code


# flags without a value that people put before the command, as other tools take them
# (`bringup --json plan M`): they are the command's own, so they go after its name
_LEADING_FLAGS = frozenset({"--json", "--quiet", "-q", "--verbose"})


def _command_first(args: list[str]) -> list[str]:
    """``--json plan M`` -> ``plan --json M``: leading value-less flags move after the command.

    >>> _command_first(["--json", "plna", "x"])
    ['plna', '--json', 'x']
    >>> _command_first(["--tp", "plan"])
    ['--tp', 'plan']
    """
    lead = 0
    while lead < len(args) and args[lead] in _LEADING_FLAGS:
        lead += 1
    if lead == 0 or lead == len(args):
        return args
    return [args[lead], *args[:lead], *args[lead + 1 :]]


def _split_dashes(args: list[str]) -> tuple[list[str], list[str] | None]:
    """Split at the first ``--``: bringup's own flags before, the server command after."""
    if "--" not in args:
        return args, None
    i = args.index("--")
    return args[:i], args[i + 1 :]


def entry() -> None:
    """Console-script entry point."""
    for stream in (sys.stdout, sys.stderr):
        # a name with invalid UTF-8 (a lone surrogate from the OS) prints as \udcff, never
        # a UnicodeEncodeError; JSON keeps parsing (it is a valid \u escape)
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    sys.exit(main())
