"""How fast the storage under a checkpoint reads, and how much of it the page cache holds.

- **the mount** (``/proc/self/mountinfo``): the longest mount point above the shard's real
  path gives its file-system type, named as a kind: ``nfs`` (nfs, nfs4), ``network`` (CIFS,
  Lustre, Ceph, GlusterFS, BeeGFS, GPFS and FUSE file systems such as s3fs and gcsfuse),
  ``overlay`` (a container layer), ``tmpfs`` (memory) or ``local``;
- **the page cache** (``mincore(2)`` on a read-only shared mapping of each shard, through
  ctypes): the resident pages, never touching the data;
- **the read rate**: a short read (``budget_bytes``, a few hundred MB) of a stretch of the
  shards that is *not* in the page cache, through a mapping as vLLM's safetensors loader
  reads, timed; the same stretch again for the page cache's rate; then
  ``posix_fadvise(POSIX_FADV_DONTNEED)`` on that stretch, so the measurement leaves the page
  cache as it found it (pages that were already resident are never dropped). When every
  page is resident, only the page cache's rate is measured;
- **the parameters' first touch** (:func:`measure_fill`): a copy into anonymous memory
  nothing has touched yet, and the same copy again, timed. vLLM's CPU build copies every
  tensor into parameters ``torch.empty`` made (``core.startup_time.model.param_fill_seconds``);
  the difference between the two copies is what that first touch costs per byte.

Command line equivalent: ``findmnt -T FILE``, ``fincore FILE``, and ``dd if=FILE bs=16M
count=16 iflag=direct`` followed by dropping what it read.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bringup.core.startup_time import Storage

PAGE = mmap.PAGESIZE
CHUNK = 16 * 1024 * 1024  # one copy; a region is read in these
DEFAULT_BUDGET = 256 * 1024 * 1024
FILL_BYTES = 32 * 1024 * 1024  # one fresh mapping per pass
FILL_PASSES = 5

_NFS = {"nfs", "nfs4"}
_NETWORK = {"cifs", "smb3", "smbfs", "lustre", "ceph", "glusterfs", "beegfs", "gpfs", "9p", "afs"}


@dataclass(frozen=True, slots=True)
class Mount:
    """One mount: where, its type and source."""

    point: str
    fs_type: str
    source: str


def storage_kind(fs_type: str) -> str:
    """The kind of storage a file-system type names."""
    if fs_type in _NFS:
        return "nfs"
    if fs_type in _NETWORK or fs_type.startswith("fuse.") or fs_type == "fuse":
        return "network"
    if fs_type == "overlay":
        return "overlay"
    if fs_type in ("tmpfs", "ramfs"):
        return "tmpfs"
    return "local"


def mount_of(path: str, mountinfo: str = "/proc/self/mountinfo") -> Mount | None:
    """The mount a path is on (the longest mount point above its real path)."""
    real = os.path.realpath(path)
    best: Mount | None = None
    try:
        text = Path(mountinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        mount = _parse_mountinfo(line)
        if mount is None or not _under(real, mount.point):
            continue
        if best is None or len(mount.point) >= len(best.point):
            best = mount
    return best


def _parse_mountinfo(line: str) -> Mount | None:
    """``36 35 98:0 /root /mnt rw,noatime master:1 - ext3 /dev/root rw`` → the mount."""
    head, sep, tail = line.partition(" - ")
    fields = head.split()
    rest = tail.split()
    if not sep or len(fields) < 5 or len(rest) < 2:
        return None
    point = fields[4].replace("\\040", " ")
    return Mount(point, rest[0], rest[1])


def _under(path: str, point: str) -> bool:
    return point == "/" or path == point or path.startswith(point.rstrip("/") + "/")


class _Libc:
    """mmap, mincore and munmap through ctypes (Python's mmap exposes no address)."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.mmap = libc.mmap
        self.mmap.restype = ctypes.c_void_p
        self.mmap.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_long,
        ]
        self.munmap = libc.munmap
        self.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.mincore = libc.mincore
        self.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]


_MAP_FAILED = ctypes.c_void_p(-1).value
_LOW_BIT = bytes(i & 1 for i in range(256))  # mincore's vector: bit 0 is "resident"
_COLD_RUN = re.compile(b"\x00+")


def _resident(vec: bytes) -> int:
    """Resident pages in a mincore vector."""
    return vec.translate(_LOW_BIT).count(1)


