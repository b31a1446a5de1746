"""``--retry`` in-process: the retry loop, a child's attempts and a unit's attempts (the
drop-in, daemon-reload, restart) with a scripted source, a fake server and a fake clock.

The real-process layer is tests/service_up/test_run_retry.py (the engine twin)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bringup.adapters.sources.items import Source
from bringup.core.gpu import GpuReading
from bringup.core.live import LiveEvent, StartupResult
from bringup.follow.loop import run_startup
from bringup.follow.retry import ChildAttempts, UnitAttempts, run_with_retry, wait_for_free_gpus
from bringup.follow.types import Observer, StartupConfig
from follower.fakes import (
    FakeClock,
    FakeGpus,
    FakeServer,
    GiB,
    RecordingObserver,
    ScriptedSource,
    exit_at,
    lines,
)
from follower.test_loop import COMMAND, OOM, startup

BAD_ARGS = "vllm serve: error: unrecognized arguments: --bogus"


def scenario(argv: tuple[str, ...] | list[str]) -> tuple[list[tuple[float, Any]], float | None]:
    """The sampler warmup OOM unless --max-num-seqs was lowered; then ready at 6 s."""
    if "--max-num-seqs" in argv:
        return startup(), 6.0
    return [*startup(), *lines((4.0, OOM)), exit_at(4.5, 1)], None


class Follower:
    """A ``Follow`` that runs the real loop on fakes; keeps each attempt's clock and server."""

    def __init__(self) -> None:
        self.servers: list[FakeServer] = []
        self.configs: list[StartupConfig] = []

    def __call__(
        self,
        config: StartupConfig,
        *,
        source: Source | None = None,
        observer: Observer | None = None,
        on_event: Any = None,
        clock: Any = None,
        follow: bool = True,
    ) -> StartupResult:
        self.configs.append(config)
        if isinstance(source, ScriptedSource):
            fake_clock = source.clock
            ready_at = getattr(source, "ready_at", None)
        else:
            fake_clock = FakeClock()
            script, ready_at = scenario(config.argv)
            source = ScriptedSource(fake_clock, script, command=list(config.argv))
        server = FakeServer(fake_clock, ready_at=ready_at)
        self.servers.append(server)
        return run_startup(
            config,
            source=source,
            prober=server.prober,
            gpus=FakeGpus(fake_clock),
            clock=fake_clock,
            notify=None,
            observer=observer,
            on_event=on_event,
            follow=follow,
            threads=False,
        )


def child_attempts(**kw: Any) -> tuple[ChildAttempts, list[RecordingObserver], Follower]:
    observers: list[RecordingObserver] = []

    def make(number: int) -> Observer:
        observers.append(RecordingObserver())
        return observers[-1]

    follower = Follower()
    config = StartupConfig(argv=tuple(COMMAND), exit_when_ready=True)
    attempts = ChildAttempts(config, make, follow=follower, gpus=FakeGpus(FakeClock()), **kw)
    return attempts, observers, follower


def test_sampler_oom_is_remedied_and_the_second_attempt_is_ready():
    """Attempt 1 dies in the sampler warmup; --max-num-seqs is lowered; attempt 2 is ready."""
    attempts, observers, follower = child_attempts()
    retries: list[Any] = []
    outcome = run_with_retry(attempts, COMMAND, 2, on_retry=retries.append)
    assert outcome.exit_code == 0
    assert [(r.attempt, r.change.flag, r.change.value) for r in retries] == [
        (2, "--max-num-seqs", "256")
    ]
    first, second = outcome.attempts
    assert (first.outcome.value, first.failure_class, first.phase) == (
        "failed",
        "cuda_oom",
        "kv_cache_alloc",  # the last phase the scripted log reached
    )
    assert first.change is not None
    assert first.change.flag == "--max-num-seqs"
    assert second.argv[-2:] == ("--max-num-seqs", "256")
    assert second.change is None
    assert follower.configs[1].argv == second.argv
    # each attempt's human output is closed; the last summary carries every attempt
    assert [len(o.closed) for o in observers] == [1, 1]
    assert [a["attempt"] for a in outcome.result.summary["attempts"]] == [1, 2]


def test_no_retries_left_stops_with_the_reason():
    """--retry 0: one attempt, and the reason it was not retried."""
    attempts, _, _ = child_attempts()
    stops: list[Any] = []
    outcome = run_with_retry(attempts, COMMAND, 0, on_stop=stops.append)
    assert outcome.exit_code == 1
    (only,) = outcome.attempts
    assert only.stopped_because == "no --retry given"
    assert [d.reason for d in stops] == ["no --retry given"]


def test_a_config_error_is_never_retried():
    """A config_error ends at once: one attempt, exit 1, why it was not retried."""
    attempts, _, follower = child_attempts()

    def bad(config: StartupConfig, **kw: Any) -> StartupResult:
        clock = FakeClock()
        source = ScriptedSource(clock, [*lines((0.1, BAD_ARGS)), exit_at(0.2, 2)])
        return follower(config, source=source, **kw)

    attempts.follow = bad
    outcome = run_with_retry(attempts, ["vllm", "serve", "m", "--bogus"], 3)
    (only,) = outcome.attempts
    assert outcome.exit_code == 1
    assert only.failure_class == "config_error"
    assert only.stopped_because is not None
    assert "not retried" in only.stopped_because


def test_an_interrupted_attempt_is_not_retried():
    """Ctrl-C during an attempt: its result, no retry decision."""
    attempts, _, _ = child_attempts()

    def interrupted(config: StartupConfig, **kw: Any) -> StartupResult:
        result = Follower()(config, **kw)
        result.interrupted = True
        return result

    attempts.follow = interrupted
    outcome = run_with_retry(attempts, COMMAND, 3)
    assert len(outcome.attempts) == 1
    assert outcome.attempts[0].stopped_because is None


