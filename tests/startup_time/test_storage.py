"""The storage adapter on real files: mincore counts resident pages without reading, the
measurement reads a cold stretch and drops it again, mountinfo names the storage kind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bringup.adapters import storage

MB = 1024 * 1024


def _dense(path: Path, size: int) -> Path:
    with path.open("wb") as fh:
        block = os.urandom(MB)
        for _ in range(size // MB):
            fh.write(block)
        fh.flush()
        os.fsync(fh.fileno())
    return path


def _drop_all(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _page_cache_drops(tmp_path: Path) -> bool:
    probe = _dense(tmp_path / "probe", MB)
    _drop_all(probe)
    return storage.cached_bytes([str(probe)])[0] < MB


def test_mincore_sees_a_read_and_a_drop(tmp_path: Path) -> None:
    shard = _dense(tmp_path / "a.safetensors", 8 * MB)
    if not _page_cache_drops(tmp_path):
        pytest.skip("this file system keeps pages resident (tmpfs): mincore cannot show a drop")
    _drop_all(shard)
    assert storage.cached_bytes([str(shard)]) == (0, 8 * MB)
    with shard.open("rb") as fh:
        fh.read(4 * MB)
    cached, total = storage.cached_bytes([str(shard)])
    assert 4 * MB <= cached <= total == 8 * MB


def test_measure_leaves_the_page_cache_as_it_found_it(tmp_path: Path) -> None:
    shard = _dense(tmp_path / "a.safetensors", 16 * MB)
    if not _page_cache_drops(tmp_path):
        pytest.skip("this file system keeps pages resident (tmpfs): mincore cannot show a drop")
    _drop_all(shard)
    got = storage.measure([str(shard)], budget_bytes=8 * MB)
    assert got.read_bytes_per_s is not None
    assert got.read_bytes_per_s > 0
    assert got.cached_read_bytes_per_s is not None
    assert got.measured_bytes == 8 * MB
    assert got.total_bytes == 16 * MB
    assert storage.cached_bytes([str(shard)])[0] == 0  # what it read was dropped again


def test_measure_of_resident_shards_reads_only_the_cache(tmp_path: Path) -> None:
    shard = _dense(tmp_path / "a.safetensors", 4 * MB)
    shard.read_bytes()
    if storage.cached_bytes([str(shard)])[0] < 4 * MB:
        pytest.skip("the page cache did not keep the file (memory pressure)")
    got = storage.measure([str(shard)], budget_bytes=8 * MB)
    assert got.read_bytes_per_s is None
    assert got.cached_read_bytes_per_s is not None
    assert "already in the page cache" in got.note
    assert storage.cached_bytes([str(shard)])[0] == 4 * MB  # nothing dropped


def test_sparse_shards_are_not_measured(tmp_path: Path) -> None:
    hole = tmp_path / "h.safetensors"
    with hole.open("wb") as fh:
        fh.truncate(64 * MB)
    got = storage.measure([str(hole)], budget_bytes=8 * MB)
    assert got.read_bytes_per_s is None
    assert "sparse" in got.note


MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
40 27 0:50 / /models rw,relatime shared:1 - nfs4 server:/export rw,vers=4.2
41 27 0:51 / /models/fast rw - tmpfs tmpfs rw
42 27 0:52 / /var/lib/docker/overlay2/x/merged rw - overlay overlay rw
43 27 0:53 / /mnt/my\\040bucket rw - fuse.s3fs s3fs rw
"""


@pytest.mark.parametrize(
    ("path", "fs_type", "kind"),
    [
        ("/models/llama/model.safetensors", "nfs4", "nfs"),
        ("/models/fast/x", "tmpfs", "tmpfs"),
        ("/var/lib/docker/overlay2/x/merged/m", "overlay", "overlay"),
        ("/mnt/my bucket/m", "fuse.s3fs", "network"),
        ("/srv/m", "ext4", "local"),
        ("/modelsX/m", "ext4", "local"),  # a name that only starts like a mount point
    ],
)
def test_mount_kind(tmp_path: Path, path: str, fs_type: str, kind: str) -> None:
    info = tmp_path / "mountinfo"
    info.write_text(MOUNTINFO)
    mount = storage.mount_of(path, str(info))
    assert mount is not None
    assert mount.fs_type == fs_type
    assert storage.storage_kind(mount.fs_type) == kind


def test_measure_fill_times_a_fresh_copy_then_the_same_copy_again() -> None:
    """Each pass: a fresh mapping copied into (t1 - t0), then again (t2 - t1); the best
    pass of each. A scripted clock makes the arithmetic exact."""
    ticks = iter(
        [0.0, 4.0, 5.0, 10.0, 12.0, 13.0, 20.0, 23.0, 23.5]
    )  # fresh 4, 2, 3; again 1, 1, 0.5
    fill, refill = storage.measure_fill(nbytes=2 * MB, passes=3, clock=lambda: next(ticks))
    assert fill == pytest.approx(2 * MB / 2.0)
    assert refill == pytest.approx(2 * MB / 0.5)


def test_measure_reports_the_fill_rates(tmp_path: Path) -> None:
    shard = _dense(tmp_path / "a.safetensors", 4 * MB)
    got = storage.measure([str(shard)], budget_bytes=4 * MB)
    assert got.fill_bytes_per_s is not None
    assert got.fill_bytes_per_s > 0
    assert got.refill_bytes_per_s is not None
    assert got.refill_bytes_per_s > 0
