"""Open the files users point bringup at, safely: type checked first, never blocking, bounded.

Every reader of a user-given path goes through here, so a FIFO, a socket, a device, a
symlink loop, a dangling link, a folder where a file belongs (and the reverse), an
unreadable file or folder, an absurdly large file or a name with control characters all
end the same way: one :class:`~bringup.errors.InputError` line naming the file (printably)
and the fix, exit 2. Never a hang, never a traceback.

- :func:`open_file` opens with ``O_NONBLOCK`` (a FIFO with no writer does not wait), then
  checks with ``fstat`` that what it opened is a regular file, then clears ``O_NONBLOCK``:
  the check is on the file actually opened, not on a name that may change.
- :func:`read_bytes`, :func:`read_text` and :func:`read_json` read at most ``limit`` bytes
  and refuse larger files; :func:`iter_blocks` streams any size in fixed-size pieces.
- :func:`check_path` stats a name without opening it; :func:`list_folder` lists one.
- :func:`shown` renders any name on one printable line (invalid UTF-8 as ``\\xNN``,
  control characters escaped), for messages and terminals.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Literal

from bringup.core.printable import printable
from bringup.errors import InputError

StrPath = str | os.PathLike[str]
Want = Literal["file", "folder", "any"]

BLOCK_BYTES = 8 * 1024 * 1024
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


def shown(path: StrPath | bytes) -> str:
    """``path`` as one printable line (see :func:`bringup.core.printable.printable`)."""
    return printable(os.fsdecode(path))


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, in words: "a FIFO (named pipe)", "a folder"..."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "a special file"


def check_path(
    path: StrPath, *, what: str = "file", want: Want = "file", hint: str | None = None
) -> os.stat_result:
    """Stat ``path`` (following links) and check it is what is wanted; InputError otherwise.

    ``what`` names the input in messages ("log file", "GPU readings file"); ``hint`` is the
    command's own fix for a file of the wrong kind.
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        raise error(exc, path, what=what) from None
    _check_kind(st.st_mode, path, what=what, want=want, hint=hint)
    return st


def _check_kind(mode: int, path: StrPath, *, what: str, want: Want, hint: str | None) -> None:
    if want == "file" and not stat.S_ISREG(mode):
        fix = hint or (
            f"give the {what} itself, not a folder"
            if stat.S_ISDIR(mode)
            else f"give a regular {what}; bringup does not read pipes, sockets or devices here"
        )
        raise InputError(f"{shown(path)} is {kind_of(mode)}, not {_a(what)}", hint=fix)
    if want == "folder" and not stat.S_ISDIR(mode):
        raise InputError(
            f"{shown(path)} is {kind_of(mode)}, not a folder",
            hint=hint or f"give the {what} that holds the files",
        )


