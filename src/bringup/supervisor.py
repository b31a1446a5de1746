"""The one supervisor loop behind ``bringup run`` and ``bringup watch`` (and, as a library,
``bringup up``, ``--retry``, ``--bench`` and ``bringup demo``)::

    result = run_startup(StartupConfig(argv=("vllm", "serve", "m")), on_event=print)
    result.outcome, result.failure, result.argv, result.exit_code

Reader threads (the source), a prober thread and a GPU sampler thread put items on one
queue; this loop feeds lines to the analyzer, asks ``core.startup.StartupMachine`` what
they mean, reports ``LiveEvent`` values to the observer and ``on_event``, and acts: probes,
sd_notify messages, and stopping the server (SIGTERM, then SIGKILL after the grace).
"""

from __future__ import annotations

import contextlib
import queue
import signal
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from bringup.adapters import gpus as gpu_adapter
from bringup.adapters.clock import Clock, SystemClock
from bringup.adapters.http_probe import HttpProber, api_key_from
from bringup.adapters.sd_notify import Notifier
from bringup.adapters.sources import ChildSource, ExitItem, LineItem, LinesItem, NoteItem, Source
from bringup.core import engine_args, packs
from bringup.core.analyzer import LogAnalyzer
from bringup.core.diagnosis import Diagnosis, EngineEvent, Event, Failure
from bringup.core.gpu import GpuReading, select_visible
from bringup.core.startup import (
    LiveEvent,
    ProbeKind,
    ProbeObservation,
    StartupMachine,
    StartupPolicy,
    State,
    summary_json,
)
from bringup.core.vocab import Engine, Outcome
from bringup.errors import BringupError
from bringup.render.live import status_text

EXIT_READY = 0
EXIT_FAILED = 1
EXIT_STALLED = 4


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
    gpus_from: str | None = None
    notify: bool = False  # speak sd_notify (run under systemd Type=notify)
    environ: Mapping[str, str] = field(default_factory=dict)
    detach_log: str | None = None  # where a kept server's output goes; None: a temp file
    gpu_interval_seconds: float = 1.0
    probe_interval_seconds: float = 0.25
    wrapper_grace_seconds: float = 2.0


@dataclass
class StartupResult:
    """How a followed startup ended."""

    outcome: Outcome  # ready | failed | stalled (incomplete when interrupted before a verdict)
    exit_code: (
        int  # bringup's: 0 ready, 1 failed, 4 stalled/deadline, 128+N interrupted by signal N
    )
    failure: Failure | None
    diagnosis: Diagnosis | None
    argv: tuple[str, ...]  # the server command as run
    time_to_ready_seconds: float | None
    summary: dict[str, Any]  # the JSON summary line
    url: str
    model: str | None = None
    server_exit_code: int | None = None
    left_running_pid: int | None = None  # --keep: the server still running
    detached_log: str | None = None  # --keep: where its output now goes
    interrupted: bool = False


class Observer(Protocol):
    """Renders a followed startup (``bringup.render.live``)."""

    def event(self, event: LiveEvent) -> None: ...
    def line(self, stream: str, text: str) -> None: ...
    def note(self, text: str) -> None: ...
    def refresh(self, machine: StartupMachine, now: float) -> None: ...
    def close(self, result: StartupResult, machine: StartupMachine) -> None: ...


class _NullObserver:
    def event(self, event: LiveEvent) -> None: ...
    def line(self, stream: str, text: str) -> None: ...
    def note(self, text: str) -> None: ...
    def refresh(self, machine: StartupMachine, now: float) -> None: ...
    def close(self, result: StartupResult, machine: StartupMachine) -> None: ...


class _GuardedObserver:
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

    def refresh(self, machine: StartupMachine, now: float) -> None:
        self._call("refresh", machine, now)

    def close(self, result: StartupResult, machine: StartupMachine) -> None:
        self._call("close", result, machine)


@dataclass(frozen=True, slots=True)
class _ProbeItem:
    obs: ProbeObservation


@dataclass(frozen=True, slots=True)
class _GpuItem:
    readings: list[GpuReading]


@dataclass(frozen=True, slots=True)
class _SignalItem:
    signum: int


