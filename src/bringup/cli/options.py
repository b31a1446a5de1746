"""Command-line options that several commands declare the same way."""

from __future__ import annotations

import argparse


def add_duration(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    flag: str,
    text: str,
    *,
    default: str | None = None,
    note: str | None = None,
) -> None:
    """A ``DURATION`` option (``30s``, ``20m``, ``2h``; read later with ``parse_duration``, so
    a bad value is one clear line, not argparse's usage): its help says the default.

    >>> p = argparse.ArgumentParser(); add_duration(p, "--restart-sec", "RestartSec=", default="30s")
    >>> p.parse_args([]).restart_sec, p._actions[-1].help
    ('30s', 'RestartSec= (default 30s)')
    """
    extra = "; ".join(part for part in (f"default {default}" if default else None, note) if part)
    parser.add_argument(
        flag, default=default, metavar="DURATION", help=f"{text} ({extra})" if extra else text
    )