def resident_pages(path: str, libc: _Libc | None = None) -> tuple[int, bytes]:
    """(file size, one byte per page: bit 0 set when the page is in the page cache)."""
    lc = libc or _Libc()
    size = os.path.getsize(path)
    if size == 0:
        return 0, b""
    pages = (size + PAGE - 1) // PAGE
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = lc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr is None or addr == _MAP_FAILED:
            raise OSError(ctypes.get_errno(), f"mmap of {path} failed")
        try:
            vec = ctypes.create_string_buffer(pages)
            if lc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), f"mincore of {path} failed")
            return size, vec.raw[:pages]
        finally:
            lc.munmap(addr, size)
    finally:
        os.close(fd)


def cached_bytes(paths: Sequence[str]) -> tuple[int, int]:
    """(bytes of ``paths`` in the page cache, their total size)."""
    lc = _Libc()
    cached = total = 0
    for path in paths:
        size, vec = resident_pages(path, lc)
        total += size
        cached += min(size, _resident(vec) * PAGE)
    return cached, total


def _cold_stretch(vec: bytes, want_pages: int) -> tuple[int, int, int] | None:
    """The longest run of non-resident pages: (start page, pages to read, at most
    ``want_pages``, pages in the run: the readahead past the read may fill them)."""
    runs = [(m.start(), m.end() - m.start()) for m in _COLD_RUN.finditer(vec.translate(_LOW_BIT))]
    if not runs:
        return None
    start, pages = max(runs, key=lambda r: r[1])
    return start, min(pages, want_pages), pages


def _timed_read(path: str, offset: int, length: int, clock: Callable[[], float]) -> float:
    """Seconds to copy ``length`` bytes at ``offset`` out of a read-only mapping."""
    buf = bytearray(min(CHUNK, length))
    view = memoryview(buf)
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        src = memoryview(mm)
        try:
            t0 = clock()
            pos = offset
            end = offset + length
            while pos < end:
                n = min(len(buf), end - pos)
                view[:n] = src[pos : pos + n]
                pos += n
            return max(clock() - t0, 1e-9)
        finally:
            src.release()


_RESIDENT_RUN = re.compile(b"\x01+")
# dropping what the measurement read: empty on this many checks in a row, DROP_GAP_S apart,
# within DROP_BUDGET_S: a readahead window past the read (4 MiB here) was seen to land after
# one check had found the stretch empty, in 15 of 40 measurements of a 16 MiB file on ext4
# with the old rule (ten tries, done at the first empty check); 0 of 40 with this one
DROP_QUIET_CHECKS = 3
DROP_GAP_S = 0.03
DROP_BUDGET_S = 3.0


def _settle(fd: int, vec: bytes, offset: int) -> None:
    """Wait for the reads still in flight in a stretch whose mincore vector is ``vec``: a page
    the readahead is still reading is in the page cache but locked, and reading it waits for
    it. Only resident pages are read, with readahead off for ``fd``, so nothing new comes in."""
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    for m in _RESIDENT_RUN.finditer(vec.translate(_LOW_BIT)):
        pos, end = offset + m.start() * PAGE, offset + m.end() * PAGE
        while pos < end:
            got = len(os.pread(fd, min(CHUNK, end - pos), pos))
            if got == 0:
                break
            pos += got


