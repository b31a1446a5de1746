"""A server's /dev/shm leftovers are removed by ownership when it is gone, real processes.

Only objects one of the server's own processes was seen mapping or holding open are removed,
and only once no process maps or holds them: never an object the test made itself, one a
process outside the server's session still maps, or a name another process made again (a new
inode). Real vLLM (-tp 2, its CPU build's ``*-cpushm_*``) is tests/vllm_real/test_shm_vllm.py.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from bringup.adapters.process import ChildProcess
from bringup.adapters.shm import ShmLedger

pytestmark = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and os.path.isdir("/dev/shm")),
    reason="Linux's /proc and /dev/shm",
)

BRINGUP = str(Path(sys.executable).with_name("bringup"))
OOM = (
    "(EngineCore pid=1) ERROR 11-30 09:47:02 [core.py:700] torch.OutOfMemoryError: CUDA out "
    "of memory occurred when warming up sampler with 1024 dummy requests. Please try lowering "
    "`max_num_seqs` or `gpu_memory_utilization` when initializing the engine."
)

# argv: JSON {"map": [names], "fd": [names], "daemon": name or null, "go": path or null,
# "say": a line to print}. Maps each "map" object, keeps an fd on each "fd" one, hands
# "daemon" (mapped too) to a process of its own session (it outlives the server), prints "made", then
# exits 0 once the "go" file exists (or sleeps until it is stopped).
HOLDER = """
import json, mmap, os, subprocess, sys, time
spec = json.loads(sys.argv[1])
def make(name):
    fd = os.open("/dev/shm/" + name, os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, 4096)
    return fd
maps, fds = [], []
for name in spec["map"]:
    fd = make(name)
    maps.append(mmap.mmap(fd, 4096))
    os.close(fd)
for name in spec["fd"]:
    fds.append(make(name))
if spec.get("daemon"):  # mapped by the server and by a process of another session
    fd = make(spec["daemon"])
    maps.append(mmap.mmap(fd, 4096))
    os.close(fd)
    code = ("import mmap, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); "
            "m = mmap.mmap(fd, 4096); os.close(fd); print(os.getpid(), flush=True); time.sleep(300)")
    d = subprocess.Popen([sys.executable, "-c", code, "/dev/shm/" + spec["daemon"]],
                         stdout=subprocess.PIPE, start_new_session=True)
    print("daemon", d.stdout.readline().decode().strip(), flush=True)
if spec.get("say"):
    print(spec["say"], flush=True)
print("made", flush=True)
while spec.get("go") is None or not os.path.exists(spec["go"]):
    if spec.get("release") and os.path.exists(spec["release"]) and (maps or fds):
        [m.close() for m in maps]; [os.close(fd) for fd in fds]; maps, fds = [], []
        print("released", flush=True)
    time.sleep(0.05)
"""


@pytest.fixture
def tag(tmp_path: Path) -> Iterator[str]:
    """A prefix for this test's /dev/shm names; whatever is left under it is removed after."""
    name = f"i22t{os.getpid()}-{tmp_path.name}"
    yield name
    for path in Path("/dev/shm").glob(f"{name}*"):
        path.unlink(missing_ok=True)


class Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, _stream: str, batch: list[str]) -> None:
        self.lines.extend(batch)

    def wait_for(self, text: str) -> None:
        deadline = time.monotonic() + 60
        while not any(line.startswith(text) for line in self.lines):
            assert time.monotonic() < deadline, f"never printed {text!r}: {self.lines}"
            time.sleep(0.02)

    def value(self, word: str) -> str:
        return next(line.split()[1] for line in self.lines if line.startswith(word + " "))


def _start(spec: dict[str, object], lines: Lines) -> ChildProcess:
    return ChildProcess.start(
        [sys.executable, "-c", HOLDER, json.dumps(spec)], environ=os.environ, on_lines=lines
    )


def _wait_seen(child: ChildProcess, names: list[str]) -> None:
    """Until the sampler has seen ``names`` in the server (it looks every 2 s)."""
    deadline = time.monotonic() + 30
    while not set(names) <= set(child.shm.seen):
        assert time.monotonic() < deadline, f"never seen: {names} (seen {child.shm.seen})"
        time.sleep(0.05)


def _theirs(tag: str) -> tuple[str, mmap.mmap]:
    """An object of "another run", made and mapped by the test itself."""
    name = f"{tag}-theirs-cpushm_0"
    fd = os.open(f"/dev/shm/{name}", os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, 4096)
    m = mmap.mmap(fd, 4096)
    os.close(fd)
    return name, m


def test_a_stop_removes_what_the_server_held_and_nothing_else(tag: str) -> None:
    mapped, opened = f"{tag}-tp:0-[0-1]-cpushm_0", f"{tag}-psm_1"
    shared = f"{tag}-kept"
    theirs, their_map = _theirs(tag)
    idle = f"{tag}-idle"  # another run's, held by no one: not ours to remove either
    Path("/dev/shm", idle).write_bytes(b"x")
    lines = Lines()
    child = _start({"map": [mapped], "fd": [opened], "daemon": shared, "go": None}, lines)
    daemon = None
    try:
        lines.wait_for("made")
        daemon = psutil.Process(int(lines.value("daemon")))
        child.terminate(5.0)  # sampled just before the SIGTERM: all three are seen
        assert sorted(child.shm_removed) == sorted([mapped, opened])
        assert not Path("/dev/shm", mapped).exists()
        assert not Path("/dev/shm", opened).exists()
        assert Path("/dev/shm", shared).exists()  # the daemon still maps it
        assert Path("/dev/shm", theirs).exists()
        assert Path("/dev/shm", idle).exists()
        assert shared in child.shm.seen  # a candidate, kept only because it is still held
    finally:
        their_map.close()
        if daemon is not None:
            daemon.kill()  # the test's own (started by its server)


