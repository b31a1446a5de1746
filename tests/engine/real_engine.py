"""Helpers for the real-engine tests: free ports, the server command, finding and stopping servers."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_argv(model: Path | str, port: int, *extra: str) -> list[str]:
    """The llama-cpp-python server command for ``model`` on ``port``, with this Python."""
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_threads",
        "1",
        *extra,
    ]


def engine_processes(marker: str) -> list[psutil.Process]:
    """Live (non-zombie) llama_cpp.server processes whose command line contains ``marker``."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            if (
                "llama_cpp.server" in cmd
                and marker in cmd
                and p.info["status"] != psutil.STATUS_ZOMBIE
            ):
                found.append(p)
        except psutil.Error:
            continue
    return found


class Server:
    """A real server started directly (not through bringup), output to a file; always killed."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, needle: str, timeout_seconds: float = 60.0) -> bool:
        """Wait (polling the log) until ``needle`` is printed or the process exits."""
        end = time.monotonic() + timeout_seconds
        while time.monotonic() < end:
            if needle in self.text():
                return True
            if self.proc.poll() is not None:
                return needle in self.text()
            time.sleep(0.05)
        return False

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()
