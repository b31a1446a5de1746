"""``--retry N`` on ``bringup run`` and ``bringup up``: the single-server strategies of the one
retry loop (``follow.retry_loop``, which ``run --nodes --retry`` shares)::

    outcome = run_with_retry(ChildAttempts(config, make_observer), argv, retries=2, on_retry=print)
    outcome.result.exit_code, [a.to_json() for a in outcome.attempts]

Each attempt is followed to a verdict by the follower; on a failure before ready the
pure policy (``bringup.core.retry_policy.decide``) names the change, the ``Attempts``
object makes it (``run``: a new command line; ``up``: a systemd drop-in and a restart),
and the next attempt starts, at most ``retries`` times. Every change is reported to the
``on_retry`` hook as a frozen ``RetryEvent`` before the next attempt; every attempt is
kept as an ``AttemptRecord`` (the summary's ``"attempts"``). The attempts take how to
follow (``follow``), the GPUs and the clock as dependencies; the defaults are the real ones;
the engine's pack comes from the attempt's result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bringup.adapters import gpus as gpu_adapter
from bringup.adapters.clock import Clock, SystemClock
from bringup.adapters.gpus import GpuSource
from bringup.adapters.sources.items import Source
from bringup.adapters.systemd import Systemctl, write_retry_dropin
from bringup.core import engine_args, packs, retry_policy, service
from bringup.core.attempts import AttemptRecord, RetryEvent
from bringup.core.gpu import GpuReading, select_visible
from bringup.core.live import LiveEvent, StartupResult
from bringup.core.packs.types import EngineFlags, Pack
from bringup.core.plan.result import Plan
from bringup.core.retry_policy import Change, Decision
from bringup.core.startup import StartupSnapshot
from bringup.core.systemd_unit import Word, render_retry_dropin
from bringup.core.vocab import Engine, Outcome
from bringup.errors import AdapterError, BringupError, InputError
from bringup.follow.retry_loop import Attempts, retry_loop
from bringup.follow.types import Observer, StartupConfig, model_needed
from bringup.follow.wiring import follow_local, loads_on_request


class Follow(Protocol):
    """How one attempt is followed (``bringup.follow.wiring.follow_local``)."""

    def __call__(
        self,
        config: StartupConfig,
        *,
        source: Source | None = None,
        observer: Observer | None = None,
        on_event: Callable[[LiveEvent], None] | None = None,
        clock: Clock | None = None,
        follow: bool = True,
    ) -> StartupResult: ...


@dataclass(frozen=True)
class RetryOutcome:
    """The last attempt's result and the record of every attempt."""

    result: StartupResult
    attempts: tuple[AttemptRecord, ...]

    @property
    def exit_code(self) -> int:
        return self.result.exit_code


def run_with_retry(
    attempts: Attempts[StartupResult],
    argv: Sequence[str],
    retries: int,
    *,
    on_retry: Callable[[RetryEvent], None] | None = None,
    on_stop: Callable[[Decision], None] | None = None,
    plan: Plan | None = None,
) -> RetryOutcome:
    """Attempt, and on a failure before ready change what the policy says and attempt again
    (``follow.retry_loop``, the loop ``run --nodes --retry`` shares)."""
    result, records = retry_loop(
        attempts, argv, retries, on_retry=on_retry, on_stop=on_stop, plan=plan
    )
    return RetryOutcome(result, records)


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


def wanted_share(argv: Sequence[str], engine: Engine | None) -> float:
    """The share of each GPU the server asks for (its pack's memory-share flag or default)."""
    command = engine_args.parse_server_command(list(argv)) if argv else None
    engine = engine or (command.engine if command else None)
    try:
        flags = packs.get(engine).flags if engine is not None else EngineFlags()
    except KeyError:
        flags = EngineFlags()
    return retry_policy.memory_share(argv, flags)


# -- bringup run --retry -------------------------------------------------------------------------


class _SharedAttempts:
    """What running a child and restarting a unit have in common: the GPU check and the
    deferred close of each attempt's output."""

    config: StartupConfig
    _observer: DeferredClose | None
    _gpus: GpuSource | None

    def gpus(self) -> GpuSource:
        """The GPUs to wait for (given, else the readings file or NVML of the config)."""
        return self._gpus or gpu_adapter.open_source(self.config.gpus_from)

    def can_wait(self) -> bool:
        try:
            self.gpus().read()
        except BringupError:
            return False
        return True

    def pack(self, result: StartupResult) -> Pack | None:
        """The knowledge pack of the engine the attempt ran, when there is one."""
        try:
            return packs.get(result.engine) if result.engine is not None else None
        except KeyError:
            return None

    def outcome(self, result: StartupResult) -> Outcome:
        return result.outcome

    def vet(self, argv: tuple[str, ...], decision: Decision) -> Decision:
        return decision  # one server: the policy's change is made as decided

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
        follow: Follow = follow_local,
        gpus: GpuSource | None = None,
    ) -> None:
        self.config = config
        self.make_observer = make_observer
        self.wait_timeout_seconds = wait_timeout_seconds
        self.clock = clock
        self.follow = follow
        self._gpus = gpus
        self._observer: DeferredClose | None = None

    def attempt(self, number: int, argv: tuple[str, ...]) -> StartupResult:
        self._observer = DeferredClose(self.make_observer(number))
        config = dataclasses.replace(
            self.config, argv=argv, exit_when_ready=self.config.exit_when_ready
        )
        return self.follow(config, observer=self._observer, clock=self.clock)

    def change(self, change: Change, argv: tuple[str, ...]) -> bool:
        if not change.wait_for_gpus:
            return True
        return wait_for_free_gpus(
            self.gpus().read,
            wanted_share(argv, self.config.engine),
            self.wait_timeout_seconds,
            cuda_visible_devices=self.config.environ.get("CUDA_VISIBLE_DEVICES"),
            clock=self.clock,
        )