def test_a_server_that_ends_by_itself_leaves_nothing_once_released(
    tag: str, tmp_path: Path
) -> None:
    mapped = f"{tag}-cpushm_0"
    go = tmp_path / "go"
    lines = Lines()
    child = _start({"map": [mapped], "fd": [], "daemon": None, "go": str(go)}, lines)
    lines.wait_for("made")
    _wait_seen(child, [mapped])
    go.touch()
    assert child.join() == 0  # it ended by itself: nothing was signalled
    assert child.signals_sent == []
    assert Path("/dev/shm", mapped).exists()  # left behind (never unlinked)
    assert child.release() == [mapped]
    assert not Path("/dev/shm", mapped).exists()


def test_keep_leaves_the_server_its_objects(tag: str, tmp_path: Path) -> None:
    mapped = f"{tag}-cpushm_0"
    lines = Lines()
    child = _start({"map": [mapped], "fd": [], "daemon": None, "go": None}, lines)
    try:
        lines.wait_for("made")
        _wait_seen(child, [mapped])
        child.detach(str(tmp_path / "server.log"))
        assert child.shm_removed == []
        assert Path("/dev/shm", mapped).exists()
    finally:
        os.killpg(child.pgid, 9)  # the test's own server, left running by detach
        child.join()


def test_a_name_made_again_by_someone_else_is_not_removed(tag: str) -> None:
    """The ledger keeps the inode: the same name on a new object is another run's."""
    name = f"{tag}-psm_reused"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, json.dumps({"map": [name], "fd": [], "go": None})],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "made"
        ledger = ShmLedger()
        ledger.sample([holder.pid])
        assert ledger.seen == [name]
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    Path("/dev/shm", name).unlink()
    Path("/dev/shm", name).write_bytes(b"another run's")
    assert ledger.remove_unheld() == []
    assert Path("/dev/shm", name).read_bytes() == b"another run's"


def test_run_reports_what_it_removed(tag: str, tmp_path: Path) -> None:
    """`bringup run`: a server that failed (a root-cause line) and would not exit is stopped;
    the object it mapped is removed and named in the summary; the test's own is untouched."""
    mapped = f"{tag}-tp:0-[0-1]-cpushm_0"
    theirs, their_map = _theirs(tag)
    spec = {"map": [mapped], "fd": [], "daemon": None, "go": None, "say": OOM}
    try:
        done = subprocess.run(
            [BRINGUP, "run", "--engine", "vllm", "--json", "--grace", "1s", "--stall", "0",
             "--url", "http://127.0.0.1:9", "--gpus-from", str(tmp_path / "none.json"), "--",
             sys.executable, "-c", HOLDER, json.dumps(spec)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        summary = json.loads(done.stdout.splitlines()[-1])
        assert done.returncode == 1, done.stderr[-2000:]
        assert summary["failure"]["class"] == "cuda_oom", summary
        assert summary["stopped_by_bringup"] is not None  # it did not exit: stopped
        assert summary["shm_removed"] == [mapped]
        assert not Path("/dev/shm", mapped).exists()
        assert Path("/dev/shm", theirs).exists()
        assert f"removed 1 /dev/shm object the server left behind: {mapped}" in done.stderr
    finally:
        their_map.close()


def test_the_sentinel_removes_what_bringup_told_it_when_bringup_dies(tag: str) -> None:
    """An object the server held open, which bringup saw and told the group's sentinel, and
    then let go of (left behind, held by no one, so the sentinel cannot see it itself):
    bringup "dies" (its end of the sentinel's pipe closes without DISARM), the sentinel ends
    the group and removes it; the test's own object stays."""
    opened = f"{tag}-psm_2"
    theirs, their_map = _theirs(tag)
    lines = Lines()
    release = Path("/dev/shm", f"{tag}-release-flag")  # under the tag: removed afterwards
    spec = {"map": [], "fd": [opened], "daemon": None, "go": None, "release": str(release)}
    child = _start(spec, lines)
    try:
        lines.wait_for("made")
        _wait_seen(child, [opened])
        deadline = time.monotonic() + 30
        while opened not in child._told:  # sent down the pipe after the sample
            assert time.monotonic() < deadline
            time.sleep(0.02)
        release.touch()
        lines.wait_for("released")
        sentinel = [
            p
            for p in psutil.process_iter(["cmdline"])
            if "bringup-group-sentinel" in (p.info["cmdline"] or []) and _pgid(p.pid) == child.pgid
        ]
        assert len(sentinel) == 1
        assert child._alive_fd is not None
        os.close(child._alive_fd)  # as bringup's death would: EOF, no DISARM
        child._alive_fd = None
        assert child.join() == -15  # the sentinel's SIGTERM to the group
        psutil.wait_procs(sentinel, timeout=30)
        assert not sentinel[0].is_running()
        assert not Path("/dev/shm", opened).exists()
        assert Path("/dev/shm", theirs).exists()
    finally:
        their_map.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pgid, 9)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
