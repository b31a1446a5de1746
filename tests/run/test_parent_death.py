"""SIGKILL of bringup (the OOM killer, say) never leaves its server running: the server gets
a parent-death SIGTERM (prctl PR_SET_PDEATHSIG) and stops its own workers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

BRINGUP = str(Path(sys.executable).with_name("bringup"))

# a "server" with a worker of its own, which stops the worker on SIGTERM as engines do
# (seen here: a worker can sit with SIGTERM pending and not die, hence the KILL after a grace)
SERVER = """
import signal, subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
def stop(*_):  # as engines do: TERM the worker, KILL it after a grace
    worker.terminate()
    try:
        worker.wait(5)
    except subprocess.TimeoutExpired:
        worker.kill(); worker.wait()
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("serving", flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux's"
)
def test_sigkill_of_bringup_ends_the_server_and_its_worker(tmp_path: Path) -> None:
    run = subprocess.Popen(
        [
            BRINGUP,
            "run",
            "--stall",
            "0",
            "--url",
            "http://127.0.0.1:9",
            "--",
            sys.executable,
            "-c",
            SERVER,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    family: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 60
        while len(family) < 2:
            assert time.monotonic() < deadline, "the server and its worker never started"
            family = psutil.Process(run.pid).children(recursive=True)
            time.sleep(0.1)
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=10)
        gone, alive = psutil.wait_procs(family, timeout=20)
        assert alive == [], [p.cmdline() for p in alive]
        assert len(gone) == 2
    finally:
        for p in family:  # only what this test started
            if p.is_running():
                p.kill()
        if run.poll() is None:
            run.kill()
        if run.stdout:
            run.stdout.close()


# a server that does nothing on SIGTERM (it dies of it) and a worker that ignores SIGTERM:
# the parent-death signal alone reaches only the server, and the worker was left running
CARELESS = """
import subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"])
print("serving", flush=True)
time.sleep(120)
"""


def _sentinels() -> list[psutil.Process]:
    """Live group sentinels on this machine (any bringup's: filter by group)."""
    return [
        p
        for p in psutil.process_iter(["cmdline", "status"])
        if "bringup-group-sentinel" in (p.info["cmdline"] or []) and p.info["status"] != "zombie"
    ]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's /proc and prctl")
def test_sigkill_of_bringup_ends_the_whole_group_of_a_careless_server(tmp_path: Path) -> None:
    """The server does not stop its worker, the worker ignores SIGTERM: after `kill -9` of
    bringup the group's sentinel TERMs the group and KILLs what is left after the grace."""
    run = subprocess.Popen(
        [BRINGUP, "run", "--stall", "0", "--url", "http://127.0.0.1:9", "--",
         sys.executable, "-c", CARELESS],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    family: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 60
        while len(family) < 2:
            assert time.monotonic() < deadline, "the server and its worker never started"
            family = [p for p in psutil.Process(run.pid).children(recursive=True) if _worker(p)]
            time.sleep(0.1)
        server = family[0]
        sentinels = [p for p in _sentinels() if _pgid(p.pid) == server.pid]
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=10)
        _gone, alive = psutil.wait_procs([*family, *sentinels], timeout=30)
        assert alive == [], [p.cmdline() for p in alive]  # before: the worker, still sleeping
        assert len(sentinels) == 1, "no sentinel in the server's group"
    finally:
        for p in family:  # only what this test started
            if p.is_running():
                p.kill()
        if run.poll() is None:
            run.kill()
        if run.stdout:
            run.stdout.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's /proc and prctl")
def test_a_normal_end_leaves_no_sentinel_and_signals_nothing_else() -> None:
    """The server exits by itself and bringup ends normally: the sentinel of its group is gone
    too, and a process of another group (this test's own sleeper) is never signalled."""
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        done = subprocess.run(
            [BRINGUP, "run", "--stall", "0", "--url", "http://127.0.0.1:9", "--",
             sys.executable, "-c", "import os; print('server pid', os.getpid())"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 1, done.stdout + done.stderr
        group = int(done.stdout.split("server pid ", 1)[1].split()[0])
        deadline = time.monotonic() + 10
        left = [1]
        while left:
            left = [p.pid for p in _sentinels() if _pgid(p.pid) == group]
            assert time.monotonic() < deadline, f"sentinel of group {group} still there"
            time.sleep(0.1)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def _worker(p: psutil.Process) -> bool:
    """The server or its worker (not the group's sentinel, not the spawn step before it)."""
    try:
        return "bringup-group-sentinel" not in p.cmdline() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


# attempt 1 fails by itself (the sampler-warmup OOM, then exit 1); --retry starts attempt 2
# with --max-num-seqs, which serves until it is stopped. Each attempt writes its pid.
RETRIED = """
import os, sys, time
folder = sys.argv[1]
attempt = len(os.listdir(folder)) + 1
if "--max-num-seqs" not in sys.argv:
    print("(EngineCore pid=1) ERROR 11-30 09:47:02 [core.py:700] torch.OutOfMemoryError: "
          "CUDA out of memory occurred when warming up sampler with 1024 dummy requests. "
          "Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing "
          "the engine.", flush=True)
with open(os.path.join(folder, f"attempt{attempt}"), "w") as f:
    f.write(str(os.getpid()))
if "--max-num-seqs" not in sys.argv:
    sys.exit(1)
time.sleep(120)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's /proc and prctl")
def test_the_sentinel_of_a_server_that_ended_by_itself_goes_while_bringup_keeps_going(
    tmp_path: Path,
) -> None:
    """--retry: attempt 1's server exits on its own; while bringup runs attempt 2, attempt 1's
    group has no sentinel left (before: one idle sentinel per ended attempt until bringup
    exited) and attempt 2's group has its one."""
    folder = tmp_path / "attempts"
    folder.mkdir()
    script = tmp_path / "server.py"
    script.write_text(RETRIED)
    run = subprocess.Popen(
        [BRINGUP, "run", "--engine", "vllm", "--retry", "2", "--stall", "0",
         "--url", "http://127.0.0.1:9", "--gpus-from", str(tmp_path / "none.json"), "--",
         sys.executable, str(script), str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        second = folder / "attempt2"
        deadline = time.monotonic() + 60
        while not second.exists() or not second.read_text():
            assert run.poll() is None, "bringup ended before attempt 2"
            assert time.monotonic() < deadline, "attempt 2 never started"
            time.sleep(0.1)
        first, now = int((folder / "attempt1").read_text()), int(second.read_text())
        assert run.poll() is None  # bringup keeps going: attempt 2 is being followed
        mine = [p for p in _sentinels() if _pgid(p.pid) == now]
        deadline = time.monotonic() + 30
        while not mine:  # attempt 2's sentinel is forked as its server starts
            assert time.monotonic() < deadline, "attempt 2's group has no sentinel"
            time.sleep(0.1)
            mine = [p for p in _sentinels() if _pgid(p.pid) == now]
        assert [p for p in _sentinels() if _pgid(p.pid) == first] == []
        assert len(mine) == 1
    finally:
        run.terminate()  # bringup stops attempt 2's server and exits
        run.wait(timeout=60)


# a careless server (as above) whose worker maps one /dev/shm object and holds another
# open: what a killed vLLM -tp 2 leaves behind (its *-cpushm_* buffers)
LEAKY = """
import os, subprocess, sys, time
for name in sys.argv[1:]:
    fd = os.open("/dev/shm/" + name, os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, 4096)
    os.close(fd)
worker = subprocess.Popen([sys.executable, "-c",
    "import mmap, os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "fd = os.open(sys.argv[1], os.O_RDWR); m = mmap.mmap(fd, 4096); os.close(fd); "
    "held = os.open(sys.argv[2], os.O_RDWR); print('mapped', flush=True); time.sleep(120)",
    "/dev/shm/" + sys.argv[1], "/dev/shm/" + sys.argv[2]], stdout=subprocess.PIPE)
worker.stdout.readline()
print("serving", flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's /proc and /dev/shm")
def test_sigkill_of_bringup_leaves_no_shm_of_its_server(tmp_path: Path) -> None:
    """`kill -9` of bringup: once the sentinel has ended the group, the /dev/shm objects the
    group mapped or held open when bringup died are removed (bringup, dead, cannot); another
    run's is untouched. (What bringup saw earlier and told the sentinel: test_shm_cleanup.)"""
    tag = f"i22pd{os.getpid()}"
    mapped, opened, theirs = f"{tag}-cpushm_0", f"{tag}-psm_1", f"{tag}-theirs"
    Path("/dev/shm", theirs).write_bytes(b"x")
    run = subprocess.Popen(
        [BRINGUP, "run", "--stall", "0", "--url", "http://127.0.0.1:9", "--",
         sys.executable, "-c", LEAKY, mapped, opened],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    family: list[psutil.Process] = []
    try:
        assert run.stdout is not None
        for line in run.stdout:  # the server says it serves once its worker mapped the object
            if b"serving" in line:
                break
        family = [p for p in psutil.Process(run.pid).children(recursive=True) if _worker(p)]
        server = next(p for p in family if p.ppid() == run.pid)
        sentinels = [p for p in _sentinels() if _pgid(p.pid) == server.pid]
        assert len(sentinels) == 1
        assert Path("/dev/shm", mapped).exists()
        assert Path("/dev/shm", opened).exists()
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=10)
        _gone, alive = psutil.wait_procs([*family, *sentinels], timeout=30)
        assert alive == [], [p.cmdline() for p in alive]
        assert not Path("/dev/shm", mapped).exists()
        assert not Path("/dev/shm", opened).exists()
        assert Path("/dev/shm", theirs).exists()
    finally:
        for p in family:  # only what this test started
            if p.is_running():
                p.kill()
        if run.poll() is None:
            run.kill()
        if run.stdout:
            run.stdout.close()
        for name in (mapped, opened, theirs):
            Path("/dev/shm", name).unlink(missing_ok=True)
