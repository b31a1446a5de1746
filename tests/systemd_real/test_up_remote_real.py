"""`bringup up --retry --host` over a real sshd to a real systemd 252. The "remote host" is the
namespaced systemd: the sshd's ForceCommand runs every command of a session inside its
namespaces (the same ns_exec.py prefix the local tests give bringup), so bringup itself runs
without BRINGUP_COMMAND_PREFIX and reaches that systemd through ssh only: the drop-in is
written through the ssh layer, daemon-reload, restart, and the change checked there."""

from __future__ import annotations

from pathlib import Path

from systemd_real.conftest import readings, unique
from systemd_real.retry_story import assert_retry_verified, install_oom_twin

from builders.sshd import SshServer, cli, ssh_env
from builders.systemd_ns import SystemdNamespace


def test_up_retry_over_ssh_writes_and_verifies_the_dropin_on_the_host(
    systemd: SystemdNamespace, host: tuple[SshServer, Path], workdir: Path
) -> None:
    """The sampler-warmup OOM, `up --retry 1 --host`: the drop-in lands where the host's
    systemd reads it, the change is checked there before "attempt 2", the second run is ready."""
    server, config = host
    name = unique("i13-rretry")
    gpus = readings(workdir)
    unit = install_oom_twin(systemd, name, gpus)
    target = f"{server.user}@127.0.0.1:{server.port}"
    code, out, err = cli(
        ["up", name, "--retry", "1", "--host", target, "--deadline", "120s",
         "--gpus-from", str(gpus)],
        ssh_env(config),
    )  # fmt: skip
    assert code == 0, out[-3000:] + err
    assert_retry_verified(systemd, unit, out)  # on the "host", not here:
    assert not Path(f"/etc/systemd/system/{unit}.d/bringup-retry.conf").exists()
    systemd.systemctl("stop", unit)


def test_up_retry_over_ssh_refuses_root(host: tuple[SshServer, Path]) -> None:
    server, config = host
    code, _, err = cli(
        ["up", "x", "--retry", "1", "--root", "/tmp/x", "--host", f"127.0.0.1:{server.port}"],
        ssh_env(config),
    )
    assert code == 2
    assert "--root names a folder on this machine" in err
