"""Users and groups of this machine, and the modes along a path, for ``unit --run-as``."""

from __future__ import annotations

import grp
import os
import pwd
import stat
from dataclasses import dataclass

from bringup.core.access import Node, Who
from bringup.errors import UsageError


@dataclass(frozen=True, slots=True)
class Account:
    """A service user as ``User=``/``Group=`` will run it."""

    who: Who
    group: str  # the group it runs with: the given one, or its primary group
    home: str


def lookup(user: str, group: str | None) -> Account:
    """``USER`` (and ``GROUP``) on this machine; one line when either does not exist."""
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise UsageError(
            f"--run-as: no user {user!r} on this machine",
            hint=f"create it (useradd --system {user}) or give an existing user",
        ) from None
    try:
        group_entry = grp.getgrnam(group) if group else grp.getgrgid(entry.pw_gid)
    except KeyError:
        raise UsageError(
            f"--run-as: no group {group!r} on this machine",
            hint=f"create it (groupadd --system {group}) or give an existing group",
        ) from None
    gids = {entry.pw_gid, group_entry.gr_gid}
    gids |= {g.gr_gid for g in grp.getgrall() if user in g.gr_mem}
    return Account(Who(user, entry.pw_uid, frozenset(gids)), group_entry.gr_name, entry.pw_dir)


def chain(path: str) -> tuple[list[Node], bool]:
    """The existing components of absolute ``path`` from ``/`` down, and whether the whole
    path exists (symbolic links followed, as the server will follow them)."""
    nodes: list[Node] = []
    parts = [p for p in os.path.realpath(path).split("/") if p]
    current = "/"
    for i in range(len(parts) + 1):
        if i:
            current = os.path.join(current, parts[i - 1])
        try:
            st = os.stat(current)
        except OSError:
            return nodes, False
        nodes.append(Node(current, st.st_mode, st.st_uid, st.st_gid, stat.S_ISDIR(st.st_mode)))
    return nodes, True
