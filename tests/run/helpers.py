"""Shared helpers for the run/watch tests: free ports, the fake server, in-process CLI calls."""

from __future__ import annotations

import io
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import psutil

from bringup.cli.main import Context, main

FAKE = str(Path(__file__).with_name("fake_server.py"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fake(mode: str, port: int, *extra: str) -> list[str]:
    return [sys.executable, FAKE, "--mode", mode, "--port", str(port), *extra]


def cli(args: list[str], environ: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    env = {"PATH": os.environ.get("PATH", ""), "NO_COLOR": "1", **(environ or {})}
    code = main(args, Context(stdout=out, stderr=err, stdin=io.StringIO(), environ=env))
    return code, out.getvalue(), err.getvalue()


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def processes_running(port: int) -> list[psutil.Process]:
    """Fake servers or twins started for ``port`` that still run (orphans if any).

    The twin's guard_wait holder is excluded: it runs in its own session by design (an
    "earlier instance" that outlives the run), and bringup leaves such processes alone.
    """
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            cmd = p.info["cmdline"] or []
            ours = FAKE in cmd or ("twin" in cmd and "bringup.twin.holder" not in cmd)
            if ours and str(port) in cmd and p.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            continue
    return found
