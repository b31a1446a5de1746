"""The retry loop behind ``--retry N`` on ``bringup run`` and ``bringup up``::

    outcome = run_with_retry(ChildAttempts(config, make_observer), retries=2, on_retry=print)
    outcome.result.exit_code, [a.to_json() for a in outcome.attempts]

Each attempt is followed to a verdict by the supervisor; on a failure before ready the
pure policy (``bringup.core.retry_policy.decide``) names the change, the ``Attempts``
object makes it (``run``: a new command line; ``up``: a systemd drop-in and a restart),
and the next attempt starts, at most ``retries`` times. Every change is reported to the
``on_retry`` hook as a frozen ``RetryEvent`` before the next attempt; every attempt is
kept as an ``AttemptRecord`` (the summary's ``"attempts"``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bringup.adapters import gpus as gpu_adapter
from bringup.adapters.clock import Clock, SystemClock
from bringup.adapters.commands import Runner, check
from bringup.adapters.sources import UnitSource
from bringup.core import engine_args, retry_policy, service
from bringup.core.gpu import GpuReading, select_visible
from bringup.core.plan.result import Plan
from bringup.core.retry_policy import Change, Decision
from bringup.core.systemd_unit import Word, render_retry_dropin, retry_dropin_path
from bringup.core.vocab import Outcome
from bringup.errors import AdapterError, BringupError, InputError
from bringup.supervisor import Observer, StartupConfig, StartupResult, run_startup


@dataclass(frozen=True, slots=True)
class RetryEvent:
    """A change made before attempt ``attempt`` (2 is the first retry)."""

    attempt: int
    change: Change

    def to_json(self) -> dict[str, Any]:
        """``{"event": "retry", "attempt", "change": {"flag", "value", "reason"}}``."""
        return {"event": "retry", "attempt": self.attempt, "change": change_json(self.change)}


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One attempt: the command it ran, how it ended, and the change made after it."""

    attempt: int
    argv: tuple[str, ...]
    outcome: Outcome
    exit_code: int
    failure_class: str | None
    phase: str | None
    change: Change | None  # the change made before the next attempt; None for the last
    stopped_because: str | None  # the last attempt's failure: why it was not retried

    def to_json(self) -> dict[str, Any]:
        """One entry of the summary's ``"attempts"``."""
        return {
            "attempt": self.attempt,
            "argv": list(self.argv),
            "outcome": self.outcome.value,
            "exit_code": self.exit_code,
            "class": self.failure_class,
            "phase": self.phase,
            "change": change_json(self.change) if self.change is not None else None,
            "not_retried": self.stopped_because,
        }


def change_json(change: Change) -> dict[str, Any]:
    """``{"flag", "value", "reason"}`` (flag and value null for a wait for the GPUs)."""
    return {"flag": change.flag, "value": change.value, "reason": change.reason}


@dataclass(frozen=True)
class RetryOutcome:
    """The last attempt's result and the record of every attempt."""

    result: StartupResult
    attempts: tuple[AttemptRecord, ...]

    @property
    def exit_code(self) -> int:
        return self.result.exit_code


class Attempts(Protocol):
    """How one kind of start is attempted, changed and closed (``run``'s child or ``up``'s unit)."""

    def attempt(self, number: int, argv: tuple[str, ...]) -> StartupResult:
        """Start (or restart) with ``argv`` and follow to a verdict."""
        ...

    def change(self, change: Change, argv: tuple[str, ...]) -> bool:
        """Make ``change`` before the next attempt (``argv`` is the new command line).

        False when it could not be made (a wait for the GPUs that timed out).
        """
        ...

    def can_wait(self) -> bool:
        """Whether waiting for the GPUs is possible here (GPU readings are available)."""
        ...

    def close(
        self, result: StartupResult, attempts: Sequence[AttemptRecord], *, final: bool
    ) -> None:
        """Report the end of an attempt (the final one gets the attempts in its summary)."""
        ...


