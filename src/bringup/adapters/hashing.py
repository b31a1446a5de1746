"""Streaming sha256 of many files at once, HF cache blob names, and sha256sum manifests.

Each file is mapped (``mmap`` with ``madvise(MADV_SEQUENTIAL)``: the kernel reads ahead and
drops pages behind) and its pages are fed to ``hashlib`` (OpenSSL's sha256) 16 MiB at a
time, straight from the page cache: no copy into a buffer, so less CPU per GiB than
``openssl dgst -sha256``, which reads into one (bench/bench_verify.py: 1 GiB warm, 0.96 s of
CPU against openssl's 1.25 s, one run at load 10). Memory stays flat (mapped pages are the
page cache's). A file that cannot be mapped is read with ``readinto`` into one reused 1 MiB
buffer. Several files are hashed on one thread each (up to the number of CPUs), the largest
first, so the wall time of a checkpoint is about that of its largest shard when there are
cores enough: ``hashlib`` releases the GIL while it digests. Start-up is kept off this
path: the module imports only the standard library's basics.

In a Hugging Face cache, ``snapshots/<rev>/<file>`` is a symlink to ``blobs/<etag>``; for
LFS files the etag is the file's sha256, for small files the git blob sha1
(``sha1(b"blob <size>\\0" + data)``). Both are checked, in the same pass as the sha256.
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import re
import stat
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from bringup.adapters import files
from bringup.core.checkpoint import Digest, Expected
from bringup.errors import InputError

BUFFER_BYTES = 1024 * 1024
MAP_STEP = 16 * 1024 * 1024  # bytes of a mapping digested per call (and per progress report)
MAX_MANIFEST_BYTES = 64 * 1024 * 1024  # ~500,000 lines; a manifest is far smaller
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_SHA1 = re.compile(r"^[0-9a-f]{40}$")
_MANIFEST_LINE = re.compile(r"^\\?([0-9a-fA-F]{64}) [ *](.+)$")

Digests = list[Any]  # hashlib objects fed the same bytes
Progress = Callable[[int], None]  # called with the number of bytes just hashed (from any thread)


def hash_file(
    path: Path,
    *,
    git_sha1: bool = False,
    progress: Progress | None = None,
    buffer_bytes: int = BUFFER_BYTES,
) -> Digest:
    """sha256 (and optionally the git blob sha1) of one regular file, streamed.

    Never reads past the size the file had when opened (a file written faster than it is
    read would keep the loop going for ever), and refuses a file that changed size while it
    was read.
    """
    with files.open_file(path, what="file") as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        sha = hashlib.sha256()
        sha1 = hashlib.sha1(b"blob %d\0" % size, usedforsecurity=False) if git_sha1 else None
        digests = [sha] if sha1 is None else [sha, sha1]
        try:
            total = _hash_mapped(fd, size, digests, progress)
            if total is None:
                total = _hash_read(f, fd, size, digests, progress, buffer_bytes)
        except OSError as exc:
            raise files.error(exc, path) from None
        now = os.fstat(fd).st_size
    if total != size or now != size:
        raise InputError(
            f"{files.shown(path)} changed while it was hashed: {size:,} bytes when hashing "
            f"began, {now:,} now",
            hint="something is still writing it; wait for the download or copy to finish, "
            "then verify again",
        )
    return Digest(sha.hexdigest(), sha1.hexdigest() if sha1 is not None else None, total)


def _hash_mapped(fd: int, size: int, digests: Digests, progress: Progress | None) -> int | None:
    """Feed the file's first ``size`` bytes to ``digests`` from a mapping; the bytes hashed,
    or None when the file cannot be mapped (empty, or a file system without mmap).

    A mapped page past a truncated file's end would kill the process (SIGBUS): the size is
    checked before each step, and hashing stops at a file that shrank (the caller says so).
    """
    if size == 0:
        return None
    try:
        mapping = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    total = 0
    with mapping:
        with contextlib.suppress(OSError, AttributeError):
            mapping.madvise(mmap.MADV_SEQUENTIAL)
        view = memoryview(mapping)
        try:
            while total < size:
                if os.fstat(fd).st_size < size:  # shrank: its tail is gone
                    break
                n = min(MAP_STEP, size - total)
                step = view[total : total + n]
                for d in digests:
                    d.update(step)
                step.release()
                total += n
                if progress is not None:
                    progress(n)
        finally:
            view.release()
    return total


def _hash_read(
    f: Any, fd: int, size: int, digests: Digests, progress: Progress | None, buffer_bytes: int
) -> int:
    """Feed the file's first ``size`` bytes to ``digests`` through one reused buffer."""
    with contextlib.suppress(OSError):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)  # larger read-ahead from disk
    view = memoryview(bytearray(buffer_bytes))
    total = 0
    while total < size and (n := f.readinto(view[: min(buffer_bytes, size - total)])):
        total += n
        chunk = view[:n]
        for d in digests:
            d.update(chunk)
        if progress is not None:
            progress(n)
    return total


