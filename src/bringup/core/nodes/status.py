"""``bringup status --nodes``: each node's server as the status script printed it, and the
exit code over them all (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bringup.core.nodes.layout import Node

# -- status --nodes --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeStatus:
    """One node's server as its run folder and process table show it now."""

    rank: int
    node: str
    found: bool  # a run folder exists for this rank
    alive: bool = False
    pid: int | None = None
    exit_code: int | None = None
    command: str | None = None
    last_line: str | None = None
    gpus: tuple[tuple[int, str, int, int], ...] = ()  # index, name, used bytes, total bytes
    folder: str | None = None
    error: str | None = None  # the node could not be asked

    def to_json(self) -> dict[str, Any]:
        """``{"rank", "node", "found", "alive", "pid", "exit_code", "command", "last_line", "gpus", "folder", "error"}``."""
        return {
            "rank": self.rank,
            "node": self.node,
            "found": self.found,
            "alive": self.alive,
            "pid": self.pid,
            "exit_code": self.exit_code,
            "command": self.command,
            "last_line": self.last_line,
            "gpus": [
                {"index": i, "name": n, "used_bytes": u, "total_bytes": t}
                for i, n, u, t in self.gpus
            ],
            "folder": self.folder,
            "error": self.error,
        }


def parse_node_status(node: Node, text: str) -> NodeStatus:
    """What the status script printed on ``node`` (``KEY value`` lines)."""
    values: dict[str, str] = {}
    gpus = []
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "gpu":
            parts = [p.strip() for p in value.split(",")]
            try:
                gpus.append(
                    (
                        int(parts[0]),
                        parts[1],
                        int(float(parts[2]) * 2**20),
                        int(float(parts[3]) * 2**20),
                    )
                )
            except (IndexError, ValueError):
                continue
        elif key:
            values[key] = value
    if "dir" not in values:
        return NodeStatus(node.rank, node.address, found=False)
    pid = values.get("pid", "")
    code = values.get("exit", "")
    return NodeStatus(
        rank=node.rank,
        node=node.address,
        found=True,
        alive=values.get("state") == "alive",
        pid=int(pid) if pid.isdigit() else None,
        exit_code=int(code) if code.lstrip("-").isdigit() else None,
        command=values.get("cmd") or None,
        last_line=values.get("last") or None,
        gpus=tuple(gpus),
        folder=values["dir"],
    )


def nodes_exit_code(statuses: Sequence[NodeStatus], api_ok: bool | None) -> int:
    """0 every node alive and rank 0 answers; 1 any node dead, unreachable, or no answer; 3 no run found."""
    if all(not s.found and s.error is None for s in statuses):
        return 3
    if all(s.alive for s in statuses) and api_ok:
        return 0
    return 1