def run_with_retry(
    attempts: Attempts,
    argv: Sequence[str],
    retries: int,
    *,
    on_retry: Callable[[RetryEvent], None] | None = None,
    on_stop: Callable[[Decision], None] | None = None,
    plan: Plan | None = None,
) -> RetryOutcome:
    """Attempt, and on a failure before ready change what the policy says and attempt again."""
    current = tuple(argv)
    history: list[Change] = []
    records: list[AttemptRecord] = []
    number = 1
    while True:
        result = attempts.attempt(number, current)
        decision = _decide(result, current, history, retries - (number - 1), attempts, plan)
        change = decision.change if decision is not None else None
        while change is not None:
            history.append(change)
            following = tuple(retry_policy.apply(current, change))
            if attempts.change(change, following):
                break
            # a wait that timed out: ask again, knowing the wait was tried
            decision = (
                retry_policy.decide(
                    result.failure,
                    current,
                    history=history,
                    facts=_facts(result),
                    plan=plan,
                    can_wait=False,
                )
                if result.failure
                else None
            )
            change = decision.change if decision is not None else None
        stopped = None if change is not None or decision is None else decision.reason
        records.append(_record(number, current, result, change, stopped))
        if change is None:
            attempts.close(result, records, final=True)
            if decision is not None and on_stop is not None:
                on_stop(decision)
            return RetryOutcome(result, tuple(records))
        attempts.close(result, records, final=False)
        number += 1
        current = tuple(retry_policy.apply(current, change))
        if on_retry is not None:
            on_retry(RetryEvent(number, change))


def _decide(
    result: StartupResult,
    argv: tuple[str, ...],
    history: list[Change],
    retries_left: int,
    attempts: Attempts,
    plan: Plan | None,
) -> Decision | None:
    """None when there is nothing to decide (ready, interrupted, no failure)."""
    if result.failure is None or result.interrupted or result.time_to_ready_seconds is not None:
        return None
    if retries_left <= 0:
        return Decision(None, "no retries left" if history else "no --retry given")
    return retry_policy.decide(
        result.failure,
        argv,
        history=history,
        facts=_facts(result),
        plan=plan,
        can_wait=attempts.can_wait(),
    )


def _facts(result: StartupResult) -> dict[str, float | int | str]:
    return dict(result.diagnosis.facts) if result.diagnosis is not None else {}


def _record(
    number: int,
    argv: tuple[str, ...],
    result: StartupResult,
    change: Change | None,
    stopped: str | None,
) -> AttemptRecord:
    f = result.failure
    return AttemptRecord(
        attempt=number,
        argv=argv,
        outcome=result.outcome,
        exit_code=result.exit_code,
        failure_class=f.failure_class.value if f else None,
        phase=f.phase.value if f else None,
        change=change,
        stopped_because=stopped,
    )


# -- waiting for the GPUs ---------------------------------------------------------------------


def wait_for_free_gpus(
    read: Callable[[], list[GpuReading]],
    need_fraction: float,
    timeout_seconds: float,
    *,
    cuda_visible_devices: str | None = None,
    clock: Clock | None = None,
    interval_seconds: float = 1.0,
) -> bool:
    """Wait until every visible GPU has ``need_fraction`` of its memory free; False on timeout."""
    clock = clock or SystemClock()
    end = clock.monotonic() + timeout_seconds
    while True:
        try:
            gpus = select_visible(read(), cuda_visible_devices)
        except BringupError:
            gpus = []  # a readings file being rewritten: look again
        if gpus and all(g.memory_free_bytes >= need_fraction * g.memory_total_bytes for g in gpus):
            return True
        if clock.monotonic() >= end:
            return False
        clock.sleep(interval_seconds)


def wanted_utilization(argv: Sequence[str]) -> float:
    """The share of each GPU the server asks for (``--gpu-memory-utilization``, default 0.9)."""
    raw = (
        engine_args.get_flag(argv, retry_policy.UTILIZATION)
        or retry_policy.DEFAULTS[retry_policy.UTILIZATION]
    )
    try:
        return min(1.0, max(0.0, float(raw)))
    except ValueError:
        return 0.9


# -- bringup run --retry -------------------------------------------------------------------------


class _SharedAttempts:
    """What running a child and restarting a unit have in common: the GPU check and the
    deferred close of each attempt's output."""

    config: StartupConfig
    _observer: DeferredClose | None

    def can_wait(self) -> bool:
        try:
            gpu_adapter.open_source(self.config.gpus_from).read()
        except BringupError:
            return False
        return True

    def close(
        self, result: StartupResult, attempts: Sequence[AttemptRecord], *, final: bool
    ) -> None:
        if self._observer is not None:
            self._observer.release(result, attempts, final=final)


