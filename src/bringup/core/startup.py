"""The live supervisor's decisions, as a pure state machine.

``StartupMachine`` is fed what the supervisor loop observes (analyzer events, log lines,
HTTP probe observations, GPU samples, the process exit) together with ``now`` (monotonic
seconds, passed in) and answers with ``LiveEvent`` values to report. It never reads a
clock, a socket or a process: ``bringup.follow`` does that and asks this module what
it means.

The rules (issue 5):

- ready only after the smoke request succeeds (health, then /v1/models, then a 1-token
  completion); the engine's own "ready" line is a phase, not the verdict;
- failed the moment a final root-cause ``FailureEvent`` arrives; a tentative one (a wrapper,
  or an unknown exception a known line may still explain) is settled after
  ``wrapper_grace_seconds`` or at process exit, as the analyzer's latest choice;
- a process exit before ready is a failure whatever its code (vLLM can exit 0 after its
  engine died), and so is an exit after ready;
- stalled (class ``timeouts``) when no new phase, no progress line and no GPU memory
  change arrived for ``stall_seconds``; a slow load that keeps progressing is never cut off;
  with a startup prediction (``StartupPolicy.prediction``) the limit is several times the
  phase's expected gap between progress lines, ``stall_seconds`` its floor
  (``core.startup_time.live``), and a phase past its predicted high end is said once;
- stalled when ``deadline_seconds`` have passed without ready.

The failures the machine states itself (no log line says them) are worded in
``core.startup_failures``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from bringup.core import startup_failures as failures
from bringup.core import verdict
from bringup.core.diagnosis import (
    Event,
    Failure,
    FailureEvent,
    PhaseEvent,
    ProgressEvent,
)
from bringup.core.gpu import GpuReading
from bringup.core.live import (
    Exited,
    FailureFound,
    GpuSample,
    GpuUse,
    LiveEvent,
    PhaseReached,
    ProbeSeen,
    Progress,
    Ready,
    SlowPhase,
    failure_fields,
)
from bringup.core.probes import ProbeKind, ProbeObservation
from bringup.core.startup_time import StartupPrediction
from bringup.core.startup_time.live import Expectation
from bringup.core.verdict import State, Verdict
from bringup.core.vocab import Outcome, Phase

GPU_CHANGE_BYTES = 16 * 1024 * 1024  # smaller moves are jitter, not progress


LATENCY_WINDOW = 20  # ok probes after ready that make "usual" latency
AUTH_REFUSED = (401, 403)  # HTTP statuses that mean "not without the right API key"


@dataclass(frozen=True, slots=True)
class StartupPolicy:
    """Limits and pacing of one followed startup."""

    stall_seconds: float | None = 300.0
    deadline_seconds: float | None = 7200.0
    wrapper_grace_seconds: float = 2.0
    probe_interval_seconds: float = 0.25  # health probes while starting
    smoke_retry_seconds: float = 1.0  # after a failed smoke request
    liveness_interval_seconds: float = 5.0  # health probes after ready (0: none)
    liveness_failures: int = 3  # consecutive failed health probes after ready = dead
    fallback_model: str | None = None  # the model named on the command line
    has_health: bool = True  # False when the engine has no health endpoint to ask
    probe_has_key: bool = False  # bringup's probes carry an API key (for the 401/403 verdict)
    # the engine loads its model at the first request that names it (Ollama): the smoke request
    # names ``fallback_model`` and is what loads it; the log's "listening" is not ready then
    model_on_request: bool = False
    missing_model: str | None = None  # the remedy when the smoke's model is not there ({model})
    prediction: StartupPrediction | None = None  # time to ready (core.startup_time), if known
    checkpoint_bytes: int = 0  # the shards' size (the weights' GB/s), with a prediction


@dataclass(frozen=True, slots=True)
class PhaseSpan:
    """A phase reached at ``t`` seconds (since the start); ``line_number`` 0 if not from a line."""

    phase: Phase
    t: float
    line_number: int


@dataclass(frozen=True, slots=True)
class StartupSnapshot:
    """A read-only view of a followed startup at one moment, for renderers."""

    state: State
    phase: Phase
    progress: ProgressEvent | None
    spans: tuple[PhaseSpan, ...]
    gpus: tuple[GpuReading, ...]
    probes: Mapping[ProbeKind, ProbeObservation]
    failure: Failure | None
    elapsed_seconds: float  # since the start
    phase_elapsed_seconds: float  # in the current phase


class StartupMachine:
    """The supervisor's state, advanced by observations; every method is pure given ``now``."""

    def __init__(self, policy: StartupPolicy, start: float) -> None:
        self.policy = policy
        self.start = start
        self.phase = Phase.START
        self.spans: list[PhaseSpan] = [PhaseSpan(Phase.START, 0.0, 0)]
        self.progress: ProgressEvent | None = None
        self._failed: Failure | None = None  # a root cause or a death (also after ready)
        self._stalled: Failure | None = None  # --stall or --deadline
        self._stopped = False  # stopped on request
        self.model: str | None = None
        self.ready_at: float | None = None
        self.ended_at: float | None = None
        self.exit_code: int | None = None
        self.last_line = ""
        self.line_count = 0
        self.probes: dict[ProbeKind, ProbeObservation] = {}
        self.gpus: list[GpuReading] = []
        self._last_activity = start
        self._pending: tuple[Failure, float] | None = None
        self._next_probe: ProbeKind = ProbeKind.HEALTH if policy.has_health else ProbeKind.MODELS
        self._next_probe_at = start
        self._probe_in_flight = False
        self._liveness_failures = 0
        self._probe_keys: dict[ProbeKind, tuple[Any, ...]] = {}
        self._live_latencies: list[float] = []  # recent ok liveness probes, for "usual"
        self._loading = False  # model_on_request: the model's load began (after listening)
        self.expect = (
            Expectation(policy.prediction, policy.checkpoint_bytes) if policy.prediction else None
        )

    # -- queries ---------------------------------------------------------------------------

    def verdict(self, signal: int | None = None) -> Verdict:
        """The verdict of the facts so far (``signal``: bringup was interrupted by it)."""
        return verdict.decide(
            verdict.Facts(
                failure=self._failed,
                stalled=self._stalled,
                ready=self.ready_at is not None,
                stopped=self._stopped,
                signal=signal,
            )
        )

    @property
    def state(self) -> State:
        """Where the startup stands (``core.verdict``)."""
        return self.verdict().state

    @property
    def failure(self) -> Failure | None:
        """The failure behind the verdict (a root cause, a death, a stall), if any."""
        return self.verdict().failure

    @property
    def is_terminal(self) -> bool:
        """True once there is a final verdict."""
        return self.state in (State.FAILED, State.STALLED, State.STOPPED)

    @property
    def outcome(self) -> Outcome:
        """The verdict so far in the shared vocabulary (``ready`` also after a clean stop)."""
        return self.verdict().outcome

    @property
    def time_to_ready_seconds(self) -> float | None:
        """Seconds from the start to the successful smoke request."""
        return None if self.ready_at is None else self.ready_at - self.start

    def elapsed(self, now: float) -> float:
        """Seconds since the start."""
        return now - self.start

    def phase_elapsed(self, now: float) -> float:
        """Seconds spent in the current phase so far."""
        return now - self.start - self.spans[-1].t

    def seconds_idle(self, now: float) -> float:
        """Seconds since the last phase, progress line or GPU memory change."""
        return now - self._last_activity

    def snapshot(self, now: float) -> StartupSnapshot:
        """A read-only view for renderers (they never see the machine itself)."""
        return StartupSnapshot(
            state=self.state,
            phase=self.phase,
            progress=self.progress,
            spans=tuple(self.spans),
            gpus=tuple(self.gpus),
            probes=MappingProxyType(dict(self.probes)),
            failure=self.failure,
            elapsed_seconds=self.elapsed(now),
            phase_elapsed_seconds=self.phase_elapsed(now),
        )

    def next_probe(self, now: float) -> ProbeKind | None:
        """The probe to send now, or None (one in flight, too early, or nothing to ask)."""
        if self._probe_waits() or now < self._next_probe_at:
            return None
        return self._next_probe

    def probe_due_in(self, now: float) -> float | None:
        """Seconds until ``next_probe`` has a probe to send (0: now); None while none will
        come without another input (one in flight, or nothing to ask). The follower waits
        for its inbox no longer than this, so a probe is sent when it is due."""
        if self._probe_waits():
            return None
        return max(0.0, self._next_probe_at - now)

    def _probe_waits(self) -> bool:
        return (
            self.is_terminal
            or self._probe_in_flight
            or (self.state is State.READY and not self.policy.liveness_interval_seconds)
        )

    def probe_model(self) -> str | None:
        """The model name the smoke request should use."""
        return self.model or self.policy.fallback_model

    # -- inputs ----------------------------------------------------------------------------

    def probe_sent(self, kind: ProbeKind) -> None:
        """The supervisor started ``kind``; no other probe until its observation arrives."""
        self._probe_in_flight = True

    def on_line(self, line: str, now: float) -> None:
        """A log line arrived (after it was fed to the analyzer)."""
        self.line_count += 1
        if line.strip():
            self.last_line = line

    def on_event(self, event: Event, now: float) -> list[LiveEvent]:
        """An analyzer event arrived."""
        if isinstance(event, PhaseEvent):
            return self._on_phase(event, now)
        if isinstance(event, ProgressEvent):
            self._last_activity = now
            late = event.phase.order < self.phase.order and not self.policy.model_on_request
            if not late:
                self.progress = event
            return [self._progress(event, now, late)]
        if isinstance(event, FailureEvent):
            return self._on_failure(event.failure, now, tentative=event.tentative)
        return []

    def _progress(self, event: ProgressEvent, now: float, late: bool) -> Progress:
        """The live event (``late``: see ``core.live.Progress``)."""
        t = now - self.start
        est = (
            self.expect.on_progress(event.phase, event.done, event.total, t)
            if self.expect
            else None
        )
        eta = None if est is None else est.eta_seconds
        rate = None if est is None or self.expect is None else self.expect.bytes_per_second(est)
        return Progress(t, event.phase, event.done, event.total, event.unit, eta, rate, late)

    def _stall_limit(self) -> float | None:
        """``--stall``, or with a prediction several expected gaps with it as the floor."""
        floor = self.policy.stall_seconds
        if self.expect is None:
            return floor
        total = self.progress.total if self.progress is not None else None
        return self.expect.stall_limit(floor, total)

    def on_gpu(self, readings: Sequence[GpuReading], now: float) -> list[LiveEvent]:
        """A GPU sample arrived; a memory change counts as progress. Reported when it moved."""
        before = {g.index: g.memory_used_bytes for g in self.gpus}
        moved = [
            g
            for g in readings
            if abs(g.memory_used_bytes - before.get(g.index, -(2**62))) >= GPU_CHANGE_BYTES
        ]
        first = not self.gpus
        self.gpus = list(readings)
        if not moved:
            return []
        if not first:
            self._last_activity = now
        gpus = tuple(GpuUse(g.index, g.memory_used_bytes, g.memory_total_bytes) for g in readings)
        return [GpuSample(now - self.start, gpus)]

    def on_probe(self, obs: ProbeObservation, now: float) -> list[LiveEvent]:
        """A probe observation arrived: advance the readiness sequence."""
        self._probe_in_flight = False
        self.probes[obs.kind] = obs
        out = self._report_probe(obs, now)
        if self.is_terminal:
            return out
        if obs.status in AUTH_REFUSED:
            failure = failures.auth_refused(
                obs, self.phase, self.line_count, probe_has_key=self.policy.probe_has_key
            )
            return out + self._fail(failure, now, State.FAILED)
        if self.state is State.READY:
            return out + self._on_liveness(obs, now)
        return out + self._advance_readiness(obs, now)

    def on_exit(
        self, exit_code: int | None, failure: Failure | None, now: float
    ) -> list[LiveEvent]:
        """The server process ended (``exit_code`` None when unknown, e.g. not our child).

        ``failure`` is the analyzer's verdict on the whole log (``finish(exit_code)``), if any.
        """
        self.exit_code = exit_code
        exited: list[LiveEvent] = [Exited(now - self.start, exit_code)]
        if self.is_terminal:
            return exited
        chosen = failure if failure is not None and failure.is_final else None
        if chosen is None and self._pending is not None:
            chosen = self._pending[0]
        if chosen is None:
            chosen = failure or failures.process_exit(
                exit_code,
                self.phase,
                after_ready=self.ready_at is not None,
                last_line=self.last_line,
                line_count=self.line_count,
            )
        return exited + self._fail(chosen, now, State.FAILED)

    def stop(self, now: float) -> None:
        """The user asked to stop (Ctrl-C, SIGTERM): not a failure of the server."""
        if not self.is_terminal:
            self._stopped = True
            self.ended_at = now

    def stall_due(self, now: float) -> bool:
        """Whether nothing has moved for ``--stall`` (the floor): the follower then looks for
        stopped processes, which ``tick`` calls stalled at once, and names. A prediction may
        allow a working phase longer (``_stall_limit``), never a stopped process, which
        cannot progress whatever the phase was expected to take."""
        floor = self.policy.stall_seconds
        return (
            not self.is_terminal
            and self.state is not State.READY
            and floor is not None
            and now - self._last_activity >= floor
        )

    def tick(self, now: float, stopped: Sequence[tuple[int, str]] = ()) -> list[LiveEvent]:
        """Time passed: settle a wrapper failure, detect a stall or the deadline.

        ``stopped``: the server's processes found stopped (SIGSTOP, a debugger), as (pid, name);
        a stall names them, since they are why nothing moves.
        """
        if self.is_terminal:
            return []
        if (
            self._pending is not None
            and now - self._pending[1] >= self.policy.wrapper_grace_seconds
        ):
            return self._fail(self._pending[0], now, State.FAILED)
        if self.state is State.READY:
            return []
        stall = self.policy.stall_seconds if stopped else self._stall_limit()
        if stall is not None and now - self._last_activity >= stall:
            failure = self._stall_failure(stall, "no new phase, progress line or GPU memory change")
            if stopped:
                failure = failures.stopped_processes(failure, stopped)
            return self._fail(failure, now, State.STALLED)
        deadline = self.policy.deadline_seconds
        if deadline is not None and now - self.start >= deadline:
            failure = failures.deadline(
                deadline,
                self.seconds_idle(now),
                self.policy.stall_seconds,
                self.phase,
                self.line_count,
            )
            return self._fail(failure, now, State.STALLED)
        return self._slow(now)

    def _slow(self, now: float) -> list[LiveEvent]:
        """The phase under way ran past its predicted high end: said once, with the reason."""
        slow = self.expect.slow(now - self.start) if self.expect else None
        if slow is None:
            return []
        est, elapsed = slow
        return [SlowPhase(now - self.start, est.phase, elapsed, est.high, est.slow_reason)]

    # -- internals -------------------------------------------------------------------------

    def _on_phase(self, event: PhaseEvent, now: float) -> list[LiveEvent]:
        phase = event.entry.phase
        self._last_activity = now
        if self.policy.model_on_request and self.ready_at is None:
            mapped = self._on_request_phase(phase)
            if mapped is None:
                return []
            phase = mapped
        elif phase.order <= self.phase.order:
            return []
        if phase is Phase.READY and self._next_probe is ProbeKind.HEALTH:
            # the log says the server listens ("Application startup complete."): the health
            # probe that waits for a refused connect's interval goes now
            self._next_probe_at = min(self._next_probe_at, now)
        return [self._reach(phase, now, event.entry.line_number)]

    def _reach(self, phase: Phase, now: float, line: int) -> PhaseReached:
        """The startup is in ``phase`` from ``now`` (``line``: the log line that said so, 0
        for none): the span, the prediction's estimate and the event."""
        self.phase = phase
        self.progress = None
        self.spans.append(PhaseSpan(phase, now - self.start, line))
        est = self.expect.on_phase(phase, now - self.start) if self.expect else None
        if est is not None:
            return PhaseReached(now - self.start, phase, line, est.seconds, est.high)
        return PhaseReached(now - self.start, phase, line)

    def _on_failure(self, failure: Failure, now: float, *, tentative: bool) -> list[LiveEvent]:
        if self.is_terminal:
            return []
        if failure.is_final and not tentative:
            return self._fail(failure, now, State.FAILED)
        # A wrapper or an unknown exception: hold it for the grace (counted from the first),
        # taking each replacement the analyzer makes, so live gives the whole log's verdict.
        since = self._pending[1] if self._pending is not None else now
        self._pending = (failure, since)
        return []

    def _on_request_phase(self, phase: Phase) -> Phase | None:
        """A model loaded at the first request: the server listens before any model loads, so
        its "listening" (ready to the log) is the API server up, and the load the smoke request
        starts (weights, KV cache, "runner started") comes after it; ready is the answer."""
        loading = self._loading
        if phase is Phase.READY and not loading:
            phase = Phase.API_SERVER_STARTING  # listening, no model yet
        elif (
            Phase.CONFIG.order < phase.order < Phase.API_SERVER_STARTING.order
            and not loading
            and self.phase is Phase.API_SERVER_STARTING
        ):
            self._loading = True  # the load the smoke request started
            self.phase = Phase.CONFIG  # its phases follow the server's
        if phase.order <= self.phase.order:
            return None
        return phase

    def _fail(self, failure: Failure, now: float, state: State) -> list[LiveEvent]:
        if state is State.STALLED:
            self._stalled = failure
        else:
            self._failed = failure
        self.ended_at = now
        self._pending = None
        return [FailureFound(now - self.start, failure, stalled=state is State.STALLED)]

    def _advance_readiness(self, obs: ProbeObservation, now: float) -> list[LiveEvent]:
        interval = self.policy.probe_interval_seconds
        if obs.kind is ProbeKind.HEALTH:
            # 404: this server has no such health path; let the smoke request decide
            passed = obs.ok or obs.status == 404
            # a model loaded on request: /v1/models lists what could be loaded, not what is
            # served; the smoke request names the model it was given
            after = ProbeKind.SMOKE if self.policy.model_on_request else ProbeKind.MODELS
            self._schedule(after if passed else ProbeKind.HEALTH, now, 0.0 if passed else interval)
        elif obs.kind is ProbeKind.MODELS:
            if obs.ok and obs.model:
                self.model = obs.model
            self._schedule(ProbeKind.SMOKE, now, 0.0)
        elif obs.ok:
            self.ready_at = now
            # the answer came before the log's ready line (or from a log that has none): the
            # phase is reached all the same, so every consumer sees one sequence of events
            reached = [] if self.phase is Phase.READY else [self._reach(Phase.READY, now, 0)]
            self._schedule(ProbeKind.HEALTH, now, self.policy.liveness_interval_seconds)
            return [*reached, Ready(now - self.start, now - self.start, obs.model, obs.url)]
        elif self.policy.model_on_request and obs.status == 404:
            model = obs.model or self.probe_model() or "?"
            failure = failures.missing_model(
                obs, model, self.policy.missing_model, self.phase, self.line_count
            )
            return self._fail(failure, now, State.FAILED)
        else:
            first = ProbeKind.HEALTH if self.policy.has_health else ProbeKind.MODELS
            self._schedule(first, now, self.policy.smoke_retry_seconds)
        return []

    def _on_liveness(self, obs: ProbeObservation, now: float) -> list[LiveEvent]:
        self._schedule(ProbeKind.HEALTH, now, self.policy.liveness_interval_seconds)
        if obs.ok or obs.status == 404:
            self._liveness_failures = 0
            return []
        self._liveness_failures += 1
        if self._liveness_failures < self.policy.liveness_failures:
            return []
        failure = failures.health_lost(
            obs, self._liveness_failures, self.last_line, self.line_count
        )
        return self._fail(failure, now, State.FAILED)

    def _schedule(self, kind: ProbeKind, now: float, delay_seconds: float) -> None:
        if kind is ProbeKind.HEALTH and not self.policy.has_health:
            kind = ProbeKind.MODELS
        self._next_probe = kind
        self._next_probe_at = now + delay_seconds

    def _report_probe(self, obs: ProbeObservation, now: float) -> list[LiveEvent]:
        key = (obs.ok, obs.status, obs.refused, obs.error)
        same = self._probe_keys.get(obs.kind) == key
        self._probe_keys[obs.kind] = key
        if same and not obs.ok:
            return []  # the same refusal again: not news
        if same and self.state is State.READY and not self._latency_unusual(obs):
            return []  # the server still answers, as fast as usual: not news either
        return [ProbeSeen(now - self.start, obs)]

    def _latency_unusual(self, obs: ProbeObservation) -> bool:
        """After ready: whether an ok probe took far longer than the usual (the median of the
        recent ones: four times it, and at least a quarter second more)."""
        latency = obs.latency_seconds
        recent = sorted(self._live_latencies)
        self._live_latencies = [*self._live_latencies[-(LATENCY_WINDOW - 1) :], latency]
        if len(recent) < 3:
            return False
        usual = recent[len(recent) // 2]
        return latency > max(4 * usual, usual + 0.25)

    def _stall_failure(self, limit_seconds: float, why: str) -> Failure:
        return failures.stall(limit_seconds, why, self.phase, self.line_count)


def timeline_json(spans: Sequence[PhaseSpan], end_t: float) -> list[dict[str, Any]]:
    """The summary's timeline: each phase, when it was reached and how long it lasted."""
    out = []
    for i, span in enumerate(spans):
        until = spans[i + 1].t if i + 1 < len(spans) else end_t
        out.append(
            {
                "phase": span.phase.value,
                "t": round(span.t, 3),
                "duration_seconds": round(max(0.0, until - span.t), 3),
                "line_number": span.line_number,
            }
        )
    return out


def summary_json(machine: StartupMachine, now: float) -> dict[str, Any]:
    """The last JSON Lines object: ``{"event": "summary", "outcome", "phase", ...}``."""
    end = (machine.ended_at if machine.ended_at is not None else now) - machine.start
    ttr = machine.time_to_ready_seconds
    outcome = machine.outcome
    return {
        "event": "summary",
        # live, a startup that ends with no verdict was stopped by a signal before one
        "outcome": outcome.value if outcome is not Outcome.INCOMPLETE else "interrupted",
        "phase": machine.phase.value,
        "failure": None if machine.failure is None else failure_fields(machine.failure),
        "time_to_ready_seconds": None if ttr is None else round(ttr, 3),
        "timeline": timeline_json(machine.spans, end),
    }
