"""vLLM 0.33 output formats: logging records, uvicorn lines, tqdm bars, bare tracebacks.

Logging records go to stdout with the 0.33 header
``(<process> pid=<pid>) LEVEL mm-dd HH:MM:SS [file.py:line] message``; a multi-line
message repeats the header after ``\\r\\n`` on every line (vLLM's NewLineFormatter).
tqdm bars, uncaught tracebacks, the ``Process EngineCore:`` banner and uvicorn's own
lines carry no prefix and go to stderr; uvicorn's access log goes to stdout. Each record
is one write and one flush, so records from several processes sharing a pipe never mix.
"""

from __future__ import annotations

import threading
import time
from typing import TextIO


def _stamp() -> str:
    return time.strftime("%m-%d %H:%M:%S")


class LogWriter:
    """Writes one process's output in vLLM 0.33's formats."""

    def __init__(self, process_name: str, pid: int, out: TextIO, err: TextIO) -> None:
        self.process_name = process_name
        self.pid = pid
        self.out = out
        self.err = err
        self._lock = threading.Lock()

    def _emit(self, stream: TextIO, text: str) -> None:
        with self._lock:
            try:
                stream.write(text)
                stream.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass  # the reader went away; a real server would not crash on it either

    def record(self, level: str, where: str, message: str) -> None:
        """A logging record; ``where`` is ``file.py:line``."""
        header = f"({self.process_name} pid={self.pid}) {level} {_stamp()} [{where}] "
        self._emit(self.out, header + message.replace("\n", "\r\n" + header) + "\n")

    def info(self, where: str, message: str) -> None:
        self.record("INFO", where, message)

    def warning(self, where: str, message: str) -> None:
        self.record("WARNING", where, message)

    def error(self, where: str, message: str) -> None:
        self.record("ERROR", where, message)

    def exception(self, where: str, message: str, traceback_text: str) -> None:
        """``logger.exception``: the message, then the traceback, every line headed."""
        self.record("ERROR", where, message + "\n" + traceback_text.rstrip("\n"))

    def stderr(self, text: str) -> None:
        """Unprefixed text on stderr (tracebacks, banners, NCCL prints)."""
        self._emit(self.err, text if text.endswith("\n") else text + "\n")

    def stderr_raw(self, text: str) -> None:
        """Unprefixed text on stderr, exactly as given (tqdm's ``\\r`` updates)."""
        self._emit(self.err, text)

    def uvicorn(self, message: str, level: str = "INFO") -> None:
        """uvicorn.error: ``INFO:     message`` on stderr."""
        self._emit(self.err, f"{level + ':':<9} {message}\n")

    def access(self, client: str, method: str, path: str, status: int, phrase: str) -> None:
        """uvicorn.access: ``INFO:     127.0.0.1:53422 - "GET /health HTTP/1.1" 200 OK``."""
        self._emit(self.out, f'INFO:     {client} - "{method} {path} HTTP/1.1" {status} {phrase}\n')


def format_clock(seconds: float) -> str:
    """tqdm's ``mm:ss``."""
    s = max(0, int(seconds))
    return f"{s // 60:02d}:{s % 60:02d}"


def shards_bar(done: int, total: int, elapsed_seconds: float) -> str:
    """One update of vLLM's weight-loading bar (its bar format ends with a newline)."""
    pct = 100.0 * done / total
    if done == 0 or elapsed_seconds <= 0:
        timing = f"{format_clock(elapsed_seconds)}<?, ?it/s"
    else:
        rate = done / elapsed_seconds
        left = (total - done) / rate
        rate_text = f"{rate:.2f}it/s" if rate >= 1 else f"{1 / rate:.2f}s/it"
        timing = f"{format_clock(elapsed_seconds)}<{format_clock(left)}, {rate_text}"
    return (
        f"\rLoading safetensors checkpoint shards: {pct:3.0f}% Completed | "
        f"{done}/{total} [{timing}]\n"
    )


def graphs_bar(desc: str, done: int, total: int, elapsed_seconds: float) -> str:
    """One ``\\r`` update of a plain tqdm bar, e.g. the CUDA-graph capture."""
    frac = done / total
    filled = int(frac * 10)
    bar = "█" * filled + ("" if filled == 10 else " " * (10 - filled))
    if done == 0 or elapsed_seconds <= 0:
        timing = f"{format_clock(elapsed_seconds)}<?, ?it/s"
    else:
        rate = done / elapsed_seconds
        timing = (
            f"{format_clock(elapsed_seconds)}<{format_clock((total - done) / rate)}, {rate:.2f}it/s"
        )
    return f"\r{desc}: {100 * frac:3.0f}%|{bar}| {done}/{total} [{timing}]"