class DeferredClose:
    """An observer that holds back ``close`` until the loop knows whether this attempt is the last.

    A non-final attempt closes only the human observers (no JSON summary line); the final one
    gets ``"attempts"`` added to its summary and closes every observer.
    """

    def __init__(self, inner: Observer) -> None:
        self.inner = inner
        self._snapshot: StartupSnapshot | None = None

    def event(self, event: LiveEvent) -> None:
        self.inner.event(event)

    def line(self, stream: str, text: str) -> None:
        self.inner.line(stream, text)

    def note(self, text: str) -> None:
        self.inner.note(text)

    def refresh(self, snapshot: StartupSnapshot) -> None:
        self.inner.refresh(snapshot)

    def close(self, result: StartupResult, snapshot: StartupSnapshot) -> None:
        self._snapshot = snapshot

    def release(
        self, result: StartupResult, attempts: Sequence[AttemptRecord], *, final: bool
    ) -> None:
        """Close the inner observers now (see the class docstring)."""
        assert self._snapshot is not None, "released before the attempt closed"
        if final:
            result.summary["attempts"] = [a.to_json() for a in attempts]
            self.inner.close(result, self._snapshot)
            return
        for observer in getattr(self.inner, "observers", (self.inner,)):
            if (
                not getattr(observer, "is_json", False)
                and type(observer).__name__ != "JsonLinesObserver"
            ):
                observer.close(result, self._snapshot)


# -- bringup up --retry ----------------------------------------------------------------------------


