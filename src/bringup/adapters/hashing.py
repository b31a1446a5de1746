"""Streaming sha256 of many files at once, HF cache blob names, and sha256sum manifests.

Hashing runs one thread per file (up to the number of CPUs): ``hashlib`` releases the GIL
while it digests a buffer, so threads use every core. Each file is read with ``readinto``
into one reused 8 MiB buffer, so memory stays flat whatever the file size.

In a Hugging Face cache, ``snapshots/<rev>/<file>`` is a symlink to ``blobs/<etag>``; for
LFS files the etag is the file's sha256, for small files the git blob sha1
(``sha1(b"blob <size>\\0" + data)``). Both are checked, in the same pass as the sha256.
"""

from __future__ import annotations

import hashlib
import os
import queue
import re
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

from bringup.adapters import files
from bringup.core.checkpoint import Digest, Expected
from bringup.errors import InputError

BUFFER_BYTES = 8 * 1024 * 1024
MAX_MANIFEST_BYTES = 64 * 1024 * 1024  # ~500,000 lines; a manifest is far smaller
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_SHA1 = re.compile(r"^[0-9a-f]{40}$")
_MANIFEST_LINE = re.compile(r"^\\?([0-9a-fA-F]{64}) [ *](.+)$")

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
    was read. A large file is read on a second thread into a ring of buffers while this one
    hashes: both release the GIL, so reading (kernel copies) and hashing overlap.
    """
    with files.open_file(path, what="file") as f:
        size = os.fstat(f.fileno()).st_size
        sha = hashlib.sha256()
        sha1 = hashlib.sha1(b"blob %d\0" % size, usedforsecurity=False) if git_sha1 else None
        digests = [sha] if sha1 is None else [sha, sha1]
        chunks = _pipelined if size > 4 * buffer_bytes else _chunks
        total = 0
        for chunk in chunks(f, path, size, buffer_bytes):
            for d in digests:
                d.update(chunk)
            total += len(chunk)
            if progress is not None:
                progress(len(chunk))
        now = os.fstat(f.fileno()).st_size
    if total != size or now != size:
        raise InputError(
            f"{files.shown(path)} changed while it was hashed: {size:,} bytes when hashing "
            f"began, {now:,} now",
            hint="something is still writing it; wait for the download or copy to finish, "
            "then verify again",
        )
    return Digest(sha.hexdigest(), sha1.hexdigest() if sha1 is not None else None, total)


def _chunks(f: BinaryIO, path: Path, size: int, buffer_bytes: int) -> Iterator[memoryview]:
    """The file's first ``size`` bytes, read into one reused buffer."""
    buf = bytearray(buffer_bytes)
    view = memoryview(buf)
    total = 0
    try:
        while total < size and (n := f.readinto(view[: min(buffer_bytes, size - total)])):  # type: ignore[attr-defined]
            total += n
            yield view[:n]
    except OSError as exc:
        raise files.error(exc, path) from None


def _pipelined(f: BinaryIO, path: Path, size: int, buffer_bytes: int) -> Iterator[memoryview]:
    """Like :func:`_chunks`, the reads done ahead on a reader thread (three buffers)."""
    free: queue.SimpleQueue[bytearray] = queue.SimpleQueue()
    full: queue.SimpleQueue[tuple[bytearray, int] | OSError | None] = queue.SimpleQueue()
    for _ in range(3):
        free.put(bytearray(buffer_bytes))
    stop = threading.Event()

    def read() -> None:
        total = 0
        try:
            while total < size and not stop.is_set():
                buf = free.get()
                n = f.readinto(memoryview(buf)[: min(buffer_bytes, size - total)])  # type: ignore[attr-defined]
                if not n:
                    break
                total += n
                full.put((buf, n))
        except OSError as exc:
            full.put(exc)
            return
        full.put(None)

    reader = threading.Thread(target=read, name="bringup-hash-read", daemon=True)
    reader.start()
    try:
        while (item := full.get()) is not None:
            if isinstance(item, OSError):
                raise files.error(item, path) from None
            buf, n = item
            yield memoryview(buf)[:n]
            free.put(buf)
    finally:
        stop.set()
        free.put(bytearray(0))  # a reader waiting for a buffer wakes and sees stop
        reader.join()


def hash_files(
    paths: Mapping[str, Path],
    *,
    git_sha1: Iterable[str] = (),
    jobs: int | None = None,
    progress: Progress | None = None,
) -> dict[str, Digest]:
    """Hash every file in parallel (one thread per file, ``jobs`` at most); keyed like ``paths``."""
    if not paths:
        return {}
    want_sha1 = set(git_sha1)
    workers = max(1, min(len(paths), jobs or os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bringup-hash") as pool:
        futures = {
            name: pool.submit(hash_file, path, git_sha1=name in want_sha1, progress=progress)
            for name, path in paths.items()
        }
        return {name: fut.result() for name, fut in futures.items()}


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
