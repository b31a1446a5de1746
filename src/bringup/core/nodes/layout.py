"""The nodes file (one node a line, in rank order, with its environment) and the node
addresses every other part compares and shows (pure)."""

from __future__ import annotations

import ipaddress
import re
import shlex
from dataclasses import dataclass

from bringup.errors import InputError

_ADDRESS = re.compile(
    r"^(?:(?P<user>[^@\s:]+)@)?(?P<host>\[[0-9a-fA-F:.]+\]|[^@\s:\[\]]+)(?::(?P<port>\d{1,5}))?$"
)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class Node:
    """One line of the nodes file: where to reach the node over ssh, and its environment."""

    rank: int
    address: str  # [user@]host[:port], as written
    host: str  # the host part (brackets removed)
    env: tuple[tuple[str, str], ...] = ()
    line: int = 0

    @property
    def label(self) -> str:
        """``node 1 (ops@gpu2)``: how every message names the node."""
        return f"node {self.rank} ({self.address})"

    def env_value(self, name: str) -> str | None:
        """The value of ``name`` in this node's environment, if the nodes file sets it."""
        return next((v for k, v in reversed(self.env) if k == name), None)


def parse_nodes(text: str, *, source: str = "nodes file") -> tuple[Node, ...]:
    """The nodes of a nodes file, in rank order; InputError names the line that is wrong."""
    nodes: list[Node] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        try:
            words = shlex.split(raw, comments=True)
        except ValueError as exc:
            raise InputError(
                f"{source}:{number}: cannot read the line ({exc})",
                hint="quote values as in a shell: NAME='a b'",
            ) from exc
        if not words:
            continue
        address, *assignments = words
        m = _ADDRESS.match(address)
        if m is None or "=" in address:
            raise InputError(
                f"{source}:{number}: {address!r} is not a node address",
                hint="start each line with [user@]host[:port], then NAME=value words",
            )
        if m["port"] and not 0 < int(m["port"]) < 65536:
            raise InputError(f"{source}:{number}: bad ssh port in {address!r}", hint="1-65535")
        env: list[tuple[str, str]] = []
        for word in assignments:
            name, sep, value = word.partition("=")
            if not sep or not _ENV_NAME.match(name):
                raise InputError(
                    f"{source}:{number}: {word!r} is not NAME=value",
                    hint="after the address only environment assignments, e.g. GLOO_SOCKET_IFNAME=eth0",
                )
            env.append((name, value))
        nodes.append(Node(len(nodes), address, m["host"].strip("[]"), tuple(env), number))
    if len(nodes) < 2:
        raise InputError(
            f"{source}: {len(nodes)} node{'s' if len(nodes) != 1 else ''} listed; a multi-node start needs at least 2",
            hint="one line per node, rank 0 first: [user@]host[:port] NAME=value ...",
        )
    return tuple(nodes)


def node_ip(node: Node) -> str | None:
    """The address Ray should use for the node (``--node-ip-address``): its VLLM_HOST_IP, else
    its host when that is an address (a host name is left to Ray to resolve)."""
    ip = node.env_value("VLLM_HOST_IP") or node.host
    return ip if is_ip(ip) else None


def tcp_address(text: str) -> tuple[str, int] | None:
    """``("10.0.0.1", 29501)`` from ``tcp://10.0.0.1:29501`` or ``10.0.0.1:29501`` (``[::1]:p``)."""
    rest = text.removeprefix("tcp://").rstrip("/,;")
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def same_address(a: tuple[str, int], b: tuple[str, int]) -> bool:
    return a[1] == b[1] and a[0].lower() == b[0].lower()


def is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def show_address(address: tuple[str, int]) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