class UnitAttempts(_SharedAttempts):
    """``bringup up``: start the unit, follow it; a retry writes the ``bringup-retry.conf``
    drop-in with the changed ``ExecStart=``, runs ``daemon-reload`` and restarts the unit."""

    def __init__(
        self,
        unit: str,
        systemctl: Systemctl,
        config: StartupConfig,
        make_observer: Callable[[int], Observer],
        *,
        unit_dir: Path,
        start_timeout_seconds: float = 60.0,
        wait_timeout_seconds: float = 300.0,
        clock: Clock | None = None,
        on_note: Callable[[str], None] | None = None,
        follow: Follow = follow_local,
        gpus: GpuSource | None = None,
        local_dropin: bool = False,
    ) -> None:
        self.unit = unit
        self.on_note = on_note
        self.systemctl = systemctl
        self.config = config
        self.make_observer = make_observer
        self.unit_dir = unit_dir
        self.start_timeout_seconds = start_timeout_seconds
        self.wait_timeout_seconds = wait_timeout_seconds
        self.clock = clock or SystemClock()
        self.follow = follow
        self._gpus = gpus
        self.words: tuple[Word, ...] = ()
        self.notes: list[str] = []
        self.dropin: Path | None = None
        self.local_dropin = local_dropin
        self._observer: DeferredClose | None = None
        self._restarted = False  # change() restarted the unit: the next attempt follows that run

    def server_argv(self) -> tuple[str, ...]:
        """The unit's server command, from ``systemctl cat`` (else ``systemctl show -p ExecStart``)."""
        words = self.systemctl.exec_start(self.unit)
        if not words:
            raise InputError(
                f"cannot read the ExecStart= of {self.unit}",
                hint=f"check it with `{self.systemctl.name} cat {self.unit}`",
            )
        self.words = words
        return tuple(service.server_argv(words))

    def attempt(self, number: int, argv: tuple[str, ...]) -> StartupResult:
        before = self.systemctl.show(self.unit)
        if before.get("LoadState") == "not-found":
            raise InputError(
                f"unit {self.unit} not found",
                hint="write and install it with `bringup unit NAME --install -- CMD`",
            )
        running = before.get("ActiveState") in ("active", "activating", "reloading")
        if number == 1 and not running:
            self._check_model()  # before the start: nothing would tell when it is ready
        if number == 1 and running:
            self._note(f"{self.unit} is already {before['ActiveState']}: following its current run")
        elif self._restarted:
            self._restarted = False  # change() restarted it and checked the new run's command
        else:
            self.systemctl.start(self.unit, restart=number > 1)
            self._wait_new_invocation(before.get("InvocationID", ""))
        self._observer = DeferredClose(self.make_observer(number))
        source = self.systemctl.unit_source(self.unit, self.config.environ)
        config = dataclasses.replace(self.config, argv=(), exit_when_ready=True)
        return self.follow(
            config, source=source, observer=self._observer, clock=self.clock, follow=False
        )

    def _check_model(self) -> None:
        """A server that loads its model at the first request needs it named (--model, or
        the unit's own); else one usage line, and the unit is not started."""
        config = dataclasses.replace(self.config, argv=tuple(service.server_argv(self.words)))
        if self.config.model or not loads_on_request(config):
            return
        if not self.systemctl.unit_model(self.unit, self.words):
            engine = config.engine or engine_args.parse_server_command(config.argv).engine
            raise model_needed(engine, f"unit {self.unit}")

    def _wait_new_invocation(self, old: str) -> None:
        end = self.clock.monotonic() + self.start_timeout_seconds
        while True:
            now = self.systemctl.show(self.unit)
            if now.get("InvocationID", "") not in ("", old) or now.get("ActiveState") == "failed":
                return
            if self.clock.monotonic() >= end:
                raise AdapterError(
                    f"{self.unit} did not start within {self.start_timeout_seconds:g}s "
                    f"(state {now.get('ActiveState', '?')}/{now.get('SubState', '?')})",
                    hint=f"look at `{self.systemctl.name} status {self.unit}`",
                )
            self.clock.sleep(0.2)

    def change(self, change: Change, argv: tuple[str, ...]) -> bool:
        if change.wait_for_gpus or change.flag is None:
            return wait_for_free_gpus(
                self.gpus().read,
                wanted_share(argv, self.config.engine),
                self.wait_timeout_seconds,
                cuda_visible_devices=self.config.environ.get("CUDA_VISIBLE_DEVICES"),
                clock=self.clock,
            )
        self.words = service.set_server_flag(self.words, change.flag, change.value)
        self.notes.append(
            f"{change.flag}{' ' + change.value if change.value is not None else ''}: {change.reason}"
        )
        self.dropin = write_retry_dropin(
            self.unit_dir,
            self.unit,
            render_retry_dropin(self.words, self.notes),
            None if self.local_dropin else self.systemctl.runner,
        )
        self.systemctl.daemon_reload()
        self._check_loaded(self.dropin)
        self._note(
            f"wrote {self.dropin}, ran {self.systemctl.name} daemon-reload; systemd now runs it"
        )
        before = self.systemctl.show(self.unit).get("InvocationID", "")
        self.systemctl.start(self.unit, restart=True)
        self._wait_new_invocation(before)
        self._check_running()
        self._restarted = True
        return True

    def _check_loaded(self, dropin: Path) -> None:
        """The manager must read the drop-in and run its ``ExecStart=``: else the change
        would be announced while the old command runs again."""
        words, dropins = self.systemctl.loaded(self.unit)
        if str(dropin) not in dropins:
            raise AdapterError(
                f"wrote {dropin}, but {self.systemctl.name} does not read it "
                f"(DropInPaths={' '.join(dropins) or 'none'}): the change was not made",
                hint="write the drop-in where this manager reads it (no --root), or run as the unit's owner",
            )
        shown_words = [w if isinstance(w, str) else "${" + w.name + "}" for w in words or ()]
        if words is None or not service.same_command(self.words, shown_words, joined=True):
            shown = " ".join(w for w in words or () if isinstance(w, str)) or "none"
            raise AdapterError(
                f"after daemon-reload {self.unit} still runs another command (ExecStart={shown}): "
                "the change was not made",
                hint=f"look at `{self.systemctl.name} cat {self.unit}` for a later drop-in overriding {dropin.name}",
            )

    def _check_running(self) -> None:
        """The new run's own argument line (``/proc/MAINPID/cmdline``) has the change."""
        end = self.clock.monotonic() + self.start_timeout_seconds
        while True:
            state = self.systemctl.show(self.unit)
            pid = int(state.get("MainPID") or 0)
            if pid:
                argv = self.systemctl.cmdline(pid)
                if argv is not None:
                    # a script's interpreter (its #! line) comes first in /proc/PID/cmdline
                    if not any(service.same_command(self.words, argv[i:]) for i in (0, 1)):
                        raise AdapterError(
                            f"{self.unit} was restarted, but its new run (pid {pid}) has another "
                            f"command line: {' '.join(argv)}",
                            hint=f"look at `{self.systemctl.name} status {self.unit}`",
                        )
                    return
            if state.get("ActiveState") in ("failed", "inactive") or self.clock.monotonic() >= end:
                self._note(
                    f"{self.unit}: the new run's command line could not be read "
                    f"(state {state.get('ActiveState', '?')}/{state.get('SubState', '?')})"
                )
                return
            self.clock.sleep(0.2)

    def _note(self, text: str) -> None:
        if self.on_note is not None:
            self.on_note(text)
