"""A real systemd 252 (with journald) as PID 1 of its own namespaces, for tests and demos.

How it boots (``../shared/reference/real-parts.md`` §2): a sub-cgroup of the host's empty
cgroup2 at ``/sys/fs/cgroup/unified`` becomes the root of a new cgroup namespace; inside new
PID, mount, UTS and IPC namespaces a fresh cgroup2 is mounted at ``/sys/fs/cgroup``, ``/run``,
``/dev``, ``/var/log/journal`` and ``/var/lib/systemd`` get private mounts, ``/proc/sys`` and
``/sys`` are read-only (the network namespace is the host's: systemd must not raise its
sysctls), the unit directory is a copy with only journald's dependencies left (so no
``systemd-tmpfiles`` ever touches the shared ``/tmp``), generators are disabled and a test
folder is ``/etc/systemd/system``. Then ``exec /lib/systemd/systemd --system``.

bringup talks to it through its one command runner: ``BRINGUP_COMMAND_PREFIX`` set to
:attr:`SystemdNamespace.prefix` (``nsenter -t PID -m -u -i -p -C``) makes every systemctl,
journalctl and systemd-analyze call run inside the namespaces. The network namespace is
shared, so HTTP probes reach the servers the units start.

Usage::

    with SystemdNamespace.boot(tmp_path, name="i13-x") as sd:
        sd.systemctl("start", "x.service")
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

CGROUP2 = Path("/sys/fs/cgroup/unified")
SYSTEM_UNITS = Path("/usr/lib/systemd/system")
SYSTEMD = "/lib/systemd/systemd"
KEEP_WANTS = {
    "sockets.target.wants": ("systemd-journald.socket", "systemd-journald-dev-log.socket"),
    "sysinit.target.wants": ("systemd-journald.service",),
}

_INNER = r"""
set -e
B=$1
mount --make-rprivate /
mount --bind /sys /sys
mount -o remount,bind,ro /sys
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount --bind /proc/sys /proc/sys
mount -o remount,bind,ro /proc/sys
if [ -e /proc/sysrq-trigger ]; then
  mount --bind /proc/sysrq-trigger /proc/sysrq-trigger
  mount -o remount,bind,ro /proc/sysrq-trigger
fi
mount -t tmpfs -o mode=755,size=64m tmpfs /run
mount --bind /dev "$B/hostdev"
mount -t tmpfs -o mode=755,size=4m tmpfs /dev
for d in null zero full random urandom tty; do
  touch /dev/$d; mount --bind "$B/hostdev/$d" /dev/$d
done
mkdir -p /dev/pts /dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts
ln -s pts/ptmx /dev/ptmx
mount -t tmpfs -o mode=1777,size=2g tmpfs /dev/shm
touch /dev/console
mount --bind "$B/console.log" /dev/console
mount --bind "$B/units" /usr/lib/systemd/system
mount --bind "$B/generators" /usr/lib/systemd/system-generators
mount --bind "$B/etc" /etc/systemd/system
if [ -n "$3" ]; then  # folders of root's home other users' services need (a Python under it)
  mkdir -p "$B/hostroot" && mount --bind /root "$B/hostroot"
  mount -t tmpfs -o mode=755,size=4m tmpfs /root
  for d in $3; do mkdir -p "/root/$d" && mount --bind "$B/hostroot/$d" "/root/$d"; done