def hash_files(
    paths: Mapping[str, Path],
    *,
    git_sha1: Iterable[str] = (),
    jobs: int | None = None,
    progress: Progress | None = None,
) -> dict[str, Digest]:
    """Hash every file, ``jobs`` at once (default: one per CPU); keyed like ``paths``.

    The first file that fails (in ``paths`` order) raises its error, once the files being
    hashed are done; no new file is started after a failure.
    """
    want_sha1 = set(git_sha1)
    names = list(paths)
    workers = max(1, min(len(names), jobs or os.cpu_count() or 1))
    if workers == 1:
        return {n: hash_file(paths[n], git_sha1=n in want_sha1, progress=progress) for n in names}
    results: dict[str, Digest | BaseException] = {}
    lock = threading.Lock()
    todo = iter(sorted(names, key=lambda n: -_size(paths[n])))  # the largest first

    def work() -> None:
        while True:
            with lock:
                if any(isinstance(r, BaseException) for r in results.values()):
                    return
                name = next(todo, None)
            if name is None:
                return
            try:
                digest: Digest | BaseException = hash_file(
                    paths[name], git_sha1=name in want_sha1, progress=progress
                )
            except BaseException as exc:  # re-raised on the caller's thread below
                digest = exc
            with lock:
                results[name] = digest

    # daemon threads: Ctrl-C in the caller ends the process without waiting for a large file
    threads = [
        threading.Thread(target=work, name=f"bringup-hash-{i}", daemon=True) for i in range(workers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out: dict[str, Digest] = {}
    for name in names:
        result = results.get(name)
        if isinstance(result, BaseException):
            raise result
        if result is not None:
            out[name] = result
    return out


def _size(path: Path) -> int:
    """A file's size for ordering the work (0 when it cannot be read: its hash will say why)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def files_to_hash(root: Path) -> dict[str, Path]:
    """Every regular file under ``root`` (a folder, or one file), by name relative to it.

    Symlinks are followed (cache snapshots are all symlinks), each folder once (a link back
    to a folder above is not a loop); hidden folders (``.git``, ``.cache``) are skipped;
    dangling links are left to the header scan. A FIFO, socket or device inside, or a
    folder that cannot be listed, is an InputError: a hash that skipped it would lie.
    """
    st = files.check_path(root, what="checkpoint", want="any")
    if stat.S_ISREG(st.st_mode):
        return {root.name: root}
    found: dict[str, Path] = {}
    seen: set[tuple[int, int]] = set()
    stack = [(root, "")]
    while stack:
        folder, prefix = stack.pop()
        fst = files.check_path(folder, what="folder", want="folder")
        if (fst.st_dev, fst.st_ino) in seen:
            continue
        seen.add((fst.st_dev, fst.st_ino))
        subfolders = []
        for path in files.list_folder(folder, what="model folder"):
            try:
                est = os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                raise files.error(exc, path) from None
            name = prefix + path.name
            if stat.S_ISDIR(est.st_mode):
                if not path.name.startswith("."):
                    subfolders.append((path, name + "/"))
            elif stat.S_ISREG(est.st_mode):
                found[name] = path
            else:
                raise InputError(
                    f"{files.shown(path)} is {files.kind_of(est.st_mode)} inside the checkpoint",
                    hint="move it out of the model folder: --hash reads every file there",
                )
        stack.extend(reversed(subfolders))
    return dict(sorted(found.items()))


def cache_expectations(folder: Path, names: Iterable[str]) -> dict[str, Expected]:
    """Digests a Hugging Face cache publishes: the blob name each snapshot symlink points to."""
    found: dict[str, Expected] = {}
    for name in names:
        path = folder / name
        if not path.is_symlink():
            continue
        blob = Path(os.readlink(path)).name
        if _SHA256.match(blob):
            found[name] = Expected("sha256", blob, "the cache blob name")
        elif _SHA1.match(blob):
            found[name] = Expected("git-sha1", blob, "the cache blob name")
    return found


def read_manifest(path: Path) -> dict[str, Expected]:
    """Parse a ``sha256sum`` manifest (``<hex>  <name>`` or ``<hex> *<name>`` per line)."""
    text = files.read_text(
        path, limit=MAX_MANIFEST_BYTES, what="manifest", hint="give a `sha256sum` output file"
    )
    found: dict[str, Expected] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        m = _MANIFEST_LINE.match(line.rstrip("\r"))
        if m is None:
            raise InputError(
                f"{files.shown(path)} line {number} is not `<sha256>  <file>`: {line[:60]!r}",
                hint="write it with `sha256sum FILES > MANIFEST` or --write-manifest",
            )
        name = m[2].removeprefix("./")
        found[name] = Expected("sha256", m[1].lower(), "the manifest")
    return found


def write_manifest(path: Path, digests: Mapping[str, Digest]) -> None:
    """Write ``<sha256>  <name>`` lines, sorted by name (``sha256sum -c`` reads it)."""
    from bringup.adapters.commands import write_local

    lines = "".join(f"{digests[name].sha256}  {name}\n" for name in sorted(digests))
    write_local(str(path), lines, hint="give a path in a folder you can write")
