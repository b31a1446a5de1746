"""The one follower loop behind ``bringup run`` and ``bringup watch`` (and, as a library,
``bringup up``, ``--retry``, ``--bench`` and ``bringup demo``)::

    result = run_startup(config, source=..., prober=..., gpus=..., clock=..., notify=None)
    result.outcome, result.failure, result.argv, result.exit_code

Every dependency is passed in (``bringup.follow.wiring`` builds the real ones). The source,
the probe lane and the GPU lane put items in one inbox; this loop feeds lines to the
analyzer, asks ``core.startup.StartupMachine`` what they mean, reports ``LiveEvent`` values to
the observer and ``on_event``, and acts: probes, GPU samples, sd_notify messages, and stopping
the server (SIGTERM, then SIGKILL after the grace). It decides every *when* from the clock.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bringup.adapters.clock import Clock
from bringup.adapters.gpus import GpuSource
from bringup.adapters.http_probe import port_busy
from bringup.adapters.sources.child import ChildSource
from bringup.adapters.sources.items import ExitItem, LineItem, LinesItem, NoteItem, Source
from bringup.core import engine_args, packs
from bringup.core.analyzer import LogAnalyzer
from bringup.core.diagnosis import Diagnosis, EngineEvent, Event
from bringup.core.endpoint import resolve_url, variable_value
from bringup.core.live import (
    FailureFound,
    GpuSample,
    LiveEvent,
    PhaseReached,
    Progress,
    Ready,
    StartupResult,
)
from bringup.core.phase_words import status_text
from bringup.core.probes import ProbeObservation
from bringup.core.server_exit import ServerExit
from bringup.core.startup import StartupMachine, StartupPolicy, summary_json
from bringup.core.startup_time.live import summary_line as startup_note
from bringup.core.verdict import State
from bringup.core.vocab import Engine
from bringup.core.words import count
from bringup.errors import BringupError
from bringup.follow.samplers import (
    GpuItem,
    GpuUnavailable,
    Inbox,
    InlineLane,
    Lane,
    ProbeItem,
    ThreadLane,
    probe_once,
    read_gpus,
)
from bringup.follow.service_notes import ServiceNotes
from bringup.follow.types import (
    GuardedObserver,
    Notify,
    NullObserver,
    Observer,
    Prober,
    ProberFactory,
    StartupConfig,
    model_needed,
)

TICK_SECONDS = 0.1  # the longest the loop waits for an item before it looks at the clock


@dataclass(frozen=True, slots=True)
class _SignalItem:
    signum: int


def run_startup(
    config: StartupConfig,
    *,
    source: Source,
    prober: ProberFactory,
    gpus: GpuSource,
    clock: Clock,
    notify: Notify | None,
    observer: Observer | None = None,
    on_event: Callable[[LiveEvent], None] | None = None,
    follow: bool = True,
    threads: bool = True,
    stop: threading.Event | None = None,
) -> StartupResult:
    """Follow ``source`` (a server it starts, or one already running) to a verdict.

    ``prober`` makes the HTTP prober for a base URL (the URL is known only once the source's
    command line is); ``gpus`` is read every ``config.gpu_interval_seconds``; ``notify``
    speaks sd_notify (None: silent). ``follow``: keep supervising after ready until the
    server dies or a signal arrives (ignored with ``config.exit_when_ready``); ``stop`` set by
    another thread asks the same as a SIGTERM (``run --bench`` after its benchmark). ``threads``
    False runs the probes and GPU reads on this thread (in-process tests with a fake clock).
    Raises BringupError (exit 2) when the command cannot be started or the source cannot be
    followed; nothing is left running.
    """
    return _Follower(
        config,
        source,
        prober,
        gpus,
        clock,
        notify,
        observer or NullObserver(),
        on_event,
        follow,
        threads,
        stop,
    ).run()


class _Follower:
    def __init__(
        self,
        config: StartupConfig,
        source: Source,
        make_prober: ProberFactory,
        gpus: GpuSource,
        clock: Clock,
        notify: Notify | None,
        observer: Observer,
        on_event: Callable[[LiveEvent], None] | None,
        follow: bool,
        threads: bool,
        stop: threading.Event | None,
    ) -> None:
        self.config = config
        self.owned = source.starts_server
        self.source = source
        self.make_prober = make_prober
        self.gpus = gpus
        self.observer = GuardedObserver(observer)
        self.on_event = on_event
        self.clock = clock
        self.follow = follow and not config.exit_when_ready
        self.threads = threads
        self.stop_requested = stop
        self.inbox = Inbox(clock)
        self.notes = ServiceNotes(notify)
        self.signum: int | None = None
        self.server_exit: int | None = None
        self.final_diagnosis: Diagnosis | None = None
        self._foreign_port = False
        self._gpu_next_at = -1e9
        self._gpu_in_flight = False
        self._gpu_off = False
        self._gpu_said = False

    # -- setup -----------------------------------------------------------------------------

    def _setup(self) -> None:
        command = list(self.config.argv) or self.source.command() or []
        parsed = engine_args.parse_server_command(command) if command else None
        self.engine: Engine | None = None
        self.health_path, default_port = "/health", 8000  # the common defaults
        self.prober: Prober | None = None
        self.host_value: str | None = None  # the engine's host variable, if it has one
        named = getattr(self.source, "model", None)  # a unit can name the model it loads
        fallback = (
            self.config.model
            or engine_args.get_flag(command, "--served-model-name")
            or (parsed.model if parsed else None)
            or (named() if callable(named) else None)
        )
        self.machine = StartupMachine(
            StartupPolicy(
                stall_seconds=self.config.stall_seconds,
                deadline_seconds=self.config.deadline_seconds,
                wrapper_grace_seconds=self.config.wrapper_grace_seconds,
                probe_interval_seconds=self.config.probe_interval_seconds,
                fallback_model=fallback,
                **self._prediction(command),
            ),
            self.clock.monotonic(),
        )
        engine = self.config.engine or (parsed.engine if parsed else None)
        if engine is not None:
            default_port = self._decide_engine(engine)
            self._need_model()
        self.analyzer = LogAnalyzer(self.engine)  # it names the engine when nothing else did
        if self.config.url or command or self.engine is not None:
            self._build_prober(resolve_url(self.config.url, command, default_port, self.host_value))
        else:
            self.url = ""
            self.observer.note(
                "no command and no --url: probes start once the log names the engine "
                "(its default port), or give --url or --engine"
            )

    def _prediction(self, command: list[str]) -> dict[str, Any]:
        """The startup prediction's policy fields (and a note saying it), when there is one."""
        predictor = self.config.predictor
        found = predictor(command, self.config.environ) if predictor and command else None
        if found is None:
            return {}
        prediction, checkpoint_bytes = found
        self.observer.note(startup_note(prediction))
        return {"prediction": prediction, "checkpoint_bytes": checkpoint_bytes}

    def _decide_engine(self, engine: Engine) -> int:
        """The engine is decided, once: from --engine or the command, else the first log line
        that names it. Its pack gives the health path; returns its default port."""
        self.engine = engine
        try:
            pack = packs.get(engine)
        except KeyError:
            return 8000  # no knowledge pack for this engine yet: the common defaults
        words = " ".join(self.config.argv)
        http = next(
            (spec for marker, spec in pack.http_variants.items() if marker in words), pack.http
        )
        self.health_path = http.health_path
        # a model loaded at the first request (Ollama): the smoke request names it and loads it
        self.machine.policy = dataclasses.replace(
            self.machine.policy,
            model_on_request=http.model_on_request,
            missing_model=http.missing_model,
        )
        if http.host_variable:  # where the server listens, as it reads it (OLLAMA_HOST)
            command = list(self.config.argv) or self.source.command() or []
            own = getattr(self.source, "environment", None)  # a unit's Environment=
            environ = own() if callable(own) else self.config.environ
            self.host_value = variable_value(http.host_variable, command, environ)
        return http.default_port

    def _need_model(self) -> None:
        """A server that loads its model at the first request answers the smoke request only
        when it names one: with none from --model, the command or the source, say so now."""
        if not self.machine.policy.model_on_request or self.machine.probe_model():
            return
        raise model_needed(self.engine, self.source.description)

    def _build_prober(self, url: str) -> None:
        """The probes' target is decided, once: the prober for ``url``."""
        self.url = url
        self.prober = self.make_prober(url)
        self.machine.policy = dataclasses.replace(
            self.machine.policy, probe_has_key=getattr(self.prober, "has_key", False)
        )

    def _close_prober(self) -> None:
        if self.prober is not None:
            self.prober.close()

    def _lane(self, name: str, on_close: Callable[[], None] | None = None) -> Lane:
        if self.threads:
            return ThreadLane(name, self.inbox.put, on_close)
        return InlineLane(self.inbox.put, on_close)

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> StartupResult:
        if not self.owned:
            self.source.start(self.inbox.put)  # first: its command line names host and port
        try:
            self._setup()
        except BringupError:
            self.source.stop(0.0)  # a source we only follow: its readers end, nothing else
            raise
        if self.owned:
            self._foreign_port = port_busy(self.url)
            self.source.start(self.inbox.put)  # BringupError here: nothing was started
        if self.owned:
            # the server's first line can take a while (vLLM imports for ~10 s): systemd's
            # TimeoutStartSec= is pushed out from the start, then at each sign of progress
            self.notes.extend(self._extend_seconds(), self.clock.monotonic())
        self.analyzer.prepare()  # while the server starts: its first lines wait in the inbox
        self.probe_lane = self._lane("prober", on_close=self._close_prober)
        self.gpu_lane = self._lane("gpu-sampler")
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
            self.probe_lane.close()
            self.gpu_lane.close()
            if crashed and self.owned:
                # never leave a server nobody supervises
                self.source.stop(self.config.grace_seconds)
        return self._finish()

    def _loop(self) -> None:
        while True:
            wait = TICK_SECONDS
            if self.prober is not None:  # no later than the next probe is due
                due = self.machine.probe_due_in(self.clock.monotonic())
                if due is not None:
                    wait = min(wait, due)
            now = self.inbox.take_burst(wait, self._handle)
            stopped = self._stopped_members() if self.machine.stall_due(now) else ()
            self._report(self.machine.tick(now, stopped))
            self._send_probe(now)
            self._sample_gpus(now)
            self._keep_systemd_informed(now)
            self.observer.refresh(self.machine.snapshot(now))
            if self.stop_requested is not None and self.stop_requested.is_set():
                self.signum = self.signum or signal.SIGTERM  # a stop on request
            if self.signum is not None or self.machine.is_terminal:
                return
            if self.machine.state is State.READY and not self.follow:
                return

    def _handle(self, item: Any, now: float) -> None:
        m = self.machine
        if isinstance(item, LinesItem):
            self._lines(item.stream, item.texts, now)
        elif isinstance(item, LineItem):
            self._line(item.stream, item.text, now)
        elif isinstance(item, ProbeItem):
            self._report(m.on_probe(self._owned_port(item.obs), now))
        elif isinstance(item, GpuItem):
            self._gpu_in_flight = False
            self._report(m.on_gpu(item.readings, now))
        elif isinstance(item, GpuUnavailable):
            self._gpu_in_flight = False
            self._gpu_unavailable(item.error)
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

    def _lines(self, stream: str, texts: list[str], now: float) -> None:
        """Lines that arrived together: the analyzer reads them as one batch (once ready, one
        screening pass for all), then each is shown and counted, and its events reported,
        in order, as one line at a time would be."""
        found = dict(self.analyzer.feed_lines(texts))
        for k, text in enumerate(texts):
            self.observer.line(stream, text)
            self.machine.on_line(text, now)
            for event in found.get(k, ()):
                self._engine_seen(event)
                self._report(self.machine.on_event(event, now))

    def _line(self, stream: str, text: str, now: float) -> None:
        self.observer.line(stream, text)
        events = self.analyzer.feed(text)
        self.machine.on_line(text, now)
        for event in events:
            self._engine_seen(event)
            self._report(self.machine.on_event(event, now))

    def _engine_seen(self, event: Event) -> None:
        """The log named the engine: decided here when nothing named it before."""
        if not isinstance(event, EngineEvent) or self.engine is not None:
            return
        try:
            engine = Engine(event.engine)
        except ValueError:
            return
        port = self._decide_engine(engine)
        if self.machine.policy.model_on_request and not self.machine.probe_model():
            self.observer.note(  # too late for a usage error: the log named the engine
                f"the smoke request needs --model: {engine} loads its model at the first "
                "request that names it, and none is named (ready cannot be told without it)"
            )
        if self.prober is None:
            self._build_prober(resolve_url(None, None, port, self.host_value))

    def _report(self, events: list[LiveEvent]) -> None:
        for event in events:
            self.observer.event(event)
            if self.on_event is not None:
                self.on_event(event)
            self._notify_event(event)

    # -- probes and GPUs -------------------------------------------------------------------

    def _send_probe(self, now: float) -> None:
        kind = self.machine.next_probe(now) if self.prober is not None else None
        if kind is not None and self.prober is not None:
            self.machine.probe_sent(kind)
            prober, path, model = self.prober, self.health_path, self.machine.probe_model()
            self.probe_lane.submit(lambda: probe_once(prober, kind, path, model))

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

    def _sample_gpus(self, now: float) -> None:
        """A GPU sample every interval, one at a time."""
        if self._gpu_off or self._gpu_in_flight or now < self._gpu_next_at:
            return
        self._gpu_in_flight = True
        self._gpu_next_at = now + self.config.gpu_interval_seconds
        gpus, visible = self.gpus, self.config.environ.get("CUDA_VISIBLE_DEVICES")
        self.gpu_lane.submit(lambda: read_gpus(gpus, visible))

    def _gpu_unavailable(self, error: str) -> None:
        """NVML missing: off (said once). A readings file that does not exist yet (the twin
        writes it) or is being rewritten: try again."""
        if not self.config.gpus_from:
            self._gpu_off = True
            self.observer.note(f"GPU sampling off: {error}")
        elif not self._gpu_said:
            self._gpu_said = True
            self.observer.note(
                f"GPU readings not available yet ({error}); trying every {self.config.gpu_interval_seconds:g}s"
            )

    # -- systemd ---------------------------------------------------------------------------

    def _notify_event(self, event: LiveEvent) -> None:
        if self.notes.notifier is None:
            return  # no systemd to tell: no status text, no clock read
        if isinstance(event, Ready):
            self.notes.ready(
                f"ready in {event.time_to_ready_seconds:.1f}s: the model answered at {self.url}"
            )
        elif isinstance(event, FailureFound):
            self.notes.failed(event.failure, stalled=event.stalled)
        elif (
            isinstance(event, PhaseReached | Progress | GpuSample)
            and self.machine.state is State.STARTING
        ):
            text = status_text(self.machine.phase, self.machine.progress)
            self.notes.starting(text, self.clock.monotonic(), self._extend_seconds())

    def _extend_seconds(self) -> float:
        """How far each EXTEND_TIMEOUT_USEC pushes the start timeout: past the stall limit."""
        return (self.config.stall_seconds or 600.0) + 30.0

    def _keep_systemd_informed(self, now: float) -> None:
        if self.machine.state is State.READY:
            self.notes.watchdog_if_due(now)

    def _install_signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {
            s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        }  # SIGHUP: a closed ssh -tt

        def handler(signum: int, _frame: object) -> None:
            self.inbox.put_from_signal(_SignalItem(signum))

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
        server_exit = self._server_exit(left_pid)
        summary = summary_json(m, now)
        if server_exit is not None:
            summary.update(server_exit.json_fields())
            summary["shm_removed"] = self._shm_removed()
        verdict = m.verdict(self.signum)
        result = StartupResult(
            outcome=verdict.outcome,
            exit_code=verdict.exit_code,
            failure=verdict.failure,
            argv=tuple(self.config.argv),
            time_to_ready_seconds=m.time_to_ready_seconds,
            summary=summary,
            url=self.url,
            model=m.model or m.probe_model(),
            server_exit_code=self.server_exit,
            server_exit=server_exit,
            left_running_pid=left_pid,
            detached_log=log,
            interrupted=self.signum is not None,
            engine=self.engine,
            facts=dict((self.final_diagnosis or self.analyzer.diagnosis()).facts),
        )
        self.observer.close(result, m.snapshot(now))
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
        if m.state is State.FAILED and self.signum is None and child.poll() is None:
            # A failing server is usually tearing itself down (vLLM prints the cause, then
            # exits 1 a second or two later, ignoring SIGTERM meanwhile): let it finish, so
            # the summary has its own exit status rather than the effect of our signal.
            wait = self.config.exit_wait_seconds
            code = child.wait(self.config.grace_seconds if wait is None else wait)
            if code is not None and self.server_exit is None:
                self.server_exit = code
        if child.poll() is None or child.members():
            self.notes.stopping()
            self.observer.note(
                f"stopping the server (pid {child.pid}): SIGTERM to its process group, SIGKILL after {self.config.grace_seconds:g}s"
            )
            code = child.terminate(self.config.grace_seconds)
            if self.server_exit is None:
                self.server_exit = code
        else:
            child.release()  # it ended by itself: its sentinel goes now, not at bringup's exit
        if child.shm_removed:
            names = child.shm_removed
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            self.observer.note(
                f"removed {count(len(names), '/dev/shm object')} the server left behind: {shown}"
            )
        return None, None

    def _shm_removed(self) -> list[str]:
        """The /dev/shm objects the server left behind that were removed (run only)."""
        if not isinstance(self.source, ChildSource) or self.source.child is None:
            return []
        return list(self.source.child.shm_removed)

    def _stopped_members(self) -> tuple[tuple[int, str], ...]:
        """The server's processes in the stopped state (asked only when a stall is due)."""
        if not isinstance(self.source, ChildSource) or self.source.child is None:
            return ()
        return self.source.child.stopped_members()

    def _server_exit(self, left_pid: int | None) -> ServerExit | None:
        """The server's own exit status, apart from the signals bringup sent (run only)."""
        if not isinstance(self.source, ChildSource) or self.source.child is None:
            return None
        child = self.source.child
        code = None if left_pid is not None else self.server_exit
        if code is None and left_pid is None:
            code = child.poll()
        return ServerExit.from_code(
            code,
            tuple(child.signals_sent),
            self.config.grace_seconds if child.signals_sent else None,
        )