def resolve_url(
    url: str | None, argv: list[str] | tuple[str, ...] | None, default_port: int
) -> str:
    """``--url``, else the command's --host/--port, else 127.0.0.1 and the engine's default port."""
    if url:
        return url.rstrip("/") if "://" in url else "http://" + url.rstrip("/")
    words = list(argv or [])
    host = engine_args.get_flag(words, "--host", "--hostname") or "127.0.0.1"
    port = engine_args.get_flag(words, "--port") or str(default_port)
    if host in ("0.0.0.0", "::", "[::]", "", "*"):
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def run_startup(
    config: StartupConfig,
    *,
    source: Source | None = None,
    observer: Observer | None = None,
    on_event: Callable[[LiveEvent], None] | None = None,
    clock: Clock | None = None,
    follow: bool = True,
) -> StartupResult:
    """Start (or, given a ``source``, attach to) a server and follow it to a verdict.

    ``follow``: keep supervising after ready until the server dies or a signal arrives
    (ignored with ``config.exit_when_ready``). Raises BringupError (exit 2) when the
    command cannot be started or the source cannot be followed; nothing is left running.
    """
    return _Supervisor(
        config, source, observer or _NullObserver(), on_event, clock or SystemClock(), follow
    ).run()


class _Supervisor:
    def __init__(
        self,
        config: StartupConfig,
        source: Source | None,
        observer: Observer,
        on_event: Callable[[LiveEvent], None] | None,
        clock: Clock,
        follow: bool,
    ) -> None:
        self.config = config
        self.owned = source is None
        self.source: Source = source or ChildSource(config.argv, config.environ)
        self.observer = _GuardedObserver(observer)
        self.on_event = on_event
        self.clock = clock
        self.follow = follow and not config.exit_when_ready
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.probe_requests: queue.SimpleQueue[tuple[ProbeKind, str, str | None] | None] = (
            queue.SimpleQueue()
        )
        self.stopped = threading.Event()
        self.notifier = Notifier(config.environ) if config.notify else None
        self.signum: int | None = None
        self.server_exit: int | None = None
        self.final_diagnosis: Diagnosis | None = None
        self._last_extend = -1e9
        self._last_watchdog = -1e9
        self._last_status = ""
        self._foreign_port = False

    # -- setup -----------------------------------------------------------------------------

    def _setup(self) -> None:
        command = list(self.config.argv) or self.source.command() or []
        parsed = engine_args.parse_server_command(command) if command else None
        self.engine = self.config.engine or (parsed.engine if parsed else None)
        self.analyzer = LogAnalyzer(self.engine)
        spec = self._http_spec()
        self.url = resolve_url(self.config.url, command, spec[1])
        self.health_path = spec[0]
        fallback = engine_args.get_flag(command, "--served-model-name") or (
            parsed.model if parsed else None
        )
        policy = StartupPolicy(
            stall_seconds=self.config.stall_seconds,
            deadline_seconds=self.config.deadline_seconds,
            wrapper_grace_seconds=self.config.wrapper_grace_seconds,
            probe_interval_seconds=self.config.probe_interval_seconds,
            fallback_model=fallback,
        )
        self.prober = HttpProber(
            self.url, api_key=api_key_from(self.config.api_key, self.config.environ)
        )
        self.machine = StartupMachine(policy, self.clock.monotonic())

    def _http_spec(self) -> tuple[str, int]:
        try:
            pack = packs.get(self.engine) if self.engine is not None else None
        except KeyError:
            pack = None  # no knowledge pack for this engine yet: the common defaults
        if pack is None:
            return "/health", 8000
        words = " ".join(self.config.argv)
        http = next(
            (spec for marker, spec in pack.http_variants.items() if marker in words), pack.http
        )
        return http.health_path, http.default_port

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> StartupResult:
        if not self.owned:
            self.source.start(self.queue.put)  # first: its command line names host and port
        self._setup()
        if self.owned:
            self._foreign_port = _port_busy(self.url)
            self.source.start(self.queue.put)  # BringupError here: nothing was started
        threads = [
            threading.Thread(target=self._probe_loop, daemon=True, name="prober"),
            threading.Thread(target=self._gpu_loop, daemon=True, name="gpu-sampler"),
        ]
        for t in threads:
            t.start()
        restore = self._install_signals()
        crashed = True
        try:
            self._loop()
            crashed = False
        except KeyboardInterrupt:
            self.signum = signal.SIGINT
            crashed = False
        finally:
            restore()
            self.stopped.set()
            self.probe_requests.put(None)
            if crashed and self.owned:
                self.source.stop(
                    self.config.grace_seconds
                )  # never leave a server nobody supervises
        return self._finish()

    def _loop(self) -> None:
        while True:
            try:
                item = self.queue.get(timeout=0.1)
            except queue.Empty:
                item = None
            now = self.clock.monotonic()
            handled = 0
            while item is not None and handled < 1000:  # a burst, decided on once
                self._handle(item, now)
                handled += 1
                try:
                    item = self.queue.get_nowait()
                except queue.Empty:
                    item = None
            if item is not None:
                self._handle(item, now)
            self._report(self.machine.tick(now))
            self._send_probe(now)
            self._keep_systemd_informed(now)
            self.observer.refresh(self.machine, now)
            if self.signum is not None or self.machine.is_terminal:
                return
            if self.machine.state is State.READY and not self.follow:
                return

    def _handle(self, item: Any, now: float) -> None:
        m = self.machine
        if isinstance(item, LinesItem):
            for text in item.texts:
                self._line(item.stream, text, now)
        elif isinstance(item, LineItem):
            self._line(item.stream, item.text, now)
        elif isinstance(item, _ProbeItem):
            self._report(m.on_probe(self._owned_port(item.obs), now))
        elif isinstance(item, _GpuItem):
            self._report(m.on_gpu(item.readings, now))
        elif isinstance(item, ExitItem):
            self.server_exit = item.code
            self.final_diagnosis = self.analyzer.finish(item.code)
            if item.reason:
                self.observer.note(item.reason)
            self._report(m.on_exit(item.code, self.final_diagnosis.failure, now))
        elif isinstance(item, NoteItem):
            self.observer.note(item.text)
        elif isinstance(item, _SignalItem):
            self.signum = item.signum

    def _line(self, stream: str, text: str, now: float) -> None:
        self.observer.line(stream, text)
        events = self.analyzer.feed(text)
        self.machine.on_line(text, now)
        for event in events:
            self._engine_seen(event)
            self._report(self.machine.on_event(event, now))

    def _engine_seen(self, event: Event) -> None:
        if isinstance(event, EngineEvent) and self.engine is None:
            with contextlib.suppress(ValueError, KeyError, LookupError):
                self.engine = Engine(event.engine)
                self.health_path, port = self._http_spec()
                if not self.config.url and not self.config.argv and self.source.command() is None:
                    self.prober = HttpProber(
                        resolve_url(None, None, port),
                        api_key=api_key_from(self.config.api_key, self.config.environ),
                    )
                    self.url = self.prober.base_url

    def _report(self, events: list[LiveEvent]) -> None:
        for event in events:
            self.observer.event(event)
            if self.on_event is not None:
                self.on_event(event)
            self._notify_event(event)

    # -- probes and GPUs (threads) ---------------------------------------------------------

    def _send_probe(self, now: float) -> None:
        kind = self.machine.next_probe(now)
        if kind is not None:
            self.machine.probe_sent(kind)
            self.probe_requests.put((kind, self.health_path, self.machine.probe_model()))

    def _probe_loop(self) -> None:
        while (request := self.probe_requests.get()) is not None:
            kind, path, model = request
            try:
                obs = self.prober.probe(kind, health_path=path, model=model)
            except Exception as exc:  # a probe must never kill the supervisor
                obs = ProbeObservation(
                    kind, self.url, ok=False, error=f"{type(exc).__name__}: {exc}"
                )
            self.queue.put(_ProbeItem(obs))
        self.prober.close()

    def _owned_port(self, obs: ProbeObservation) -> ProbeObservation:
        """When another process held the port before the start, its answers are not ours."""
        if not (self._foreign_port and obs.ok and isinstance(self.source, ChildSource)):
            return obs
        child = self.source.child
        port = int(self.url.rsplit(":", 1)[1].split("/")[0])
        if child is not None and child.listens_on(port):
            self._foreign_port = False
            return obs
        why = f"port {port} answers, but not from the server bringup started (another process holds it)"
        return ProbeObservation(
            obs.kind,
            obs.url,
            ok=False,
            status=obs.status,
            error=why,
            latency_seconds=obs.latency_seconds,
        )

    def _gpu_loop(self) -> None:
        """Sample GPU memory every interval. NVML missing: off (said once). A readings file
        that does not exist yet (the twin writes it) or is being rewritten: try again."""
        source = gpu_adapter.open_source(self.config.gpus_from)
        visible = self.config.environ.get("CUDA_VISIBLE_DEVICES")
        said = False
        while True:
            try:
                self.queue.put(_GpuItem(select_visible(source.read(), visible)))
            except BringupError as exc:
                if not self.config.gpus_from:
                    self.queue.put(NoteItem(f"GPU sampling off: {exc}"))
                    return
                if not said:
                    said = True
                    self.queue.put(
                        NoteItem(
                            f"GPU readings not available yet ({exc}); trying every {self.config.gpu_interval_seconds:g}s"
                        )
                    )
            if self.stopped.wait(self.config.gpu_interval_seconds):
                return

    # -- systemd ---------------------------------------------------------------------------

    def _notify_event(self, event: LiveEvent) -> None:
        n = self.notifier
        if n is None:
            return
        if event.event == "ready":
            n.ready(
                f"ready in {event.fields['time_to_ready_seconds']:.1f}s: the model answered at {self.url}"
            )
        elif event.event == "failure":
            n.status(f"failed: {event.fields['class']} during {event.fields['phase']}")
        elif event.event in ("phase", "progress", "gpu") and self.machine.state is State.STARTING:
            text = status_text(self.machine)
            if text != self._last_status:
                self._last_status = text
                n.status(text)
            now = self.clock.monotonic()
            if now - self._last_extend >= 5.0:
                self._last_extend = now
                n.extend_timeout((self.config.stall_seconds or 600.0) + 30.0)

    def _keep_systemd_informed(self, now: float) -> None:
        n = self.notifier
        if n is None or self.machine.state is not State.READY:
            return
        interval = n.watchdog_interval_seconds()
        if interval and now - self._last_watchdog >= interval:
            self._last_watchdog = now
            n.watchdog()

    def _install_signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {
            s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        }  # SIGHUP: a closed ssh -tt

        def handler(signum: int, _frame: object) -> None:
            self.queue.put(_SignalItem(signum))

        for s in previous:
            signal.signal(s, handler)

        def restore() -> None:
            for s, h in previous.items():
                signal.signal(s, h)

        return restore

    # -- the end ---------------------------------------------------------------------------

    def _finish(self) -> StartupResult:
        m = self.machine
        now = self.clock.monotonic()
        if self.signum is not None and m.state is State.READY:
            m.stop(now)
        left_pid, log = self._settle_server(m)
        summary = summary_json(m, now)
        result = StartupResult(
            outcome=m.outcome,
            exit_code=self._exit_code(m),
            failure=m.failure,
            diagnosis=self.final_diagnosis or self.analyzer.diagnosis(),
            argv=tuple(self.config.argv),
            time_to_ready_seconds=m.time_to_ready_seconds,
            summary=summary,
            url=self.url,
            model=m.model or m.probe_model(),
            server_exit_code=self.server_exit,
            left_running_pid=left_pid,
            detached_log=log,
            interrupted=self.signum is not None,
        )
        self.observer.close(result, m)
        return result

    def _settle_server(self, m: StartupMachine) -> tuple[int | None, str | None]:
        """Stop the server, or leave it running (--keep), or just stop following (watch)."""
        if not isinstance(self.source, ChildSource) or self.source.child is None:
            self.source.stop(0.0)
            return None, None
        child = self.source.child
        keep = (
            self.config.keep and self.signum is None and (m.is_terminal or m.state is State.READY)
        )
        if keep and child.poll() is None:
            log = self.config.detach_log or f"/tmp/bringup-server-{child.pid}.log"
            self.source.detach(log)
            self.observer.note(
                f"--keep: server left running (pid {child.pid}); its output goes to {log}"
            )
            return child.pid, log
        if child.poll() is None or child.members():
            if self.notifier is not None:
                self.notifier.stopping()
            self.observer.note(
                f"stopping the server (pid {child.pid}): SIGTERM to its process group, SIGKILL after {self.config.grace_seconds:g}s"
            )
            code = child.terminate(self.config.grace_seconds)
            if self.server_exit is None:
                self.server_exit = code
        return None, None

    def _exit_code(self, m: StartupMachine) -> int:
        if m.state is State.FAILED:
            return EXIT_FAILED
        if m.state is State.STALLED:
            return EXIT_STALLED
        if m.state in (State.READY, State.STOPPED):
            return EXIT_READY
        return 128 + (self.signum or signal.SIGINT)


def _port_busy(url: str) -> bool:
    """Whether something already accepts connections at the URL's host and port."""
    try:
        hostport = url.split("://", 1)[1].split("/", 1)[0]
        host, _, port = hostport.rpartition(":")
        with socket.create_connection((host.strip("[]"), int(port)), timeout=0.5):
            return True
    except (OSError, ValueError):
        return False
