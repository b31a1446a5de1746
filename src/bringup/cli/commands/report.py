"""``bringup report RUN_DIR``: the Markdown report of a past run, from its run folder.

A run folder is what ``bringup run --nodes`` leaves for each rank on its node
(``/tmp/bringup-nodes/RUN-rankN``, or under ``BRINGUP_NODES_DIR``): ``cmd`` (the command),
``log`` (the server's output), ``exit`` (its exit status), ``pid``. Give one rank's folder,
copied here or read on the node. The report is redacted as every report is (tokens and
keys always; with ``--redact-hosts`` also IP addresses, host names and home folders).

Exit codes: 0 the run was ready, 1 failed or hung, 3 the log ends before a verdict,
2 usage or an unreadable folder.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bringup.cli.main import Context
from bringup.core import verdict
from bringup.core.printable import printable
from bringup.core.vocab import Engine
from bringup.errors import InputError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """RUN_DIR, --html, -o, --timeline, --redact-hosts, --engine."""
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (holds log, cmd, exit)")
    parser.add_argument(
        "--html",
        action="store_true",
        help="an HTML page with the timeline drawn in, instead of Markdown",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        default="-",
        help="write the report to FILE (default: stdout)",
    )
    parser.add_argument(
        "--timeline", metavar="FILE.svg", help="also draw the timeline as an SVG picture"
    )
    parser.add_argument(
        "--redact-hosts",
        action="store_true",
        help="also replace IP addresses, host names and home folders",
    )
    parser.add_argument(
        "--engine",
        choices=["auto", *(e.value for e in Engine)],
        default="auto",
        help="the engine that wrote the log (default: recognise it)",
    )


def run(args: argparse.Namespace, ctx: Context) -> int:
    from bringup.cli.log_report import log_report, write_outputs

    folder = Path(args.run_dir)
    log = folder / "log"
    if not log.is_file():
        raise InputError(
            f"{printable(args.run_dir)} is not a run folder: it has no log",
            hint="give the folder of one rank of a run (it holds log, cmd and exit), e.g. /tmp/bringup-nodes/RUN-rank0",
        )
    argv = tuple(_read(folder / "cmd").split())
    status = _read(folder / "exit").strip()
    exit_note = f"server exit status {status}" if status else None
    engine = None if args.engine == "auto" else Engine(args.engine)
    made = log_report(
        str(log),
        engine,
        ctx,
        title=f"bringup report {printable(folder.name)}",
        source=f"{printable(folder.name)}/log",
        command=argv,
        exit_note=exit_note,
    )
    write_outputs(made, args, ctx, argv, args.output)
    return verdict.offline_exit_code(made.diagnosis.outcome)


def _read(path: Path) -> str:
    """A small file of the run folder ('' when it is absent or unreadable)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(65536)
    except OSError:
        return ""
