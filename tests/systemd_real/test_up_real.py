"""`bringup up` against a real systemd 252 with units around the engine twin: ready (exit 0
as soon as the unit's own run verified the answer), a failure caught while systemd still says
activating (the seed's story), `--retry` verified in systemd's own view of the unit."""

from __future__ import annotations

import json
from pathlib import Path

from systemd_real.conftest import bringup, free_port, install_twin, readings, twin_command, unique
from systemd_real.retry_story import assert_retry_verified, install_oom_twin

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
    install_oom_twin(systemd, name, gpus)
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


def test_up_retry_verifies_the_change_in_systemd_then_ends_ready(
    systemd: SystemdNamespace, workdir: Path
) -> None:
    """`up --retry 1` on the warmup OOM: the drop-in where this systemd reads it, daemon-reload,
    the new ExecStart= in `systemctl show`, the restarted run's own argument line with
    --max-num-seqs 256, and only then "attempt 2"; the second run becomes ready (exit 0)."""
    name = unique("i13-retry")
    gpus = readings(workdir)
    unit = install_oom_twin(systemd, name, gpus)
    result = bringup(
        systemd, "up", name, "--retry", "1", "--deadline", "120s", "--gpus-from", str(gpus)
    )
    assert result.code == 0, result.out[-3000:] + result.err
    assert_retry_verified(systemd, unit, result.out)
    systemd.systemctl("stop", unit)


def test_up_retry_refuses_a_dropin_systemd_does_not_read(
    systemd: SystemdNamespace, workdir: Path
) -> None:
    """The drop-in written under --root (where this systemd does not look): `up` says the
    change was not made, exit 2, and never announces an attempt 2 with it."""
    name = unique("i13-noread")
    gpus = readings(workdir)
    unit = install_oom_twin(systemd, name, gpus)
    root = workdir / "elsewhere"
    result = bringup(
        systemd, "up", name, "--retry", "1", "--root", str(root), "--gpus-from", str(gpus)
    )
    assert result.code == 2, result.out[-2000:] + result.err
    assert (root / f"etc/systemd/system/{unit}.d/bringup-retry.conf").is_file()
    assert "does not read it" in result.err
    assert "the change was not made" in result.err
    assert "attempt 2" not in result.out
    assert systemd.show(unit, "DropInPaths")["DropInPaths"] == ""
    systemd.systemctl("stop", unit)


def test_a_unit_with_an_api_key_becomes_ready_and_up_and_status_use_its_key(
    systemd: SystemdNamespace, workdir: Path
) -> None:
    """`--api-key` moved into the unit's EnvironmentFile= by `bringup unit`: the unit's own
    run probes with the key systemd filled in (READY=1), `up` and `status` read it from the
    env file (exit 0), and a wrong key is an authentication failure at once (exit 1)."""
    name = unique("i13-key")
    unit = f"{name}.service"
    gpus = readings(workdir)
    secret = "sk-i13-never-in-the-unit"
    command = [*twin_command(free_port(), gpus, "ready", *FAST), "--api-key", secret]
    install_twin(systemd, name, command, gpus)
    assert secret not in (systemd.etc / unit).read_text()
    systemd.start_unit(unit)  # READY=1 only after the key-carrying smoke request
    up = bringup(systemd, "up", name, "--deadline", "60s", "--gpus-from", str(gpus))
    assert up.code == 0, up.out[-2000:] + up.err
    assert "already active" in up.out
    status = bringup(systemd, "status", name, "--json", "--gpus-from", str(gpus))
    assert json.loads(status.out)["verdict"] == "ready", status.out
    wrong = bringup(systemd, "up", name, "--api-key", "sk-wrong", "--deadline", "60s")
    assert wrong.code == 1, wrong.out[-2000:]
    assert "authentication failed" in wrong.out
    assert "HTTP 401" in wrong.out
    systemd.systemctl("stop", unit)
