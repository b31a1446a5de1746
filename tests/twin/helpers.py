"""Start the twin as a real process and watch its output, sockets and readings file."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Twin:
    """One `python -m bringup twin vllm ...` process with its stdout/stderr collected."""

    def __init__(self, args: list[str], gpus_file: Path, port: int) -> None:
        self.port = port
        self.gpus_file = gpus_file
        env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        env["PYTHONPATH"] = str(ROOT / "src")
        argv = [
            sys.executable,
            "-m",
            "bringup",
            "twin",
            "vllm",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--gpus-file",
            str(gpus_file),
            "--time-scale",
            "0.01",
            *args,
        ]
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._threads = [
            threading.Thread(target=self._pump, args=(s, b), daemon=True)
            for s, b in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))
        ]
        for t in self._threads:
            t.start()

    @staticmethod
    def _pump(stream: object, sink: list[str]) -> None:
        sink.extend(raw.decode() for raw in iter(stream.readline, b""))  # type: ignore[attr-defined]

    @property
    def stdout(self) -> str:
        return "".join(self.out)

    @property
    def stderr(self) -> str:
        return "".join(self.err)

    def wait_for(self, text: str, timeout: float = 60.0, stream: str = "both") -> float:
        """Wait until ``text`` shows up; returns the monotonic time it was seen."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hay = {"out": self.stdout, "err": self.stderr}.get(stream, self.stdout + self.stderr)
            if text in hay:
                return time.monotonic()
            if self.proc.poll() is not None and text not in self.stdout + self.stderr:
                time.sleep(0.2)  # let the pumps drain
                if text in self.stdout + self.stderr:
                    return time.monotonic()
                raise AssertionError(
                    f"twin exited {self.proc.returncode} before {text!r}:\n{self.stdout[-3000:]}\n{self.stderr[-3000:]}"
                )
            time.sleep(0.02)
        raise AssertionError(
            f"{text!r} not seen in {timeout}s:\n{self.stdout[-3000:]}\n{self.stderr[-3000:]}"
        )

    def finish(self, timeout: float = 60.0) -> int:
        code = self.proc.wait(timeout=timeout)
        self._close()
        return code

    def _close(self) -> None:
        for t in self._threads:
            t.join(timeout=5)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def readings(self) -> dict:
        return json.loads(self.gpus_file.read_text())

    def used_bytes(self) -> list[int]:
        return [g["memory_used_bytes"] for g in self.readings()["gpus"]]

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._close()


def connect_error(port: int) -> int | None:
    """The errno of a TCP connect to 127.0.0.1:port, or None if it connected."""
    with socket.socket() as s:
        s.settimeout(5)
        try:
            s.connect(("127.0.0.1", port))
        except OSError as exc:
            return exc.errno
    return None
