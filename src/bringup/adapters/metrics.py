"""A followed startup as Prometheus metrics, with the official client (prometheus-client):
served over HTTP while bringup runs (``run --metrics-port``) and written atomically for
node_exporter's textfile collector (``--metrics-textfile``).

    bringup_startup_phase{unit,phase}     1 for the phase the startup is in, 0 for the others
    bringup_phase_seconds{phase}          how long each phase took (the current one: so far)
    bringup_time_to_ready_seconds         start to the answered smoke request
    bringup_ready                         1 once ready (0 again if the server died)
    bringup_failure{class}                1 for the failure class of the verdict
    bringup_attempts_total                attempts started (``--retry``)
    bringup_gpu_memory_used_bytes{gpu}    the last GPU sample
    bringup_measured{quantity} / bringup_predicted{quantity}
                                          what the log stated beside what ``plan`` predicted:
                                          weights_bytes, kv_cache_bytes, kv_cache_tokens,
                                          time_to_ready_seconds, phase_seconds:PHASE

Command line equivalent: ``curl -s 127.0.0.1:PORT/metrics``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    start_http_server,
    write_to_textfile,
)

from bringup.core.live import (
    ClusterEvent,
    Exited,
    FailureFound,
    GpuSample,
    NodeEvent,
    PhaseReached,
    Ready,
)
from bringup.core.vocab import Phase
from bringup.errors import InputError

GIB = 1024**3
# the facts of the log (core.packs) that a plan also predicts, in bytes or tokens
_MEASURED = {
    "weights_gib_per_gpu": ("weights_bytes", GIB),
    "available_kv_gib": ("kv_cache_bytes", GIB),
    "kv_cache_tokens": ("kv_cache_tokens", 1),
}


class StartupMetrics:
    """The metrics of one bringup process (every attempt of it)."""

    def __init__(self, unit: str = "", textfile: str | None = None) -> None:
        self.unit = unit
        self.textfile = textfile
        self.registry = CollectorRegistry()
        r = self.registry
        self.phase = Gauge(
            "bringup_startup_phase",
            "1 for the startup's current phase",
            ["unit", "phase"],
            registry=r,
        )
        self.phase_seconds = Gauge(
            "bringup_phase_seconds",
            "seconds each phase took (the current one: so far)",
            ["phase"],
            registry=r,
        )
        self.ttr = Gauge(
            "bringup_time_to_ready_seconds",
            "seconds from start to the answered smoke request",
            registry=r,
        )
        self.ready = Gauge("bringup_ready", "1 while the server is ready", registry=r)
        self.failure = Gauge(
            "bringup_failure", "1 for the failure class of the verdict", ["class"], registry=r
        )
        self.attempts = Counter("bringup_attempts", "startup attempts begun", registry=r)
        self.gpu = Gauge(
            "bringup_gpu_memory_used_bytes",
            "GPU memory used at the last sample",
            ["gpu"],
            registry=r,
        )
        self.measured = Gauge(
            "bringup_measured", "what the server's log stated", ["quantity"], registry=r
        )
        self.predicted = Gauge(
            "bringup_predicted", "what bringup plan predicted", ["quantity"], registry=r
        )
        self._since: tuple[str, float] | None = None
        self._server: Any = None
        self.write_error: str | None = None
        self._set_phase(None)
        self._write(strict=True)  # a textfile that cannot be written is said before the start

    # -- what happens -----------------------------------------------------------------------

    def attempt(self) -> None:
        """A new attempt begins: back to no phase, not ready, no failure."""
        self.attempts.inc()
        self.ready.set(0)
        self.failure.clear()
        self.phase_seconds.clear()
        self._since = None
        self._set_phase(None)
        self._write()

    def event(self, event: ClusterEvent) -> None:
        """One event of the followed startup."""
        if isinstance(event, NodeEvent):
            if event.rank != 0:
                return  # the cluster's phase is node 0's (the server that answers)
            event = event.inner
        if isinstance(event, PhaseReached):
            self._close_phase(event.t)
            self._since = (event.phase.value, event.t)
            self._set_phase(event.phase.value)
        elif isinstance(event, Ready):
            self._close_phase(event.t)
            self.ready.set(1)
            self.ttr.set(event.time_to_ready_seconds)
            self.measured.labels("time_to_ready_seconds").set(event.time_to_ready_seconds)
        elif isinstance(event, FailureFound):
            self._close_phase(event.t)
            self.ready.set(0)
            self.failure.labels(event.failure.failure_class.value).set(1)
        elif isinstance(event, Exited):
            self.ready.set(0)
        elif isinstance(event, GpuSample):
            for g in event.gpus:
                self.gpu.labels(str(g.index)).set(g.used_bytes)
            return  # not worth a textfile write each second
        self._write()

    def facts(self, facts: Mapping[str, float | int | str]) -> None:
        """What the log stated, beside the prediction."""
        for key, (quantity, scale) in _MEASURED.items():
            value = facts.get(key)
            if isinstance(value, int | float):
                self.measured.labels(quantity).set(value * scale)
        self._write()

    def plan(self, predicted: Mapping[str, float]) -> None:
        """What ``plan`` predicted (quantity -> value; the names of ``bringup_measured``)."""
        for quantity, value in predicted.items():
            self.predicted.labels(quantity).set(value)
        self._write()

    # -- where they go ----------------------------------------------------------------------

    def serve(self, port: int, address: str = "127.0.0.1") -> None:
        """Serve ``/metrics`` on ``address:port`` from a thread, until ``close``."""
        try:
            self._server, _thread = start_http_server(port, addr=address, registry=self.registry)
        except OSError as exc:
            raise InputError(
                f"cannot serve metrics on {address}:{port}: {exc.strerror or exc}",
                hint="give a free port to --metrics-port",
            ) from exc

    def close(self) -> None:
        """Stop serving, the textfile written a last time."""
        self._write()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def text(self) -> str:
        """The exposition text, as a scrape gets it."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry).decode()

    def _write(self, *, strict: bool = False) -> None:
        """The textfile, replaced whole; after the start a failed write is kept, never raised
        (the server's supervision goes on)."""
        if self.textfile is None:
            return
        try:
            write_to_textfile(self.textfile, self.registry)  # a temporary file, then renamed
        except OSError as exc:
            self.write_error = f"cannot write the metrics to {self.textfile}: {exc.strerror or exc}"
            if not strict:
                return
            raise InputError(
                self.write_error,
                hint="give --metrics-textfile a file in a writable folder (node_exporter's --collector.textfile.directory)",
            ) from exc

    def _set_phase(self, current: str | None) -> None:
        for phase in Phase:
            self.phase.labels(self.unit, phase.value).set(1 if phase.value == current else 0)

    def _close_phase(self, now: float) -> None:
        if self._since is not None:
            name, since = self._since
            self.phase_seconds.labels(name).set(max(0.0, now - since))
            self.measured.labels(f"phase_seconds:{name}").set(max(0.0, now - since))
