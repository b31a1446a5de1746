"""`bringup unit --run-as USER` against a real systemd 252: the unit runs as a non-root user
(User=, Group=), reads its secret from the env file given to that user, and reaches ready."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bringup.demo import write_readings
from systemd_real.conftest import _unavailable, free_port, install_twin, twin_command, unique

from builders.systemd_ns import BootError, SystemdNamespace, why_not

USER = "daemon"  # a system user that owns nothing; systemd warns of User=nobody


@pytest.fixture(scope="module")
def systemd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SystemdNamespace]:
    """A systemd whose /root shows only the Python bringup runs on, to every user."""
    reason = why_not()
    if reason is not None:
        _unavailable(reason)
    base = tmp_path_factory.mktemp("systemd")
    python, home = Path(os.path.realpath(sys.executable)), Path("/root")
    shown = [python.relative_to(home).parts[0]] if python.is_relative_to(home) else []
    try:
        sd = SystemdNamespace.start(
            base, name=f"bringup-runas-{uuid.uuid4().hex[:6]}", open_root=shown
        )
    except BootError as exc:
        _unavailable(str(exc))
    try:
        yield sd
    finally:
        sd.close()


@pytest.fixture
def public() -> Iterator[Path]:
    """A folder the service user may use (pytest's tmp folders are root's, mode 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="bringup-runas-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_non_root_service_reaches_ready(systemd: SystemdNamespace, public: Path) -> None:
    """User=daemon: the twin, the guard and bringup run all run as daemon; the env file is
    daemon's, mode 0600; `systemctl start` returns at READY=1 and the processes are daemon's."""
    account = pwd.getpwnam(USER)
    name = unique("i27-runas")
    state, hf = public / "state", public / "hf"
    for folder in (state, hf):  # the twin writes its memory into the readings, in one step
        folder.mkdir()
        os.chown(folder, account.pw_uid, account.pw_gid)
    gpus = state / "gpus.json"
    write_readings(gpus)
    os.chown(gpus, account.pw_uid, account.pw_gid)
    command = [
        *twin_command(free_port(), gpus, "ready", "--time-scale", "0.01"),
        "--api-key",
        "sk-runas-1",
    ]
    written = install_twin(
        systemd, name, command, gpus, "--run-as", f"{USER}:{USER}", "--hf-home", str(hf),
        "--working-directory", str(public),
    ).json()  # fmt: skip
    assert isinstance(written, dict)
    text = written["text"]
    assert {f"User={USER}", f"Group={USER}", f"WorkingDirectory={public}"} <= set(text.splitlines())
    assert "sk-runas-1" not in text
    env_file = systemd.etc_bringup / f"{name}.env"
    st = env_file.stat()
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (
        0o600,
        account.pw_uid,
        account.pw_gid,
    )
    verify = systemd.run(
        ["systemd-analyze", "verify", f"/etc/systemd/system/{name}.service"], check=False
    )
    assert (verify.returncode, verify.stderr.strip()) == (0, "")
    unit = f"{name}.service"
    try:
        systemd.start_unit(unit)  # Type=notify: returns at READY=1
        state = systemd.show(unit, "ActiveState", "SubState", "MainPID", "StatusText")
        assert (state["ActiveState"], state["SubState"]) == ("active", "running")
        assert "ready" in state["StatusText"]
        pids = systemd.run(
            ["systemctl", "show", unit, "-p", "ControlGroup", "--value"]
        ).stdout.strip()
        procs = systemd.run(["cat", f"/sys/fs/cgroup{pids}/cgroup.procs"]).stdout.split()
        owners = {
            systemd.run(["stat", "-c", "%U", f"/proc/{p}"], check=False).stdout.strip()
            for p in procs
        }
        owners.discard("")
        assert owners == {USER}, owners
    finally:
        systemd.systemctl("stop", unit)
