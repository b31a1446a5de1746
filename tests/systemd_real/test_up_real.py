"""`bringup up` against a real systemd 252 with units around the engine twin: ready (exit 0
as soon as the unit's own run verified the answer), a failure caught while systemd still says
activating (the seed's story), `--retry` verified in systemd's own view of the unit."""

from __future__ import annotations

from pathlib import Path

from systemd_real.conftest import bringup, free_port, install_twin, readings, twin_command, unique

from builders.systemd_ns import SystemdNamespace

FAST = ("--time-scale", "0.01")


def test_up_returns_at_ready_with_exit_0(systemd: SystemdNamespace, workdir: Path) -> None:
    """The unit becomes active (READY=1 after its own smoke request): `up` exits 0 with the
    model's answer from the port of the command inside the unit, each phase shown once."""
    name = unique("i13-up")
    gpus = readings(workdir)
    port = free_port()
    install_twin(systemd, name, twin_command(port, gpus, "ready", *FAST), gpus)
    result = bringup(systemd, "up", name, "--deadline", "120s", "--gpus-from", str(gpus))
    assert result.code == 0, result.out + result.err
    assert f"127.0.0.1:{port}" in result.out
    phases = [line.split("] ", 1)[1] for line in result.out.splitlines() if "] phase " in line]
    assert "phase weights_loading: loading weights" in phases
    assert len(phases) == len(set(phases)), result.out  # each phase once: no echo of the unit's run
    assert result.out.count("bringup: timeline:") == 1
    assert systemd.show(f"{name}.service", "ActiveState")["ActiveState"] == "active"
    systemd.systemctl("stop", f"{name}.service")


def test_up_catches_the_warmup_oom_while_systemd_says_activating(
    systemd: SystemdNamespace, workdir: Path
) -> None:
    """The seed's story: the sampler-warmup OOM. `up` exits 1 with the root-cause line and
    the remedy while `systemctl is-active` still says activating (Restart= will try again)."""
    name = unique("i13-oom")
    gpus = readings(workdir)
    install_twin(
        systemd,
        name,
        twin_command(free_port(), gpus, "oom_warmup", *FAST),
        gpus,
        "--restart-sec",
        "30s",
    )
    result = bringup(systemd, "up", name, "--deadline", "120s", "--gpus-from", str(gpus))
    active = systemd.systemctl("is-active", f"{name}.service", check=False).stdout.strip()
    assert result.code == 1, result.out + result.err
    assert active == "activating"
    assert "FAILED: cuda_oom during warmup" in result.out
    assert "root cause: (Worker_TP" in result.out
    assert "CUDA out of memory" in result.out
    assert "the sampler warmup allocates 1024 x vocabulary float32 logits" in result.out
    assert "(--max-num-seqs 256)" in result.out
    assert result.out.count("bringup: timeline:") == 1
    systemd.systemctl("stop", f"{name}.service")
