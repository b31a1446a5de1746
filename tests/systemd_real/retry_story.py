"""The `up --retry` story under real systemd, shared by the local and the over-ssh tests: the
sampler-warmup OOM twin as a unit that Restart= tries again, and what must hold after `up
--retry 1` fixed it (the drop-in where systemd reads it, checked before "attempt 2", the
restarted run with the new flag, ready)."""

from __future__ import annotations

from pathlib import Path

from systemd_real.conftest import free_port, install_twin, twin_command

from builders.systemd_ns import SystemdNamespace


def install_oom_twin(systemd: SystemdNamespace, name: str, gpus: Path) -> str:
    """The twin failing its sampler warmup as unit ``name`` (Restart= after 30 s); its unit."""
    command = twin_command(free_port(), gpus, "oom_warmup", "--time-scale", "0.01")
    install_twin(systemd, name, command, gpus, "--restart-sec", "30s")
    return f"{name}.service"


def assert_retry_verified(systemd: SystemdNamespace, unit: str, out: str) -> None:
    """The drop-in is where this systemd reads it and checked there before "attempt 2"; the
    unit now runs --max-num-seqs 256 (systemctl show and the process's own argument line)."""
    dropin = f"/etc/systemd/system/{unit}.d/bringup-retry.conf"
    assert (systemd.etc / f"{unit}.d/bringup-retry.conf").is_file()
    checked = out.index(f"wrote {dropin}, ran systemctl daemon-reload; systemd now runs it")
    announced = out.index("retry 1/1: attempt 2 with --max-num-seqs 256")
    assert checked < announced
    assert "FAILED: cuda_oom during warmup" in out[:checked]
    assert "READY: " in out[announced:]
    state = systemd.show(unit, "ActiveState", "DropInPaths", "ExecStart", "MainPID")
    assert state["ActiveState"] == "active"
    assert dropin in state["DropInPaths"].split()
    assert "--max-num-seqs 256" in state["ExecStart"]
    cmdline = (Path(f"/proc/{systemd.pid}/root/proc") / state["MainPID"] / "cmdline").read_bytes()
    assert b"--max-num-seqs\x00256" in cmdline