def open_file(path: StrPath, *, what: str = "file", hint: str | None = None) -> BinaryIO:
    """Open a regular file for reading, without ever blocking on a FIFO or device."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise error(exc, path, what=what) from None
    try:
        mode = os.fstat(fd).st_mode
        _check_kind(mode, path, what=what, want="file", hint=hint)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: StrPath, *, limit: int, what: str = "file", hint: str | None = None) -> bytes:
    """The whole of a regular file of at most ``limit`` bytes; a larger one is an InputError."""
    with open_file(path, what=what, hint=hint) as f:
        data = read_all(f, limit + 1, path=path, what=what)
    if len(data) > limit:
        raise InputError(
            f"{shown(path)} is larger than {_size(limit)}, too large for {_a(what)}",
            hint=hint or f"give the {what} itself; this is not one",
        )
    return data


def read_text(path: StrPath, *, limit: int, what: str = "file", hint: str | None = None) -> str:
    """A bounded text file, decoded as UTF-8 (invalid bytes become U+FFFD)."""
    return read_bytes(path, limit=limit, what=what, hint=hint).decode("utf-8", "replace")


def read_json(
    path: StrPath, *, limit: int, what: str = "JSON file", hint: str | None = None
) -> Any:
    """A bounded JSON file, parsed; bad JSON is an InputError naming the line and column."""
    text = read_text(path, limit=limit, what=what, hint=hint)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{shown(path)} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            hint=hint or f"fix the {what}, or give the right file",
        ) from None
    except RecursionError:
        raise InputError(
            f"{shown(path)} is not a usable {what}: its JSON is nested too deeply",
            hint=hint or f"give the right {what}",
        ) from None


def read_all(f: BinaryIO, limit: int, *, path: StrPath, what: str = "file") -> bytes:
    """Read up to ``limit`` bytes (all, when negative) from an open file, looping over short
    reads; OS errors become InputError."""
    parts: list[bytes] = []
    left = limit
    try:
        while left != 0:
            data = f.read(left if left > 0 else BLOCK_BYTES)
            if not data:
                break
            parts.append(data)
            left = max(0, left - len(data)) if left > 0 else left
    except OSError as exc:
        raise error(exc, path, what=what) from None
    return b"".join(parts)


def iter_blocks(
    f: BinaryIO,
    *,
    path: StrPath,
    what: str = "file",
    block_bytes: int = BLOCK_BYTES,
    limit: int | None = None,
) -> Iterator[bytes]:
    """The bytes of an open file in pieces of at most ``block_bytes``, to its end or to
    ``limit`` bytes (pass the size at open: a file written faster than it is read would
    otherwise never end)."""
    left = limit
    while left is None or left > 0:
        want = block_bytes if left is None else min(block_bytes, left)
        try:
            data = f.read(want)  # one copy, kernel to a new bytes object
        except OSError as exc:
            raise error(exc, path, what=what) from None
        if not data:
            return
        if left is not None:
            left -= len(data)
        yield data


def readinto_of(
    f: BinaryIO, *, path: StrPath, what: str = "file", limit: int | None = None
) -> Callable[[memoryview], int]:
    """``f.readinto`` for a reader that fills its own buffers
    (``bringup.core.logfeed.read_blocks``): an OS error is one InputError, and no more than
    ``limit`` bytes are read in all (pass the size at open, as to :func:`iter_blocks`)."""
    left = limit

    def readinto(view: memoryview) -> int:
        nonlocal left
        if left is not None:
            view = view[: max(0, left)]
        if not len(view):
            return 0
        try:
            n = f.readinto(view) or 0  # type: ignore[attr-defined]
        except OSError as exc:
            raise error(exc, path, what=what) from None
        if left is not None:
            left -= n
        return n

    return readinto


def list_folder(path: StrPath, *, what: str = "folder", hint: str | None = None) -> list[Path]:
    """The entries of a folder, sorted by name; errors (and non-folders) are InputError."""
    try:
        with os.scandir(path) as it:
            names = sorted(e.name for e in it)
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            with contextlib.suppress(OSError):
                _check_kind(os.stat(path).st_mode, path, what=what, want="folder", hint=hint)
        raise error(exc, path, what=what, listing=True) from None
    return [Path(path, n) for n in names]


def error(exc: OSError, path: StrPath, *, what: str = "file", listing: bool = False) -> InputError:
    """One InputError line for an OS error on ``path``: what happened, and the fix."""
    name = shown(path)
    verb = "list" if listing else "read"
    code = exc.errno
    if code == errno.ENOENT:
        target = _dangling_target(path)
        if target is not None:
            return InputError(
                f"{name} is a dangling symlink (it points to {shown(target)}, which is not there)",
                hint="fetch the file again, or point the link at an existing file",
            )
        return InputError(f"no such {what}: {name}", hint="check the path")
    if code in (errno.EACCES, errno.EPERM):
        return InputError(f"cannot {verb} {name}: permission denied", hint=_permission_hint())
    if code == errno.ELOOP:
        return InputError(
            f"cannot {verb} {name}: a symlink loop (the links point at each other)",
            hint="fix the symlink so it points at the real file",
        )
    if code == errno.ENOTDIR:
        return InputError(
            f"cannot {verb} {name}: part of the path is a file, not a folder",
            hint="check the path",
        )
    if code == errno.EISDIR:
        return InputError(f"{name} is a folder, not {_a(what)}", hint=f"give the {what} itself")
    if code == errno.ENAMETOOLONG:
        return InputError(
            f"cannot {verb} {name[:200]}...: the name is too long", hint="check the path"
        )
    if code == errno.ENXIO:  # open() of a socket, or a device with nothing behind it
        return InputError(
            f"{name} is a socket or a device, not {_a(what)}",
            hint=f"give a regular {what}",
        )
    if code == errno.EIO:
        return InputError(
            f"cannot {verb} {name}: input/output error",
            hint="the disk or network file system failed; check `dmesg`, then read it again",
        )
    reason = exc.strerror or type(exc).__name__
    return InputError(
        f"cannot {verb} {name}: {reason.lower()}", hint="check the path and its permissions"
    )


def _dangling_target(path: StrPath) -> str | None:
    try:
        if os.path.islink(path):
            return os.readlink(path)
    except OSError:
        return None
    return None


def _a(what: str) -> str:
    return f"an {what}" if what[:1].lower() in "aeiou" else f"a {what}"


_CAP_DAC_OVERRIDE = 1  # bit numbers in /proc/self/status CapEff (linux/capability.h)
_CAP_DAC_READ_SEARCH = 2
_CHMOD = "`chmod a+r` on the file and `chmod a+x` on the folders above it"


def _permission_hint() -> str:
    """The fix for a refused read, true to who this process is: a user, root without the
    capabilities that let root read anything, or root refused all the same."""
    if os.geteuid() != 0:
        return f"make it readable for this user ({_user()}), e.g. {_CHMOD}, or run bringup as its owner"
    caps = _effective_caps()
    dac = (1 << _CAP_DAC_OVERRIDE) | (1 << _CAP_DAC_READ_SEARCH)
    if caps is None or not caps & dac:
        what = "its capabilities" if caps is None else "CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH"
        return (
            f"bringup runs as root but without {what} (dropped by setpriv, capsh, a container "
            "or a unit's CapabilityBoundingSet=), so file modes apply to it as to any user: "
            f"{_CHMOD}, or give it CAP_DAC_READ_SEARCH (AmbientCapabilities= in a unit)"
        )
    return (
        "root was refused although it may read any file here: not the file's mode but its file "
        "system or a security module (NFS root_squash, FUSE without allow_root, SELinux or "
        "AppArmor); read it as its owner, or see `dmesg` and the audit log"
    )


def _effective_caps() -> int | None:
    """This process's effective capabilities (CapEff of /proc/self/status); None if unknown."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        return None
    return None


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (KeyError, OSError, ImportError):
        return f"uid {os.geteuid()}"


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} bytes"
