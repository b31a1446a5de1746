"""The report flags every reporting command shares (``--markdown``, ``--markdown-file``,
``--redact-hosts``), where the report goes, and its redactor."""

from __future__ import annotations

import argparse
import dataclasses
import socket
from typing import TextIO

from bringup.cli.main import Context
from bringup.core import engine_args
from bringup.core.report.redact import Redactor, redactor
from bringup.errors import UsageError

STDOUT = "-"


def markdown_target(args: argparse.Namespace) -> str | None:
    """Where the report goes: a file, ``-`` (stdout), or None (no report)."""
    if getattr(args, "markdown_file", None):
        return str(args.markdown_file)
    return STDOUT if getattr(args, "markdown", False) else None


def report_redactor(
    args: argparse.Namespace, ctx: Context, argv: tuple[str, ...], *, hosts: tuple[str, ...] = ()
) -> Redactor:
    """The redactor of this command's report: the command's and environment's secrets, and
    with --redact-hosts this machine's names and the given hosts."""
    names = [socket.gethostname(), socket.getfqdn(), *hosts]
    return redactor(
        argv,
        ctx.environ.items(),
        hosts=bool(getattr(args, "redact_hosts", False)),
        host_names=names,
        extra=[getattr(args, "api_key", None) or ""],
    )


def write_text(path: str, text: str, stdout: TextIO) -> None:
    """``text`` to ``path`` (``-``: stdout), written whole (a temporary file renamed)."""
    if path == STDOUT:
        stdout.write(text)
        stdout.flush()
        return
    from bringup.adapters.commands import write_local

    write_local(path, text, hint="give the report a path in a writable folder")


def add_markdown(parser: argparse.ArgumentParser) -> None:
    """``--markdown``, ``--markdown-file FILE`` and ``--redact-hosts``."""
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="print a Markdown report to paste into an issue (versions, GPUs, command, plan, "
        "timeline, root cause, remedies, the log's last 200 lines) on stdout; the usual output "
        "goes to stderr; tokens and keys are always redacted",
    )
    parser.add_argument(
        "--markdown-file",
        metavar="FILE",
        help="write the Markdown report to FILE instead (the usual output stays where it was)",
    )
    parser.add_argument(
        "--redact-hosts",
        action="store_true",
        help="in the report, also replace IP addresses, host names and home folders",
    )


def check(args: argparse.Namespace) -> None:
    """One line for flags that cannot go together."""
    if markdown_target(args) == STDOUT and getattr(args, "json", False):
        raise UsageError(
            "--json and --markdown both want stdout",
            hint="give the report a file: --markdown report.md",
        )


def human_context(args: argparse.Namespace, ctx: Context) -> Context:
    """The context of the usual output: stderr when the report takes stdout."""
    if markdown_target(args) == STDOUT:
        return dataclasses.replace(ctx, stdout=ctx.stderr)
    return ctx


def world_size(argv: tuple[str, ...]) -> int:
    """tensor x pipeline parallel of a server command (1 when it says neither)."""
    flags = engine_args.parse_server_command(argv).flags if argv else ()
    size = 1
    for names in (("--tensor-parallel-size", "-tp"), ("--pipeline-parallel-size", "-pp")):
        value = engine_args.get_flag(flags, *names)
        if value and value.isdigit():
            size *= int(value)
    return size