def _drop(path: str, offset: int, length: int, budget_s: float = DROP_BUDGET_S) -> None:
    """Drop ``length`` bytes at ``offset`` from the page cache. Pages that readahead is still
    reading in (the mapping's faults start it asynchronously) are locked and DONTNEED skips
    them, and a readahead window past the read can still arrive after a check that found the
    stretch empty: so the stretch counts as dropped only once it shows no resident page on
    :data:`DROP_QUIET_CHECKS` checks in a row, a little apart; pages that are there are waited
    for (``_settle``) and dropped again, for at most ``budget_s`` seconds."""
    deadline = time.monotonic() + budget_s
    quiet = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while quiet < DROP_QUIET_CHECKS and time.monotonic() < deadline:
            os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
            vec = resident_pages(path)[1][offset // PAGE : (offset + length + PAGE - 1) // PAGE]
            if _resident(vec):
                quiet = 0
                _settle(fd, vec, offset)
            else:
                quiet += 1
            time.sleep(DROP_GAP_S)
    finally:
        os.close(fd)


def measure(
    paths: Sequence[str],
    *,
    budget_bytes: int = DEFAULT_BUDGET,
    clock: Callable[[], float] = time.perf_counter,
    mountinfo: str = "/proc/self/mountinfo",
) -> Storage:
    """The storage under ``paths`` (the shards): kind, page-cache share and read rates."""
    mount = mount_of(paths[0], mountinfo) if paths else None
    fs_type = mount.fs_type if mount else "unknown"
    kind = storage_kind(fs_type)
    lc = _Libc()
    maps = [(p, *resident_pages(p, lc)) for p in paths]
    total = sum(size for _, size, _ in maps)
    cached = sum(min(size, _resident(vec) * PAGE) for _, size, vec in maps)
    dense = [m for m in maps if not _sparse(m[0])]
    cold = _measure_cold(dense, budget_bytes, clock)
    warm_rate = cold[1] if cold else _measure_warm(dense, budget_bytes, clock)
    note = ""
    if not cold:
        note = (
            "the shards are sparse files (holes): the storage holds nothing to read"
            if not dense
            else "every page already in the page cache: the storage was not read"
        )
    fill, refill = measure_fill(clock=clock)
    return Storage(
        kind=kind,
        fs_type=fs_type,
        read_bytes_per_s=cold[0] if cold else None,
        cached_read_bytes_per_s=warm_rate,
        cached_bytes=cached,
        total_bytes=total,
        measured_bytes=cold[2] if cold else 0,
        note=note,
        fill_bytes_per_s=fill,
        refill_bytes_per_s=refill,
    )


def measure_fill(
    nbytes: int = FILL_BYTES,
    passes: int = FILL_PASSES,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[float | None, float | None]:
    """(bytes per second copying into fresh anonymous memory, the same into touched memory):
    the best of ``passes``, each into a new private anonymous mapping (as large allocations
    are made: glibc's malloc and PyTorch's CPU allocator map them), copied from a source
    whose pages are all resident. The best pass, as bandwidth probes take it
    (``adapters.membw``): a 32 MiB copy lasts a tenth of a second, and on a shared machine
    one pass caught behind another process measured 0.26 GB/s where the next reached 0.6.
    (None, None) when no mapping can be made."""
    src = bytearray(os.urandom(1024 * 1024)) * max(1, nbytes // (1024 * 1024))
    fresh: list[float] = []
    again: list[float] = []
    try:
        for _ in range(passes):
            with mmap.mmap(-1, len(src)) as dst:
                t0 = clock()
                dst[:] = src
                t1 = clock()
                dst[:] = src
                t2 = clock()
            fresh.append(len(src) / max(t1 - t0, 1e-9))
            again.append(len(src) / max(t2 - t1, 1e-9))
    except (OSError, ValueError):
        return None, None
    return max(fresh), max(again)


def _sparse(path: str) -> bool:
    """Mostly holes: reading it measures memory, not the storage."""
    st = os.stat(path)
    return st.st_blocks * 512 < st.st_size // 2


def _measure_cold(
    maps: Sequence[tuple[str, int, bytes]], budget: int, clock: Callable[[], float]
) -> tuple[float, float, int] | None:
    """(storage rate, page-cache rate, bytes) read from the largest cold stretch of a shard;
    what it read is dropped from the page cache again."""
    best: tuple[str, int, int, int] | None = None
    for path, _size, vec in maps:
        stretch = _cold_stretch(vec, budget // PAGE)
        if stretch and (best is None or stretch[1] > best[2]):
            best = (path, *stretch)
    if best is None:
        return None
    path, first, pages, run = best
    offset = first * PAGE
    length = min(pages * PAGE, os.path.getsize(path) - offset)
    cold_run = run * PAGE  # was cold before: dropped as a whole, readahead included
    try:
        cold_s = _timed_read(path, offset, length, clock)
        warm_s = _timed_read(path, offset, length, clock)
    finally:
        with contextlib.suppress(OSError):
            _drop(path, offset, cold_run)
    return length / cold_s, length / warm_s, length


def _measure_warm(
    maps: Sequence[tuple[str, int, bytes]], budget: int, clock: Callable[[], float]
) -> float | None:
    """The page cache's rate, on resident pages (nothing is dropped)."""
    for path, size, vec in maps:
        head = vec[: budget // PAGE]
        if size and _resident(head) == len(head):
            length = min(size, budget)
            return length / _timed_read(path, 0, length, clock)
    return None
