"""``bringup diagnose``: read a startup log, say which phase it reached and why it failed.

Exit codes: 0 ready, 1 failed or hung, 3 incomplete (no verdict), 2 usage or unreadable input.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from bringup.cli import report_flags
from bringup.core import verdict
from bringup.core.diagnosis import Diagnosis
from bringup.core.not_a_log import SNIFF_BYTES, not_a_log
from bringup.core.printable import printable
from bringup.core.vocab import Engine
from bringup.errors import InputError, UsageError
from bringup.render import diagnosis as render
from bringup.render.console import make_console
from bringup.render.json_out import print_json

if TYPE_CHECKING:
    from bringup.cli.main import Context


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--engine, --json and the log file (or - for stdin)."""
    parser.add_argument(
        "--engine",
        choices=["auto", *(e.value for e in Engine)],
        default="auto",
        help="the engine that wrote the log (default: recognise it)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    report_flags.add_markdown(parser)
    parser.add_argument(
        "--timeline",
        metavar="FILE.svg",
        help="draw the phases on the log's time axis, the failure at its line, as an SVG picture",
    )
    parser.add_argument(
        "file",
        metavar="FILE|-",
        nargs="?",
        help="the startup log; - reads stdin (the default when stdin is not a terminal)",
    )


def run(args: argparse.Namespace, ctx: Context) -> int:
    """Diagnose the log and print the verdict; the exit code follows the outcome."""
    engine = None if args.engine == "auto" else Engine(args.engine)
    if args.file is None:  # `bringup diagnose < log`, `... | bringup diagnose`
        if getattr(ctx.stdin, "isatty", lambda: True)():
            raise UsageError(
                "no log given", hint="bringup diagnose FILE, or pipe it in: ... | bringup diagnose"
            )
        args.file = "-"
    if report_flags.markdown_target(args) or args.timeline:
        return _report(args, ctx, engine)
    result = diagnose_path(args.file, engine, ctx)
    if args.json:
        print_json(render.to_json(result), ctx.stdout)
    else:
        source = "stdin" if args.file == "-" else printable(args.file)
        render.print_diagnosis(result, make_console(ctx.stdout, ctx.environ), source)
    return verdict.offline_exit_code(result.outcome)


def _report(args: argparse.Namespace, ctx: Context, engine: Engine | None) -> int:
    """``--markdown`` / ``--timeline``: the report, and the usual output (on stderr when the
    report takes stdout)."""
    from bringup.cli.log_report import log_report, write_outputs

    report_flags.check(args)
    source = "stdin" if args.file == "-" else printable(args.file)
    held = None
    if args.file == "-":
        held = _read_stdin(ctx)
        check_stdin(held[:SNIFF_BYTES], complete=True)
    else:
        _check_file(args.file)
    made = log_report(
        args.file, engine, ctx, title=f"bringup diagnose {source}", source=source, held=held
    )
    target = report_flags.markdown_target(args)
    write_outputs(made, args, ctx, (), target)
    human = report_flags.human_context(args, ctx)
    if args.json:
        print_json(render.to_json(made.diagnosis), human.stdout)
    else:
        render.print_diagnosis(made.diagnosis, make_console(human.stdout, ctx.environ), source)
    return verdict.offline_exit_code(made.diagnosis.outcome)


def diagnose_path(path: str, engine: Engine | None, ctx: Context) -> Diagnosis:
    """The verdict on the log at ``path`` (``-``: stdin), streamed in constant memory."""
    from bringup.adapters import files
    from bringup.core.logfeed import diagnose_blocks, diagnose_chunks, read_blocks

    if path == "-":
        buffer = getattr(ctx.stdin, "buffer", None)
        if buffer is None:  # a text stream (tests): it is already in memory
            held = _read_stdin(ctx)
            check_stdin(held[:SNIFF_BYTES], complete=True)
            return diagnose_chunks([held], engine)
        read = files.readinto_of(buffer, path="stdin", what="log")
        head = _read_head(read)
        check_stdin(head, complete=len(head) < SNIFF_BYTES)
        return diagnose_blocks(read_blocks(_served_first(head, read)), engine)
    with files.open_file(path, what="log file", hint=_FILE_HINT) as fh:
        size = os.fstat(fh.fileno()).st_size
        _refuse(printable(path), not_a_log(os.pread(fh.fileno(), SNIFF_BYTES, 0), size))
        reader = files.readinto_of(fh, path=path, what="log file", limit=size or None)
        return diagnose_blocks(read_blocks(reader), engine)


def _read_head(readinto: Callable[[memoryview], int]) -> bytes:
    """The first :data:`SNIFF_BYTES` of a stream (all of it when shorter), however a pipe
    splits them."""
    head = bytearray(SNIFF_BYTES)
    got = 0
    with memoryview(head) as view:
        while got < SNIFF_BYTES and (n := readinto(view[got:])):
            got += n
    return bytes(head[:got])


def _served_first(
    head: bytes, readinto: Callable[[memoryview], int]
) -> Callable[[memoryview], int]:
    """``readinto`` of the stream whose first bytes, ``head``, were read already."""
    at = 0

    def first(view: memoryview) -> int:
        nonlocal at
        if at < len(head):
            n = min(len(view), len(head) - at)
            view[:n] = head[at : at + n]
            at += n
            return n
        return readinto(view)

    return first


_FILE_HINT = "pass a readable log file, or - to read stdin"


def check_stdin(head: bytes, *, complete: bool) -> None:
    """Refuse stdin in one line when it is not a log: nothing at all (``< /dev/null``, an
    empty pipe), a weights file, or (when ``head`` is all of it) no text line."""
    if not head:
        raise InputError(
            "stdin: empty input (nothing was piped in)",
            hint="pipe the server's startup log in, or give its path",
        )
    _refuse("stdin", not_a_log(head, len(head) if complete else _LONGER))


_LONGER = 1 << 62  # stdin read only in part: its size is more than its first bytes


def _check_file(path: str) -> None:
    from bringup.adapters import files

    with files.open_file(path, what="log file", hint=_FILE_HINT) as fh:
        size = os.fstat(fh.fileno()).st_size
        _refuse(printable(path), not_a_log(os.pread(fh.fileno(), SNIFF_BYTES, 0), size))


def _refuse(source: str, why: str | None) -> None:
    if why is not None:
        raise InputError(f"{source}: {why}", hint="give the server's startup log")


def _read_stdin(ctx: Context) -> bytes:
    from bringup.cli.log_report import read_log

    return read_log("-", ctx) or b""
