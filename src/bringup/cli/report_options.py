"""The report flags of ``run``, ``up`` and ``watch`` (``--markdown``, ``--redact-hosts``,
``--timeline``, ``--metrics-port``, ``--metrics-textfile``) and the observer that keeps what
a followed startup showed, to write its report, timeline and metrics."""

from __future__ import annotations

import argparse
from typing import Any

from bringup.cli.main import Context
from bringup.cli.report_flags import add_markdown, markdown_target
from bringup.core.live import LiveEvent, StartupResult
from bringup.core.report.recording import Recording
from bringup.core.startup import StartupSnapshot
from bringup.follow.types import Observer


def add_live(parser: argparse.ArgumentParser) -> None:
    """The flags of a followed startup's report, picture and metrics."""
    add_markdown(parser)
    parser.add_argument(
        "--timeline",
        metavar="FILE.svg",
        help="draw the startup (phases on a time axis, the weight-loading rate, GPU memory per "
        "device, the failure at its line) as an SVG picture",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics on 127.0.0.1:PORT (or BRINGUP_METRICS_ADDRESS) while "
        "bringup runs (with --notify, for the service's life)",
    )
    parser.add_argument(
        "--metrics-textfile",
        metavar="FILE",
        help="write the metrics to FILE (atomically, for node_exporter's textfile collector) "
        "at every phase and at the end",
    )


class Reporting:
    """What a followed startup leaves besides its verdict: the report, the picture, the
    metrics. ``wrap`` the observer of each attempt; each attempt's close writes them."""

    def __init__(self, args: argparse.Namespace, ctx: Context, title: str) -> None:
        self.args = args
        self.ctx = ctx
        self.title = title
        self.stdout = ctx.stdout  # where --markdown without a file goes
        self.attempts = 0
        self.argv: tuple[str, ...] = ()
        self._plan: tuple[Any, Any] | None = None
        self._versions: tuple[tuple[str, str], ...] | None = None
        self.metrics: Any = None
        if getattr(args, "metrics_port", None) is not None or getattr(
            args, "metrics_textfile", None
        ):
            from bringup.adapters.metrics import StartupMetrics

            self.metrics = StartupMetrics(
                unit=title.split()[-1] if title.startswith("bringup up") else "",
                textfile=args.metrics_textfile,
            )
            if args.metrics_port is not None:
                self.metrics.serve(
                    args.metrics_port, ctx.environ.get("BRINGUP_METRICS_ADDRESS", "127.0.0.1")
                )

    @property
    def wanted(self) -> bool:
        a = self.args
        return bool(markdown_target(a) or getattr(a, "timeline", None) or self.metrics)

    def wrap(self, observer: Observer, argv: tuple[str, ...] = ()) -> Observer:
        """``observer``, also feeding this attempt's recording."""
        if not self.wanted:
            return observer
        self.attempts += 1
        self.argv = argv or self.argv
        if self.metrics is not None:
            self.metrics.attempt()
            _section, plan = self.plan_of(self.argv)
            if plan is not None:
                from bringup.cli.report_write import predicted

                self.metrics.plan(predicted(plan))
        return _Recorder(observer, self)

    def wrap_nodes(self, observer: Any) -> Any:
        """A ``run --nodes`` observer, also feeding the timeline (a lane per node) and the
        metrics (node 0's)."""
        if not self.wanted:
            return observer
        self.attempts += 1
        if self.metrics is not None:
            self.metrics.attempt()
        return _NodesRecorder(observer, self)

    def plan_of(self, argv: tuple[str, ...]) -> tuple[Any, Any]:
        """The plan of the server command (made once), as a report section and a ``Plan``."""
        if self._plan is None:
            from bringup.cli.report_write import is_cpu_build, plan_for

            cpu = is_cpu_build(self.versions_of(argv))
            self._plan = plan_for(argv, self.ctx.environ, device="cpu" if cpu else None)
        return self._plan

    def versions_of(self, argv: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
        """bringup's, Python's and the server command's environment's versions (read once)."""
        if self._versions is None:
            from bringup.adapters import report_env

            self._versions = report_env.versions(argv, self.ctx.environ)
        return self._versions

    def close(self) -> None:
        """Stop serving metrics (the end of bringup's run)."""
        if self.metrics is not None:
            self.metrics.close()

    def finished(self, result: StartupResult, recording: Recording) -> None:
        """One attempt ended: write what was asked for."""
        from bringup.cli import report_write

        title = self.title + (f" (attempt {self.attempts})" if self.attempts > 1 else "")
        report_write.finished(
            self.args,
            self.ctx,
            result,
            recording,
            title=title,
            argv=tuple(result.argv) or self.argv,
            metrics=self.metrics,
            plan=lambda argv: self.plan_of(argv)[0],
            versions=self.versions_of,
            stdout=self.stdout,
        )


class _Recorder:
    """Passes everything on to the real observer and keeps it in a ``Recording``."""

    def __init__(self, inner: Observer, reporting: Reporting) -> None:
        self.inner = inner
        self.reporting = reporting
        self.recording = Recording()

    def event(self, event: LiveEvent) -> None:
        self.recording.event(event)
        if self.reporting.metrics is not None:
            self.reporting.metrics.event(event)
        self.inner.event(event)

    def line(self, stream: str, text: str) -> None:
        self.recording.line(text)
        self.inner.line(stream, text)

    def note(self, text: str) -> None:
        self.inner.note(text)

    def refresh(self, snapshot: StartupSnapshot) -> None:
        self.inner.refresh(snapshot)

    def close(self, result: StartupResult, snapshot: StartupSnapshot) -> None:
        self.inner.close(result, snapshot)
        self.reporting.finished(result, self.recording)


class _NodesRecorder:
    """A ``run --nodes`` observer that also keeps each node's events, one lane per rank."""

    def __init__(self, inner: Any, reporting: Reporting) -> None:
        self.inner = inner
        self.reporting = reporting
        self.recording = Recording()

    def event(self, event: Any) -> None:
        self.recording.event(event)
        if self.reporting.metrics is not None:
            self.reporting.metrics.event(event)
        self.inner.event(event)

    def line(self, rank: int, text: str) -> None:
        self.inner.line(rank, text)

    def note(self, text: str) -> None:
        self.inner.note(text)

    def close(self, result: Any) -> None:
        self.inner.close(result)
        r = self.reporting
        if r.metrics is not None:
            r.metrics.facts(result.facts)
        if getattr(r.args, "timeline", None):
            from bringup.adapters.commands import write_local
            from bringup.core.report.timeline import draw

            lanes = sorted(self.recording.lanes.values(), key=lambda lane: _rank_of(lane.name))
            svg = draw(lanes, f"{r.title}: {result.state.value}")
            write_local(r.args.timeline, svg, hint="give --timeline a path in a writable folder")


def _rank_of(name: str) -> int:
    """``rank 3 (host)`` -> 3 (lanes in rank order)."""
    words = name.split()
    return int(words[1]) if len(words) > 1 and words[1].isdigit() else -1
