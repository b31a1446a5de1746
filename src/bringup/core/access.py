"""Whether a user can reach a path, from the modes along it: POSIX permission rules as values.

A process reads ``/a/b/c`` when it may search (``x``) every folder on the way and read
(``r``, plus ``x`` for a folder) the last one. For each component the owner's bits apply to
its owner, else the group's bits to a member of its group, else the others' bits; root
passes every check. A path that does not exist yet can be made when the nearest existing
folder is writable and searchable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

_BITS = {"r": 4, "w": 2, "x": 1}


@dataclass(frozen=True, slots=True)
class Node:
    """One existing component of a path: its name, mode bits, owner and group."""

    path: str
    mode: int
    uid: int
    gid: int
    is_dir: bool


@dataclass(frozen=True, slots=True)
class Who:
    """A user: uid and every group it is in (its primary group included)."""

    name: str
    uid: int
    gids: frozenset[int]


def allows(node: Node, who: Who, want: str) -> bool:
    """Whether ``who`` has every permission in ``want`` (``"rx"``…) on ``node``."""
    if who.uid == 0:
        return True
    if node.uid == who.uid:
        shift = 6
    elif node.gid in who.gids:
        shift = 3
    else:
        shift = 0
    bits = (node.mode >> shift) & 7
    return all(bits & _BITS[c] for c in want)


def blocked_at(chain: Sequence[Node], who: Who, *, exists: bool, final: str) -> Node | None:
    """The first component that stops ``who``, or None when nothing does.

    ``chain`` holds the existing components from ``/`` down; ``exists`` says whether the
    last of them is the path itself. Each folder before the last needs ``x``; the path
    itself needs ``final`` (``"rx"`` to read a folder); a path still to be made needs
    ``wx`` on the nearest existing folder.
    """
    *before, last = chain
    for node in before:
        if not allows(node, who, "x"):
            return node
    want = final if exists else "wx"
    return None if allows(last, who, want) else last


def describe(node: Node) -> str:
    """``/root (mode 0700, owner 0, group 0)``."""
    return f"{node.path} (mode {node.mode & 0o7777:04o}, owner {node.uid}, group {node.gid})"
