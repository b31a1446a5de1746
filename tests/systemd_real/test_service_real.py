"""Units written by `bringup unit` around the twin, run by a real systemd 252: the guard
holding ExecStartPre while the GPUs are taken, EXTEND_TIMEOUT_USEC past TimeoutStartSec=,
WatchdogSec= fed by bringup run, and `bringup status` in each state systemd reports."""

from __future__ import annotations

import json
import time
from pathlib import Path

from service.gpu_readings import GiB, gpu, write_readings
from systemd_real.conftest import bringup, free_port, install_twin, readings, twin_command, unique

from builders.systemd_ns import SystemdNamespace


def _journal_until(sd: SystemdNamespace, unit: str, text: str, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        journal = sd.journal(unit)
        if text in journal:
            return journal
        assert time.monotonic() < deadline, f"{text!r} not in the journal:\n{journal[-2000:]}"
        time.sleep(0.2)


def test_guard_holds_the_start_until_the_gpus_are_free(
    systemd: SystemdNamespace, workdir: Path
) -> None:
    """An earlier instance still holds 60 GiB on GPU 2: the unit waits in ExecStartPre (the
    guard names the holder in the journal), and starts once the memory is released."""
    name = unique("i13-guard")
    gpus = readings(workdir)
    idle = json.loads(gpus.read_text())["gpus"]
    taken = [dict(g) for g in idle]
    taken[2] = gpu(2, 60 * GiB, [(4242, "VLLM::Worker_TP2", 60 * GiB)], total_bytes=96 * 10**9)
    write_readings(gpus, taken)
    command = twin_command(free_port(), gpus, "ready", "--time-scale", "0.01")
    install_twin(systemd, name, command, gpus, "--guard-timeout", "120s")
    unit = f"{name}.service"
    systemd.start_unit(unit, block=False)
    journal = _journal_until(systemd, unit, "VLLM::Worker_TP2")
    assert "4242" in journal
    state = systemd.show(unit, "ActiveState", "SubState")
    assert (state["ActiveState"], state["SubState"]) == ("activating", "start-pre")
    write_readings(gpus, idle)
    systemd.wait_for(unit, lambda s: s["ActiveState"] == "active", timeout=90)
    assert "free (at most 1000.00 MiB used)" in systemd.journal(unit)
    systemd.systemctl("stop", unit)


def test_extend_timeout_keeps_a_slow_but_progressing_load_alive(
    systemd: SystemdNamespace, workdir: Path
) -> None:
    """TimeoutStartSec=5s, a load of ~15 s that keeps progressing: bringup run's
    EXTEND_TIMEOUT_USEC keeps systemd from killing it, and the unit becomes active."""
    name = unique("i13-extend")
    gpus = readings(workdir)
    command = twin_command(free_port(), gpus, "ready", "--time-scale", "0.05")
    install_twin(systemd, name, command, gpus, "--timeout-start", "5s", "--guard-timeout", "2s")
    unit = f"{name}.service"
    started = time.monotonic()
    systemd.start_unit(unit)  # returns at READY=1, or fails at the timeout
    took = time.monotonic() - started
    state = systemd.show(unit, "ActiveState", "TimeoutStartUSec", "NRestarts")
    assert state["ActiveState"] == "active"
    assert state["TimeoutStartUSec"] == "5s"
    assert took > 5.0  # it really outlived TimeoutStartSec= (else the test proves nothing)
    assert "timed out" not in systemd.journal(unit).lower()
    systemd.systemctl("stop", unit)


def test_watchdog_is_fed_after_ready(systemd: SystemdNamespace, workdir: Path) -> None:
    """WatchdogSec=1s: bringup run sends WATCHDOG=1 while the server is healthy, so the
    unit stays active across several watchdog periods, never restarted."""
    name = unique("i13-dog")
    gpus = readings(workdir)
    command = twin_command(free_port(), gpus, "ready", "--time-scale", "0.01")
    install_twin(systemd, name, command, gpus, "--watchdog-sec", "1s")
    unit = f"{name}.service"
    systemd.start_unit(unit)
    first = systemd.show(unit, "MainPID", "WatchdogUSec")
    assert first["WatchdogUSec"] == "1s"
    time.sleep(4.0)  # four watchdog periods
    state = systemd.show(unit, "ActiveState", "MainPID", "NRestarts")
    assert state["ActiveState"] == "active"
    assert (state["MainPID"], state["NRestarts"]) == (first["MainPID"], "0")
    assert "watchdog timeout" not in systemd.journal(unit).lower()
    systemd.systemctl("stop", unit)


def _status(sd: SystemdNamespace, name: str, gpus: Path) -> tuple[int, dict[str, object]]:
    result = bringup(sd, "status", name, "--json", "--gpus-from", str(gpus))
    return result.code, json.loads(result.out)


def test_status_active_and_answering_is_ready(systemd: SystemdNamespace, workdir: Path) -> None:
    """Active, and the model answers at the port of the command inside the unit: exit 0."""
    name = unique("i13-st-ready")
    gpus = readings(workdir)
    port = free_port()
    install_twin(systemd, name, twin_command(port, gpus, "ready", "--time-scale", "0.01"), gpus)
    systemd.start_unit(f"{name}.service")
    code, report = _status(systemd, name, gpus)
    assert (code, report["verdict"]) == (0, "ready"), report
    assert report["url"] == f"http://127.0.0.1:{port}"
    assert report["ready_since"] is not None
    assert [g["used_bytes"] > 0 for g in report["gpus"]] == [True] * 4  # type: ignore[attr-defined,index]
    systemd.systemctl("stop", f"{name}.service")


def test_status_activating_is_starting(systemd: SystemdNamespace, workdir: Path) -> None:
    """Still loading: starting, exit 3, with the phase the journal reached."""
    name = unique("i13-st-start")
    gpus = readings(workdir)
    install_twin(systemd, name, twin_command(free_port(), gpus, "slow_load"), gpus)
    unit = f"{name}.service"
    systemd.start_unit(unit, block=False)
    _journal_until(systemd, unit, "Starting to load model")
    code, report = _status(systemd, name, gpus)
    assert (code, report["verdict"]) == (3, "starting"), report
    assert report["state"]["active_state"] == "activating"  # type: ignore[index]
    assert report["phase"] in ("weights_loading", "model_init")
    systemd.systemctl("stop", unit)


def test_status_auto_restart_then_failed(systemd: SystemdNamespace, workdir: Path) -> None:
    """The sampler-warmup OOM: between restarts systemd says activating/auto-restart, status
    says failed with the root cause of the run that ended; once the start limit stops the
    restarts, the unit is failed and status still names the root cause (exit 1)."""
    name = unique("i13-st-fail")
    gpus = readings(workdir)
    command = twin_command(free_port(), gpus, "oom_warmup", "--time-scale", "0.01")
    install_twin(systemd, name, command, gpus, "--restart-sec", "3s", "--start-limit-burst", "2")
    unit = f"{name}.service"
    systemd.start_unit(unit, block=False)
    systemd.wait_for(unit, lambda s: s["SubState"] == "auto-restart", timeout=60)
    code, report = _status(systemd, name, gpus)
    assert report["state"]["sub_state"] == "auto-restart"  # type: ignore[index]
    # systemd says activating; the run that just ended died of the OOM: that is the answer
    assert (code, report["verdict"]) == (1, "failed"), report
    assert report["failure"]["class"] == "cuda_oom"  # type: ignore[index]
    systemd.wait_for(unit, lambda s: s["ActiveState"] == "failed", timeout=90)
    code, report = _status(systemd, name, gpus)
    assert report["verdict"] == "failed", report
    assert code == 1, report
    assert report["failure"]["class"] == "cuda_oom"  # type: ignore[index]
    assert report["failure"]["phase"] == "warmup"  # type: ignore[index]
    why = report["why"]
    assert "systemd will not restart it: its start limit (2 starts within 30min) was hit" in why  # type: ignore[operator]
    assert "reset-failed" in why  # type: ignore[operator]
    assert report["state"]["n_restarts"] >= 1  # type: ignore[index,operator]
