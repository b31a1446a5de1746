"""What the follower is given and what it gives back: its configuration, its result, and the
small interfaces of every dependency (source, prober, GPUs, clock, sd_notify, observer)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bringup.core.live import LiveEvent, StartupResult
from bringup.core.probes import ProbeKind, ProbeObservation
from bringup.core.startup import StartupSnapshot
from bringup.core.startup_time import StartupPrediction
from bringup.core.vocab import Engine
from bringup.errors import UsageError

Predictor = Callable[[Sequence[str], Mapping[str, str]], "tuple[StartupPrediction, int] | None"]


@dataclass(frozen=True)
class StartupConfig:
    """What to follow and how. ``argv`` is the server command (run); empty for watch."""

    argv: tuple[str, ...] = ()
    engine: Engine | None = None  # None: from the command, else from the log
    url: str | None = None  # None: the command's --host/--port, else the engine's default
    stall_seconds: float | None = 300.0
    deadline_seconds: float | None = 7200.0
    grace_seconds: float = 10.0  # SIGTERM → SIGKILL
    keep: bool = False  # leave the server running on failure (and with exit_when_ready)
    exit_when_ready: bool = False  # return at ready instead of supervising
    api_key: str | None = None
    model: str | None = (
        None  # the model the smoke request names; None: /v1/models, else the command's
    )
    gpus_from: str | None = None
    notify: bool = False  # speak sd_notify (run under systemd Type=notify)
    environ: Mapping[str, str] = field(default_factory=dict)
    detach_log: str | None = None  # where a kept server's output goes; None: a temp file
    gpu_interval_seconds: float = 1.0
    probe_interval_seconds: float = 0.25
    wrapper_grace_seconds: float = 2.0
    # After a failure verdict, how long the server may take to finish dying by itself (and
    # report its own exit status) before bringup sends SIGTERM; None: grace_seconds.
    exit_wait_seconds: float | None = None
    # the startup prediction for a server command and environment: (prediction, the shards'
    # bytes), or None (``follow.startup_time.live_prediction``); None here: no prediction
    predictor: Predictor | None = None


class Prober(Protocol):
    """The HTTP probes of one server (``adapters.http_probe.HttpProber``)."""

    base_url: str

    def probe(
        self, kind: ProbeKind, *, health_path: str = "/health", model: str | None = None
    ) -> ProbeObservation: ...

    def close(self) -> None: ...


ProberFactory = Callable[[str], Prober]  # base URL → prober


class Notify(Protocol):
    """sd_notify messages (``adapters.sd_notify.Notifier``)."""

    def ready(self, status: str | None = None) -> bool: ...
    def status(self, text: str) -> bool: ...
    def extend_timeout(self, seconds: float) -> bool: ...
    def watchdog(self) -> bool: ...
    def stopping(self) -> bool: ...
    def watchdog_interval_seconds(self) -> float | None: ...


class Observer(Protocol):
    """Renders a followed startup (``bringup.render.live``)."""

    def event(self, event: LiveEvent) -> None: ...
    def line(self, stream: str, text: str) -> None: ...
    def note(self, text: str) -> None: ...
    def refresh(self, snapshot: StartupSnapshot) -> None: ...
    def close(self, result: StartupResult, snapshot: StartupSnapshot) -> None: ...


class NullObserver:
    """Renders nothing."""

    def event(self, event: LiveEvent) -> None: ...
    def line(self, stream: str, text: str) -> None: ...
    def note(self, text: str) -> None: ...
    def refresh(self, snapshot: StartupSnapshot) -> None: ...
    def close(self, result: StartupResult, snapshot: StartupSnapshot) -> None: ...


class GuardedObserver:
    """Output is best effort: a closed pipe (``bringup run | head``) or a gone terminal must
    never stop the supervision of the server, nor leave the server running unsupervised."""

    def __init__(self, inner: Observer) -> None:
        self.inner = inner
        self.broken = False

    def _call(self, name: str, *args: Any) -> None:
        if self.broken:
            return
        try:
            getattr(self.inner, name)(*args)
        except OSError:  # BrokenPipeError, EIO on a closed terminal
            self.broken = True

    def event(self, event: LiveEvent) -> None:
        self._call("event", event)

    def line(self, stream: str, text: str) -> None:
        self._call("line", stream, text)

    def note(self, text: str) -> None:
        self._call("note", text)

    def refresh(self, snapshot: StartupSnapshot) -> None:
        self._call("refresh", snapshot)

    def close(self, result: StartupResult, snapshot: StartupSnapshot) -> None:
        self._call("close", result, snapshot)


def model_needed(engine: object, where: str) -> UsageError:
    """The one line for a server that loads its model at the first request (Ollama) when
    neither the command line nor ``where`` (the unit) names one: the smoke request needs it."""
    return UsageError(
        f"the smoke request needs --model: {engine} loads its model at the first request "
        f"that names it, and neither the command line nor {where} names one",
        hint="give the model to load and ask with --model NAME; `ollama list` shows them",
    )