class ChildAttempts(_SharedAttempts):
    """``bringup run --retry``: each attempt starts the server command as a child."""

    def __init__(
        self,
        config: StartupConfig,
        make_observer: Callable[[int], Observer],
        *,
        wait_timeout_seconds: float = 300.0,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.make_observer = make_observer
        self.wait_timeout_seconds = wait_timeout_seconds
        self.clock = clock
        self._observer: DeferredClose | None = None

    def attempt(self, number: int, argv: tuple[str, ...]) -> StartupResult:
        self._observer = DeferredClose(self.make_observer(number))
        config = dataclasses.replace(
            self.config, argv=argv, exit_when_ready=self.config.exit_when_ready
        )
        return run_startup(config, observer=self._observer, clock=self.clock)

    def change(self, change: Change, argv: tuple[str, ...]) -> bool:
        if not change.wait_for_gpus:
            return True
        source = gpu_adapter.open_source(self.config.gpus_from)
        return wait_for_free_gpus(
            source.read,
            wanted_utilization(argv),
            self.wait_timeout_seconds,
            cuda_visible_devices=self.config.environ.get("CUDA_VISIBLE_DEVICES"),
        )


class DeferredClose:
    """An observer that holds back ``close`` until the loop knows whether this attempt is the last.

    A non-final attempt closes only the human observers (no JSON summary line); the final one
    gets ``"attempts"`` added to its summary and closes every observer.
    """

    def __init__(self, inner: Observer) -> None:
        self.inner = inner
        self._machine: Any = None

    def event(self, event: Any) -> None:
        self.inner.event(event)

    def line(self, stream: str, text: str) -> None:
        self.inner.line(stream, text)

    def note(self, text: str) -> None:
        self.inner.note(text)

    def refresh(self, machine: Any, now: float) -> None:
        self.inner.refresh(machine, now)

    def close(self, result: StartupResult, machine: Any) -> None:
        self._machine = machine

    def release(
        self, result: StartupResult, attempts: Sequence[AttemptRecord], *, final: bool
    ) -> None:
        """Close the inner observers now (see the class docstring)."""
        if final:
            result.summary["attempts"] = [a.to_json() for a in attempts]
            self.inner.close(result, self._machine)
            return
        for observer in getattr(self.inner, "observers", (self.inner,)):
            if (
                not getattr(observer, "is_json", False)
                and type(observer).__name__ != "JsonLinesObserver"
            ):
                observer.close(result, self._machine)


# -- bringup up --retry ----------------------------------------------------------------------------


class _UnitSource(UnitSource):
    """``UnitSource`` for a system unit or, with ``user``, a unit of the user's manager."""

    def __init__(
        self, unit: str, environ: Mapping[str, str], *, runner: Runner, user: bool
    ) -> None:
        super().__init__(unit, environ, runner=runner)
        self.user = user

    def show(self) -> dict[str, str]:
        if not self.user:
            return super().show()
        result = self.runner.run(
            ["systemctl", "--user", "show", self.unit, f"--property={self.PROPERTIES}"]
        )
        if result.returncode != 0:
            raise AdapterError(
                f"systemctl --user show {self.unit} failed: {result.stderr.strip() or result.returncode}"
            )
        return service.parse_show(result.stdout)

    def journal_argv(self) -> list[str]:
        argv = super().journal_argv()
        return ["journalctl", "--user-unit", self.unit, *argv[3:]] if self.user else argv


class UnitAttempts(_SharedAttempts):
    """``bringup up``: start the unit, follow it; a retry writes the ``bringup-retry.conf``
    drop-in with the changed ``ExecStart=``, runs ``daemon-reload`` and restarts the unit."""

    def __init__(
        self,
        unit: str,
        runner: Runner,
        config: StartupConfig,
        make_observer: Callable[[int], Observer],
        *,
        unit_dir: Path,
        user: bool = False,
        start_timeout_seconds: float = 60.0,
        wait_timeout_seconds: float = 300.0,
        clock: Clock | None = None,
        on_note: Callable[[str], None] | None = None,
    ) -> None:
        self.unit = unit
        self.on_note = on_note
        self.runner = runner
        self.config = config
        self.make_observer = make_observer
        self.unit_dir = unit_dir
        self.user = user
        self.start_timeout_seconds = start_timeout_seconds
        self.wait_timeout_seconds = wait_timeout_seconds
        self.clock = clock or SystemClock()
        self.words: tuple[Word, ...] = ()
        self.notes: list[str] = []
        self.dropin: Path | None = None
        self._observer: DeferredClose | None = None

    def systemctl(self, *args: str) -> list[str]:
        return ["systemctl", *(["--user"] if self.user else []), *args]

    def show(self) -> dict[str, str]:
        """``systemctl show NAME`` with the properties ``status`` and ``up`` read."""
        result = check(
            self.runner.run(
                self.systemctl("show", self.unit, "--property=" + ",".join(service.SHOW_PROPERTIES))
            )
        )
        return service.parse_show(result.stdout)

    def server_argv(self) -> tuple[str, ...]:
        """The unit's server command, from ``systemctl cat`` (else ``systemctl show -p ExecStart``)."""
        cat = self.runner.run(self.systemctl("cat", self.unit))
        words = service.exec_start_from_cat(cat.stdout) if cat.returncode == 0 else None
        if words is None:
            words = service.exec_start_from_show(self.show().get("ExecStart", ""))
        if not words:
            raise InputError(
                f"cannot read the ExecStart= of {self.unit}",
                hint=f"check it with `systemctl{' --user' if self.user else ''} cat {self.unit}`",
            )
        self.words = words
        return tuple(service.server_argv(words))

    def attempt(self, number: int, argv: tuple[str, ...]) -> StartupResult:
        before = self.show()
        if before.get("LoadState") == "not-found":
            raise InputError(
                f"unit {self.unit} not found",
                hint="write and install it with `bringup unit NAME --install -- CMD`",
            )
        running = before.get("ActiveState") in ("active", "activating", "reloading")
        if number == 1 and running:
            self._note(f"{self.unit} is already {before['ActiveState']}: following its current run")
        else:
            verb = "start" if number == 1 else "restart"
            check(self.runner.run(self.systemctl(verb, "--no-block", self.unit)))
            self._wait_new_invocation(before.get("InvocationID", ""))
        self._observer = DeferredClose(self.make_observer(number))
        source = _UnitSource(self.unit, self.config.environ, runner=self.runner, user=self.user)
        config = dataclasses.replace(self.config, argv=(), exit_when_ready=True)
        return run_startup(
            config, source=source, observer=self._observer, clock=self.clock, follow=False
        )

    def _wait_new_invocation(self, old: str) -> None:
        end = self.clock.monotonic() + self.start_timeout_seconds
        while True:
            now = self.show()
            if now.get("InvocationID", "") not in ("", old) or now.get("ActiveState") == "failed":
                return
            if self.clock.monotonic() >= end:
                raise AdapterError(
                    f"{self.unit} did not start within {self.start_timeout_seconds:g}s "
                    f"(state {now.get('ActiveState', '?')}/{now.get('SubState', '?')})",
                    hint=f"look at `systemctl{' --user' if self.user else ''} status {self.unit}`",
                )
            self.clock.sleep(0.2)

    def change(self, change: Change, argv: tuple[str, ...]) -> bool:
        if change.wait_for_gpus or change.flag is None:
            source = gpu_adapter.open_source(self.config.gpus_from)
            return wait_for_free_gpus(
                source.read,
                wanted_utilization(argv),
                self.wait_timeout_seconds,
                cuda_visible_devices=self.config.environ.get("CUDA_VISIBLE_DEVICES"),
                clock=self.clock,
            )
        self.words = service.set_server_flag(self.words, change.flag, change.value)
        self.notes.append(
            f"{change.flag}{' ' + change.value if change.value is not None else ''}: {change.reason}"
        )
        path = self.unit_dir / retry_dropin_path(self.unit)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render_retry_dropin(self.words, self.notes), encoding="utf-8")
        except OSError as exc:
            raise InputError(
                f"cannot write {path}: {exc.strerror or exc}",
                hint="run as root for a system unit, or use --user for a user unit",
            ) from exc
        self.dropin = path
        check(self.runner.run(self.systemctl("daemon-reload")))
        self._note(f"wrote {path} and ran systemctl{' --user' if self.user else ''} daemon-reload")
        return True

    def _note(self, text: str) -> None:
        if self.on_note is not None:
            self.on_note(text)