class FakeSystemctl:
    """A unit whose run depends on the drop-in: the OOM without it, ready with it."""

    name = "systemctl"

    def __init__(self, unit_dir: Path) -> None:
        self.unit_dir = unit_dir
        self.calls: list[str] = []
        self.invocation = 0
        self.active = "inactive"

    def show(self, unit: str) -> dict[str, str]:
        return {
            "LoadState": "loaded",
            "ActiveState": self.active,
            "InvocationID": f"inv{self.invocation}" if self.invocation else "",
            "MainPID": "4242" if self.invocation else "0",
        }

    def exec_start(self, unit: str) -> tuple[str, ...]:
        return ("/usr/bin/vllm", *COMMAND[1:])

    def start(self, unit: str, *, restart: bool = False) -> None:
        self.calls.append("restart" if restart else "start")
        self.invocation += 1
        self.active = "activating"

    def daemon_reload(self) -> None:
        self.calls.append("daemon-reload")

    def loaded(self, unit: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """What a manager reading ``unit_dir`` would have loaded after daemon-reload."""
        dropin = self.unit_dir / f"{unit}.d/bringup-retry.conf"
        if not dropin.exists():
            return self.exec_start(unit), ()
        line = [x for x in dropin.read_text().splitlines() if x.startswith("ExecStart=/")][-1]
        return tuple(line.removeprefix("ExecStart=").split()), (str(dropin),)

    def cmdline(self, pid: int) -> list[str]:
        return list(self.loaded("vllm-x.service")[0])

    def unit_source(self, unit: str, environ: Any) -> ScriptedSource:
        dropin = self.unit_dir / f"{unit.removesuffix('.service')}.service.d/bringup-retry.conf"
        argv = dropin.read_text().split() if dropin.exists() else list(COMMAND)
        clock = FakeClock()
        script, ready_at = scenario(argv)
        source = ScriptedSource(clock, script, command=None)
        source.ready_at = ready_at  # type: ignore[attr-defined]
        return source


def test_up_retry_writes_the_dropin_reloads_and_restarts(tmp_path: Path):
    """A unit's retry: the drop-in with the changed ExecStart=, daemon-reload, restart, ready."""
    systemctl = FakeSystemctl(tmp_path)
    notes: list[str] = []
    follower = Follower()
    attempts = UnitAttempts(
        "vllm-x.service",
        systemctl,  # type: ignore[arg-type]
        StartupConfig(url="http://127.0.0.1:8123"),
        lambda n: RecordingObserver(),
        unit_dir=tmp_path,
        clock=FakeClock(),
        on_note=notes.append,
        follow=follower,
        gpus=FakeGpus(FakeClock()),
        local_dropin=True,
    )
    argv = attempts.server_argv()
    outcome = run_with_retry(attempts, argv, 2)
    assert outcome.exit_code == 0
    assert systemctl.calls == ["start", "daemon-reload", "restart"]
    dropin = tmp_path / "vllm-x.service.d/bringup-retry.conf"
    assert attempts.dropin == dropin
    text = dropin.read_text()
    assert "ExecStart=\n" in text
    assert "--max-num-seqs 256" in text
    assert any("daemon-reload" in n for n in notes)
    assert all(c.argv == () and c.exit_when_ready for c in follower.configs)


def test_up_follows_a_unit_that_is_already_running(tmp_path: Path):
    """An active unit is followed as it is, not restarted."""
    systemctl = FakeSystemctl(tmp_path)
    systemctl.invocation, systemctl.active = 1, "active"
    notes: list[str] = []
    attempts = UnitAttempts(
        "vllm-x.service",
        systemctl,  # type: ignore[arg-type]
        StartupConfig(url="http://127.0.0.1:8123"),
        lambda n: RecordingObserver(),
        unit_dir=tmp_path,
        clock=FakeClock(),
        on_note=notes.append,
        follow=Follower(),
    )
    outcome = run_with_retry(attempts, attempts.server_argv(), 0)
    assert systemctl.calls == []
    assert outcome.exit_code == 1
    assert notes == ["vllm-x.service is already active: following its current run"]


def gpus_busy_until(clock: FakeClock, t: float) -> Any:
    def read() -> list[GpuReading]:
        used = 70 * GiB if clock.elapsed() < t else 1 * GiB
        return [GpuReading(0, "H100", "GPU-0", 80 * GiB, used)]

    return read


def test_waiting_for_the_gpus_ends_when_they_are_free():
    """The wait for free GPUs ends as soon as the memory is back (30 fake seconds)."""
    clock = FakeClock()
    assert wait_for_free_gpus(gpus_busy_until(clock, 30.0), 0.9, 300.0, clock=clock)
    assert 30.0 <= clock.elapsed() < 32.0


def test_waiting_for_the_gpus_gives_up_at_the_timeout():
    """GPUs still busy at the timeout: False, after exactly the timeout."""
    clock = FakeClock()
    assert not wait_for_free_gpus(gpus_busy_until(clock, 1e9), 0.9, 60.0, clock=clock)
    assert 60.0 <= clock.elapsed() < 61.0


def test_ready_event_reaches_on_event():
    """The follower reports to ``on_event`` as well as to the observer."""
    seen: list[LiveEvent] = []
    Follower()(
        StartupConfig(argv=("vllm", "serve", "m", "--max-num-seqs", "8"), exit_when_ready=True),
        on_event=seen.append,
    )
    assert "ready" in [e.event for e in seen]
