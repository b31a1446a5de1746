"""Progress of a running ``bringup bench``, on stderr: a rich bar on a terminal, otherwise one
plain line every few seconds (and when a level ends), so a long run is never silent.

    with BenchProgress(stream, environ) as progress:
        run_bench(dataclasses.replace(config, progress=progress.update))
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TextIO

from rich.progress import BarColumn, MofNCompleteColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress

from bringup.core.bench_report import Progress
from bringup.render.console import make_console, wants_color

LINE_EVERY_SECONDS = 5.0


def progress_line(p: Progress) -> str:
    """``bench: concurrency 4 (level 2/3): 7/16 requests, 0 failed, 896 tokens, 12.3 s``."""
    return (
        f"bench: concurrency {p.concurrency} (level {p.level}/{p.levels}): {p.done}/{p.limit} "
        f"requests, {p.failed} failed, {p.output_tokens} tokens, {p.elapsed_seconds:.1f} s"
    )


class BenchProgress:
    """Receives ``Progress`` from the runner's threads and shows it."""

    def __init__(
        self,
        stream: TextIO,
        environ: Mapping[str, str],
        *,
        every_seconds: float = LINE_EVERY_SECONDS,
    ) -> None:
        self._stream = stream
        self._every = every_seconds
        self._lock = threading.Lock()
        self._latest: Progress | None = None
        self._printed: Progress | None = None
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._rich: RichProgress | None = None
        self._tasks: dict[int, TaskID] = {}
        if wants_color(stream, environ):
            self._rich = RichProgress(
                TextColumn("[bold]bench[/] concurrency {task.fields[concurrency]}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[tokens]} tokens, {task.fields[failed]} failed"),
                TimeElapsedColumn(),
                console=make_console(stream, environ),
                transient=True,
            )

    def __enter__(self) -> BenchProgress:
        if self._rich is not None:
            self._rich.start()
        else:
            self._ticker = threading.Thread(target=self._tick, daemon=True, name="bench-progress")
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=1.0)
        if self._rich is not None:
            self._rich.stop()

    def update(self, p: Progress) -> None:
        """Called by the runner whenever a level starts or a request finishes."""
        with self._lock:
            self._latest = p
            if self._rich is not None:
                task = self._tasks.get(p.level)
                if task is None:
                    task = self._rich.add_task(
                        "", total=p.limit, concurrency=p.concurrency, tokens=0, failed=0
                    )
                    self._tasks[p.level] = task
                self._rich.update(
                    task,
                    completed=p.done,
                    tokens=p.output_tokens,
                    failed=p.failed,
                )
            elif p.done >= p.limit:
                self._print(p)  # a level ended: say so now

    def _tick(self) -> None:
        while not self._stop.wait(self._every):
            with self._lock:
                if self._latest is not None and self._latest != self._printed:
                    self._print(self._latest)

    def _print(self, p: Progress) -> None:
        self._printed = p
        self._stream.write(progress_line(p) + "\n")
        self._stream.flush()
