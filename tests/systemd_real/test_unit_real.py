"""`bringup unit --install` against a real systemd 252: the files where the manager reads them,
daemon-reload, `systemd-analyze verify` clean, Type=notify READY=1 after the answer, and a
`systemctl stop` while loading ending the unit inactive (not failed)."""

from __future__ import annotations

import stat
import time
from pathlib import Path

from systemd_real.conftest import bringup, free_port, install_twin, readings, twin_command, unique

from builders.systemd_ns import SystemdNamespace

FAST = (
    "--time-scale",
    "0.01",
)


def test_install_verify_and_start_to_ready(systemd: SystemdNamespace, workdir: Path) -> None:
    """The unit and its 0600 env file land in the namespaced /etc/systemd/system (through the
    runner), the manager is reloaded and knows the unit, `systemd-analyze verify` says
    nothing, and `systemctl start` returns once bringup run sent READY=1."""
    name = unique("i13-ready")
    gpus = readings(workdir)
    command = twin_command(free_port(), gpus, "ready", *FAST)
    written = install_twin(systemd, name, command, gpus, "--env", "HF_TOKEN=hf_secret_1").json()
    assert written["daemon_reload"] is True  # type: ignore[index]
    unit_file = systemd.etc / f"{name}.service"
    env_file = systemd.etc_bringup / f"{name}.env"  # /etc/bringup/NAME.env inside
    assert unit_file.is_file()
    assert "hf_secret_1" not in unit_file.read_text()
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert systemd.show(f"{name}.service", "LoadState")["LoadState"] == "loaded"
    verify = systemd.run(
        ["systemd-analyze", "verify", f"/etc/systemd/system/{name}.service"], check=False
    )
    assert (verify.returncode, verify.stderr.strip()) == (0, "")
    systemd.start_unit(f"{name}.service")  # Type=notify: returns at READY=1
    state = systemd.show(f"{name}.service", "ActiveState", "SubState", "StatusText")
    assert (state["ActiveState"], state["SubState"]) == ("active", "running")
    assert "ready" in state["StatusText"]
    systemd.systemctl("stop", f"{name}.service")


def test_stop_while_loading_ends_inactive_not_failed(
    systemd: SystemdNamespace, workdir: Path
) -> None:
    """SIGTERM from `systemctl stop` makes bringup stop the server and exit 143, which the
    unit's SuccessExitStatus= counts as a stop: inactive, Result=success, no restart."""
    name = unique("i13-stop")
    gpus = readings(workdir)
    install_twin(systemd, name, twin_command(free_port(), gpus, "slow_load"), gpus)
    unit = f"{name}.service"
    systemd.systemctl("start", "--no-block", unit)
    deadline = time.monotonic() + 60
    while "Starting to load model" not in systemd.journal(unit):
        assert time.monotonic() < deadline, systemd.journal(unit)[-2000:]
        time.sleep(0.2)
    assert systemd.show(unit, "ActiveState")["ActiveState"] == "activating"
    systemd.systemctl("stop", unit)
    state = systemd.show(unit, "ActiveState", "Result", "ExecMainStatus", "NRestarts")
    assert state["ActiveState"] == "inactive", state
    assert state["Result"] == "success"
    assert state["NRestarts"] == "0"
    journal = systemd.journal(unit)
    assert "bringup: interrupted in weights_loading before a verdict" in journal
    assert f"{unit}: Deactivated successfully." in journal


def test_bringup_reaches_only_the_namespaced_manager(
    systemd: SystemdNamespace, workdir: Path
) -> None:
    """`status` through the prefix sees the namespaced unit; the host's own systemctl is
    never what answered (it refuses here: PID 1 is not systemd)."""
    name = unique("i13-seen")
    gpus = readings(workdir)
    install_twin(systemd, name, twin_command(free_port(), gpus, "ready", *FAST), gpus)
    result = bringup(systemd, "status", name, "--json", "--gpus-from", str(gpus))
    report = result.json()
    assert report["error"] is None  # type: ignore[index]
    assert report["state"]["active_state"] == "inactive"  # type: ignore[index]