fi
mkdir -p /etc/bringup && mount --bind "$B/bringup" /etc/bringup
mount -t tmpfs -o mode=755 tmpfs /var/log/journal 2>/dev/null || { mkdir -p "$B/journal"; mount --bind "$B/journal" /var/log/journal; }
mount -t tmpfs -o mode=755 tmpfs /var/lib/systemd
hostname "$2"
exec env -i container="$2" PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  /lib/systemd/systemd --system --unit=multi-user.target --log-target=journal --show-status=no
"""


class BootError(RuntimeError):
    """systemd could not be booted here (the reason is the message)."""


def why_not() -> str | None:
    """One line saying why a namespaced systemd cannot boot on this machine, or None."""
    if os.geteuid() != 0:
        return "needs root (unshare of PID/mount/cgroup namespaces)"
    if not Path(SYSTEMD).exists():
        return "systemd is not installed (apt-get install systemd)"
    for tool in ("unshare", "nsenter", "systemctl", "journalctl"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not (CGROUP2 / "cgroup.procs").exists():
        if Path("/sys/fs/cgroup/cgroup.procs").exists():
            return None
        return "no cgroup2 hierarchy at /sys/fs/cgroup/unified or /sys/fs/cgroup"
    return None


def _cgroup_root() -> Path:
    return CGROUP2 if (CGROUP2 / "cgroup.procs").exists() else Path("/sys/fs/cgroup")


class SystemdNamespace:
    """One booted systemd; :meth:`close` stops it and removes its cgroup."""

    def __init__(self, base: Path, name: str, launcher: subprocess.Popen[bytes], cgroup: Path):
        self.base = base
        self.name = name
        self.launcher = launcher
        self.cgroup = cgroup
        self.pid = 0  # the host PID of the namespace's PID 1
        self.etc = base / "etc"  # /etc/systemd/system inside
        self.etc_bringup = base / "bringup"  # /etc/bringup inside (bringup unit's env files)

    # -- booting -------------------------------------------------------------------------------

    @classmethod
    @contextlib.contextmanager
    def boot(cls, base: Path, *, name: str, timeout: float = 30.0) -> Iterator[SystemdNamespace]:
        sd = cls.start(base, name=name, timeout=timeout)
        try:
            yield sd
        finally:
            sd.close()

    @classmethod
    def start(
        cls, base: Path, *, name: str, timeout: float = 30.0, open_root: Sequence[str] = ()
    ) -> SystemdNamespace:
        """Boot one. ``open_root``: folders of ``/root`` to show, alone, in a ``/root`` every
        user may enter (so services run as another user can start a Python installed there)."""
        reason = why_not()
        if reason:
            raise BootError(reason)
        base.mkdir(parents=True, exist_ok=True)
        _prepare(base)
        cgroup = _cgroup_root() / f"{name}-{uuid.uuid4().hex[:8]}"
        cgroup.mkdir()
        launch = (
            f"echo $$ > {shlex.quote(str(cgroup / 'cgroup.procs'))} && exec unshare --fork --pid"
            ' --mount --mount-proc --uts --ipc --cgroup sh -c "$0" inner "$1" "$2" "$3"'
        )
        launcher = subprocess.Popen(
            ["sh", "-c", launch, _INNER, str(base), name, " ".join(open_root)],
            stdin=subprocess.DEVNULL,
            stdout=(base / "launcher.log").open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        sd = cls(base, name, launcher, cgroup)
        try:
            sd._wait_running(timeout)
        except BaseException:
            sd.close()
            raise
        return sd

    def _wait_running(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            if self.launcher.poll() is not None:
                log = (self.base / "launcher.log").read_text(errors="replace").strip()
                raise BootError(
                    f"systemd exited at boot ({self.launcher.returncode}): {log[-300:]}"
                )
            if not self.pid:
                self.pid = _child_pid(self.launcher.pid)
            if self.pid and _comm(self.pid) == "systemd":
                done = self.run(["systemctl", "is-system-running"], check=False, timeout=10)
                state = done.stdout.strip()
                if state in ("running", "degraded"):
                    return
            time.sleep(0.05)
        raise BootError(f"systemd did not reach running within {timeout:g}s (state {state!r})")

    # -- talking to it ---------------------------------------------------------------------------

    @property
    def prefix(self) -> list[str]:
        """The command prefix that runs a command inside the namespaces (nsenter, with the
        signals a stopped reader gets passed on: see ns_exec.py)."""
        return [sys.executable, str(Path(__file__).with_name("ns_exec.py")), str(self.pid)]

    @property
    def prefix_text(self) -> str:
        return shlex.join(self.prefix)

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """An environment for bringup that points its command runner at this systemd."""
        env = dict(os.environ if base is None else base)
        env["BRINGUP_COMMAND_PREFIX"] = self.prefix_text
        return env

    def run(
        self, argv: Sequence[str], *, check: bool = True, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["nsenter", "-t", str(self.pid), "-m", "-u", "-i", "-p", "-C", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"{shlex.join(argv)} exited {done.returncode}: {done.stderr.strip() or done.stdout.strip()}"
            )
        return done

    def systemctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run(["systemctl", *args], check=check)

    def start_unit(self, unit: str, *, block: bool = True) -> None:
        """``systemctl start`` (Type=notify: it returns at READY=1); on failure the assertion
        carries the unit's journal."""
        done = self.run(
            ["systemctl", "start", *([] if block else ["--no-block"]), unit], check=False
        )
        if done.returncode != 0:
            raise AssertionError(
                f"systemctl start {unit}: {done.stderr.strip()}\n{self.journal(unit)[-3000:]}"
            )

    def show(self, unit: str, *props: str) -> dict[str, str]:
        out = self.systemctl("show", unit, "--property=" + ",".join(props)).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def journal(self, unit: str) -> str:
        """The unit's journal (all its invocations), message text only."""
        return self.run(["journalctl", "-u", unit, "-o", "cat", "--no-pager"], check=False).stdout

    def wait_for(
        self, unit: str, predicate: object, *, timeout: float = 60.0, props: Sequence[str] = ()
    ) -> dict[str, str]:
        """Poll ``systemctl show`` until ``predicate(props)`` is true; the last props."""
        names = tuple(props) or ("ActiveState", "SubState", "Result", "NRestarts", "MainPID")
        deadline = time.monotonic() + timeout
        state: dict[str, str] = {}
        while time.monotonic() < deadline:
            state = self.show(unit, *names)
            if predicate(state):  # type: ignore[operator]
                return state
            time.sleep(0.1)
        raise AssertionError(f"{unit} did not get there within {timeout:g}s: {state}")

    # -- stopping ------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every service, then PID 1 (SIGKILL at its last step), then the cgroup."""
        if self.pid and self.launcher.poll() is None:
            with contextlib.suppress(Exception):
                self.run(
                    ["systemctl", "stop", "--all", "--type=service", "--no-block", "*.service"],
                    check=False,
                    timeout=10,
                )
                self._wait_services_gone(5.0)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        if self.launcher.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.launcher.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.launcher.wait(timeout=10)
        _remove_cgroup(self.cgroup)

    def _wait_services_gone(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.run(
                [
                    "systemctl",
                    "list-units",
                    "--type=service",
                    "--state=deactivating",
                    "--no-legend",
                ],
                check=False,
                timeout=5,
            ).stdout
            if not out.strip():
                return
            time.sleep(0.1)


def _prepare(base: Path) -> None:
    units = base / "units"
    if units.exists():
        shutil.rmtree(units)
    shutil.copytree(SYSTEM_UNITS, units, symlinks=True)
    for folder in list(units.iterdir()):
        if folder.name.endswith((".wants", ".requires")) and folder.is_dir():
            keep = KEEP_WANTS.get(folder.name, ())
            for entry in folder.iterdir():
                if entry.name not in keep:
                    entry.unlink()
    for name in ("generators", "etc", "bringup", "hostdev"):
        (base / name).mkdir(exist_ok=True)
    (base / "console.log").touch()
    mask = base / "etc/systemd-journald-audit.socket"
    if not mask.is_symlink():
        mask.symlink_to("/dev/null")


def _child_pid(pid: int) -> int:
    """The first child of ``pid`` (unshare --fork's child, PID 1 inside), or 0."""
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            words = task.read_text().split()
            if words:
                return int(words[0])
    return 0


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _remove_cgroup(path: Path) -> None:
    """rmdir the cgroup bottom-up (systemd made sub-cgroups in it); kill what is left."""
    if not path.exists():
        return
    for _ in range(50):
        procs = list(path.rglob("cgroup.procs"))
        pids = []
        for f in procs:
            with contextlib.suppress(OSError):
                pids += [int(x) for x in f.read_text().split()]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        dirs = sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        for d in [*dirs, path]:
            with contextlib.suppress(OSError):
                d.rmdir()
        if not path.exists():
            return
        time.sleep(0.05)
