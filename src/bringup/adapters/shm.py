"""/dev/shm objects a server left behind, removed by ownership.

A server killed (or one that never unlinks) leaves its POSIX shared memory behind: vLLM's CPU
build its ``vllm_dist_*-cpushm_*`` buffers (4 MiB each per rank group), Python's
multiprocessing ``psm_*`` and ``sem.mp-*``. ``ShmLedger`` remembers the objects the server's
own processes were seen mapping (``/proc/PID/maps``) or holding open (``/proc/PID/fd``), by
name, device and inode; after the server is gone, ``remove_unheld`` removes those that still
carry the same inode, belong to bringup's user and no live process maps or holds any more.
An object of another run is never a candidate: it was never seen in one of our processes
(a name made again by someone else has another inode).

A process whose ``/proc`` entries cannot be read (another user's, when bringup is not root)
cannot be looked at; the objects removed are bringup's user's own, created ``0600`` by the
engines, which such a process cannot open.

Command line equivalent: ``grep /dev/shm/ /proc/PID/maps; ls -l /proc/PID/fd`` while it
runs, then ``rm`` of each seen object that ``fuser`` no longer finds.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Iterable

SHM_ROOT = "/dev/shm"
DELETED = " (deleted)"


class ShmLedger:
    """The /dev/shm objects a set of processes was seen holding; thread-safe."""

    def __init__(self, root: str = SHM_ROOT, proc: str = "/proc") -> None:
        self.root = root.rstrip("/")
        self.proc = proc
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[int, int]] = {}  # name -> (st_dev, st_ino)
        try:
            self._dev: int | None = os.stat(self.root).st_dev
        except OSError:
            self._dev = None  # no /dev/shm: nothing to keep track of

    @property
    def seen(self) -> list[str]:
        """The names seen so far, sorted."""
        with self._lock:
            return sorted(self._seen)

    def held(self) -> dict[str, tuple[int, int]]:
        """The objects seen so far: name -> (device, inode)."""
        with self._lock:
            return dict(self._seen)

    def sample(self, pids: Iterable[int]) -> None:
        """Remember what each of ``pids`` maps or holds open under the root (gone pids: skipped)."""
        if self._dev is None:
            return
        found: dict[str, tuple[int, int]] = {}
        for pid in pids:
            found.update(self._held_by(pid))
        if found:
            with self._lock:
                self._seen.update(found)

    def remove_unheld(self) -> list[str]:
        """Remove the seen objects no live process maps or holds; the names removed, sorted."""
        with self._lock:
            seen = dict(self._seen)
        if not seen or self._dev is None:
            return []
        candidates = {}
        for name, key in seen.items():
            path = f"{self.root}/{name}"
            try:
                st = os.lstat(path)
            except OSError:
                continue  # unlinked by its owner: nothing left behind
            if (st.st_dev, st.st_ino) != key or not stat.S_ISREG(st.st_mode):
                continue  # the name is another object now, not the one our server held
            if st.st_uid != os.geteuid():
                continue
            candidates[key] = path
        if not candidates:
            return []
        held = self._held_anywhere(set(candidates))
        removed = []
        for key, path in candidates.items():
            if key in held:
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                removed.append(path[len(self.root) + 1 :])
        with self._lock:
            for name in removed:
                self._seen.pop(name, None)
        return sorted(removed)

    # -- /proc -----------------------------------------------------------------------------

    def _held_by(self, pid: int) -> dict[str, tuple[int, int]]:
        """name -> (dev, inode) of the objects directly under the root ``pid`` maps or holds."""
        found: dict[str, tuple[int, int]] = {}
        prefix = self.root + "/"
        base = f"{self.proc}/{pid}"
        with contextlib.suppress(OSError):
            with open(f"{base}/maps", "rb") as f:
                data = f.read()
            if prefix.encode() in data:
                for dev, ino, path in _maps_entries(data):
                    if dev == self._dev and path.startswith(prefix) and not path.endswith(DELETED):
                        name = path[len(prefix) :]
                        if name and "/" not in name:
                            found[name] = (dev, ino)
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"{base}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"{base}/fd/{fd}")
                    if not target.startswith(prefix) or target.endswith(DELETED):
                        continue
                    name = target[len(prefix) :]
                    if name and "/" not in name:
                        st = os.stat(f"{base}/fd/{fd}")
                        if st.st_dev == self._dev:
                            found[name] = (st.st_dev, st.st_ino)
        return found

    def _held_anywhere(self, keys: set[tuple[int, int]]) -> set[tuple[int, int]]:
        """Those of ``keys`` (dev, inode) that a live process maps or holds open.

        Matched by device and inode, whatever the path: a process in another mount namespace
        may see the same tmpfs elsewhere.
        """
        held: set[tuple[int, int]] = set()
        inodes = [str(ino).encode() for _dev, ino in keys]
        try:
            pids = [name for name in os.listdir(self.proc) if name.isdigit()]
        except OSError:
            return held
        for pid in pids:
            base = f"{self.proc}/{pid}"
            with contextlib.suppress(OSError):
                with open(f"{base}/maps", "rb") as f:
                    data = f.read()
                if any(ino in data for ino in inodes):  # most processes: no line to parse
                    held.update(
                        (dev, ino) for dev, ino, _path in _maps_entries(data) if (dev, ino) in keys
                    )
            with contextlib.suppress(OSError):
                for fd in os.listdir(f"{base}/fd"):
                    with contextlib.suppress(OSError):
                        st = os.stat(f"{base}/fd/{fd}")
                        if (st.st_dev, st.st_ino) in keys:
                            held.add((st.st_dev, st.st_ino))
        return held


def _maps_entries(data: bytes) -> Iterable[tuple[int, int, str]]:
    """(device, inode, path) of each file-backed line of a ``/proc/PID/maps``."""
    for raw in data.splitlines():
        parts = raw.split(maxsplit=5)
        if len(parts) < 6 or parts[4] == b"0":
            continue
        major, _, minor = parts[3].partition(b":")
        try:
            dev = os.makedev(int(major, 16), int(minor, 16))
            ino = int(parts[4])
        except ValueError:
            continue
        yield dev, ino, parts[5].decode("utf-8", "surrogateescape")
