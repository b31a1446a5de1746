"""A node's server over a real sshd: output back, exit status, and a stop that wins over a
server that ignores SIGTERM, leaving nothing running."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bringup.adapters.node_process import RemoteServer, run_folder

from builders.sshd import SSHD, SshServer, running_sshd, target_for

pytestmark = pytest.mark.ssh


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    if SSHD is None:
        if os.environ.get("BRINGUP_REQUIRE_REAL") == "1":
            pytest.fail("sshd is required in CI (apt-get install openssh-server)")
        pytest.skip("sshd is not installed (apt-get install openssh-server)")
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


class Seen:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.exit: tuple[int | None, str | None] | None = None
        self.done = threading.Event()

    def line(self, text: str) -> None:
        self.lines.append(text)

    def end(self, code: int | None, error: str | None) -> None:
        self.exit = (code, error)
        self.done.set()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_output_env_and_exit_status_come_back(sshd: SshServer, tmp_path: Path) -> None:
    folder = run_folder(str(tmp_path), "run", 1)
    server = RemoteServer(
        target_for(sshd),
        ["sh", "-c", 'echo "hello $WHO"; exit 3'],
        [("WHO", "node 1")],
        folder,
        grace_seconds=1,
    )
    seen = Seen()
    server.start(seen.line, seen.end)
    assert seen.done.wait(30)
    assert seen.lines == ["hello node 1"]
    assert seen.exit == (3, None)
    assert (Path(folder) / "exit").read_text().strip() == "3"
    assert "hello node 1" in (Path(folder) / "log").read_text()


def test_stop_kills_a_server_that_ignores_sigterm_and_its_children(
    sshd: SshServer, tmp_path: Path
) -> None:
    folder = run_folder(str(tmp_path), "run", 0)
    script = 'trap "" TERM; sleep 300 & echo "child $!"; echo ready; wait'
    server = RemoteServer(target_for(sshd), ["sh", "-c", script], [], folder, grace_seconds=1)
    seen = Seen()
    server.start(seen.line, seen.end)
    deadline = time.monotonic() + 30
    while "ready" not in seen.lines and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(next(x for x in seen.lines if x.startswith("child ")).split()[1])
    leader = int((Path(folder) / "pid").read_text())
    assert _alive(child)
    assert _alive(leader)
    server.stop()
    assert seen.done.is_set()
    assert seen.exit is not None
    assert seen.exit[0] == -9  # SIGTERM ignored: SIGKILL after the grace
    assert not _alive(child)
    assert not _alive(leader)
    assert not server.running


MAPS_SHM = """
import mmap, os, signal, sys, time
maps = []
def make(name):
    fd = os.open("/dev/shm/" + name, os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, 4096)
    maps.append(mmap.mmap(fd, 4096))
    os.close(fd)  # held by the mapping only, as vLLM's shared buffers are
make(sys.argv[1])
# a teardown that makes one more while it dies (deaf to SIGTERM: killed after the grace)
signal.signal(signal.SIGTERM, lambda *_: make(sys.argv[1] + "-late"))
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def test_stop_removes_the_shm_objects_its_server_held_and_no_one_else_s(
    sshd: SshServer, tmp_path: Path
) -> None:
    tag = f"i18t{os.getpid()}"
    ours, theirs = f"{tag}-tp:0-[0-1]-cpushm_0", f"{tag}-other"
    script = tmp_path / "maps_shm.py"
    script.write_text(MAPS_SHM)
    folder = run_folder(str(tmp_path), "run", 0)
    server = RemoteServer(
        target_for(sshd),
        [sys.executable, str(script), ours],
        [],
        folder,
        grace_seconds=0.5,
    )
    seen = Seen()
    try:
        server.start(seen.line, seen.end)
        deadline = time.monotonic() + 30
        while "ready" not in seen.lines and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "ready" in seen.lines
        Path("/dev/shm", theirs).write_bytes(b"x")  # another run's object, made meanwhile
        server.stop()  # SIGKILL after the grace: its mappings go, the objects stay behind
        assert seen.exit is not None
        assert not Path("/dev/shm", ours).exists()  # the wrapper removed what its server held
        assert not Path("/dev/shm", f"{ours}-late").exists()  # made during the grace: too
        assert Path("/dev/shm", theirs).exists()  # never another run's
        removed = (Path(folder) / "shm-removed").read_text().split()
        assert sorted(removed) == sorted([ours, f"{ours}-late"])
    finally:
        for name in (ours, f"{ours}-late", theirs):
            Path("/dev/shm", name).unlink(missing_ok=True)


def test_the_exit_is_told_before_the_wrapper_has_cleaned_up(
    sshd: SshServer, tmp_path: Path
) -> None:
    folder = run_folder(str(tmp_path), "run", 1)
    server = RemoteServer(target_for(sshd), ["sh", "-c", "exit 5"], [], folder, grace_seconds=1)
    states: list[bool] = []

    def end(code: int | None, error: str | None) -> None:
        states.append(server.running)  # the ssh session is still open: the wrapper cleans up
        seen.end(code, error)

    seen = Seen()
    server.start(seen.line, end)
    assert seen.done.wait(30)
    assert seen.exit == (5, None)
    server.stop()  # waits for the wrapper's end
    assert not server.running
    assert len(states) == 1  # told once, not again at the end of the session
