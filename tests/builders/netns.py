"""Two (or more) "machines" on this one: network namespaces on a private bridge, each with
its own real sshd, for the multi-node tests (real-parts.md section 4).

Each node is a network namespace with a veth on a host bridge (10.77.X.1 on the host side,
.10, .11, ... in the nodes), ``lo`` up, no default route (so ``VLLM_HOST_IP`` and the socket
interface must be set, as on a real cluster whose hostname maps to loopback) and an
``unreachable`` route for the host's DNS server (else every reverse lookup stalls ~10 s).
Each node's sshd runs in its own mount namespace too, so a folder can be bound over a path
on one node only (another copy of the weights at the same path).

Torn down with nothing left behind: every process still in a namespace (they are all ours)
is killed, the namespaces and the bridge deleted, and the /dev/shm objects that our servers
were seen holding (the node wrapper's ``shm`` lists in the run folders under ``runs``) and
that no process holds any more are removed. /dev/shm is the host's, shared with every other
run on the machine: an object no server of ours held is never touched.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if Path("/usr/sbin/sshd").exists() else None)
IP = shutil.which("ip") or ("/usr/sbin/ip" if Path("/usr/sbin/ip").exists() else None)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    assert IP is not None
    return subprocess.run([IP, *args], capture_output=True, text=True, check=check)


def unavailable_reason() -> str | None:
    """Why network namespaces with sshd cannot be made here (None: they can)."""
    if SSHD is None:
        return "sshd is not installed (apt-get install openssh-server)"
    if IP is None:
        return "iproute2 is not installed (apt-get install iproute2)"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"i18c{secrets.token_hex(3)}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace ({made.stderr.strip()})"
    _ip("netns", "del", probe, check=False)
    return None


@dataclass
class NetNode:
    """One node: its namespace, address, interface and sshd."""

    rank: int
    netns: str
    address: str
    ifname: str
    sshd: subprocess.Popen[bytes] | None = None

    def exec_argv(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside this node's network namespace."""
        assert IP is not None
        return [IP, "netns", "exec", self.netns, *argv]

    def pids(self) -> list[int]:
        """Every process in the namespace."""
        out = _ip("netns", "pids", self.netns, check=False).stdout
        return [int(p) for p in out.split()]


@dataclass
class Cluster:
    """The nodes, the client's ssh config and what a nodes file needs."""

    nodes: list[NetNode]
    workdir: Path
    ssh_config: Path
    user: str
    bridge: str
    host_address: str
    runs: list[Path] = field(default_factory=list)  # run roots whose */shm lists are ours

    def nodes_file(
        self,
        path: Path,
        *,
        env: Mapping[int, Mapping[str, str]] | None = None,
        socket_ifname: bool = True,
    ) -> Path:
        """A nodes file for these nodes (root@address), with the environment a node needs here."""
        lines = ["# written by the test fixture: rank order"]
        for node in self.nodes:
            words = [f"{self.user}@{node.address}"]
            if socket_ifname:
                words.append(f"GLOO_SOCKET_IFNAME={node.ifname}")
            words.append(f"VLLM_HOST_IP={node.address}")
            for key, value in (env or {}).get(node.rank, {}).items():
                words.append(f"{key}={value}")
            lines.append(" ".join(words))
        path.write_text("\n".join(lines) + "\n")
        return path

    def shm_leftovers(self) -> list[str]:
        """/dev/shm objects our servers held that still exist and no process holds (leaked)."""
        return _leftovers(self.runs)

    def processes_left(self) -> dict[str, list[int]]:
        """Processes still in each namespace other than its sshd."""
        out = {}
        for node in self.nodes:
            pids = [p for p in node.pids() if _name(p) != "sshd"]
            if pids:
                out[node.netns] = pids
        return out


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _leftovers(runs: Sequence[Path]) -> list[str]:
    ours: set[str] = set()
    for root in runs:
        for listing in root.glob("*/shm"):
            with contextlib.suppress(OSError):
                ours.update(n for n in listing.read_text().splitlines() if n and "/" not in n)
    there = [n for n in ours if os.path.lexists(f"/dev/shm/{n}")]
    if not there:
        return []
    held = _held_shm()
    return sorted(n for n in there if n not in held)


def _held_shm() -> set[str]:
    held: set[str] = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        with contextlib.suppress(OSError):
            for name in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{name}")
                    if target.startswith("/dev/shm/"):
                        held.add(target[9:].split(" ")[0])
        with contextlib.suppress(OSError), open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                if "/dev/shm/" in line:
                    held.add(line.rsplit("/dev/shm/", 1)[1].split(" ")[0].strip())
    return held


def _free_subnet() -> int:
    used = _ip("-o", "addr", "show").stdout
    for _ in range(200):
        third = 100 + secrets.randbelow(150)
        if f"10.77.{third}." not in used:
            return third
    raise RuntimeError("no free 10.77.X.0/24 subnet")


def _dns_servers() -> list[str]:
    try:
        text = Path("/etc/resolv.conf").read_text()
    except OSError:
        return []
    return [
        line.split()[1]
        for line in text.splitlines()
        if line.startswith("nameserver") and len(line.split()) > 1 and "." in line.split()[1]
    ]


def _wait_port(node: NetNode, port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((node.address, port), 0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"sshd of {node.netns} did not listen on {node.address}:{port}")


@contextmanager
def cluster(
    workdir: Path,
    *,
    nodes: int = 2,
    binds: Mapping[int, Sequence[tuple[Path, Path]]] | None = None,
) -> Iterator[Cluster]:
    """``nodes`` namespaces with a real sshd each; ``binds[rank]``: (source, target) folders
    bound in that node's mount namespace (its sshd sessions see source at target)."""
    assert SSHD is not None
    assert IP is not None
    tag = secrets.token_hex(2)
    prefix = f"i18{tag}"
    subnet = _free_subnet()
    workdir.mkdir(parents=True, exist_ok=True)
    os.chmod(workdir, 0o700)
    host_key, client_key = workdir / "host_ed25519", workdir / "client_ed25519"
    for key in (host_key, client_key):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    authorized = workdir / "authorized_keys"
    authorized.write_text(client_key.with_suffix(".pub").read_text())
    os.chmod(authorized, 0o600)
    bridge = f"{prefix}br"
    made: list[NetNode] = []
    runs: list[Path] = []
    user = "root"
    try:
        _ip("link", "add", bridge, "type", "bridge")
        _ip("addr", "add", f"10.77.{subnet}.1/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        known = []
        for rank in range(nodes):
            ns, veth, peer = f"{prefix}n{rank}", f"{prefix}v{rank}", f"{prefix}p{rank}"
            node = NetNode(rank, ns, f"10.77.{subnet}.{10 + rank}", peer)
            _ip("netns", "add", ns)
            made.append(node)
            _ip("link", "add", veth, "type", "veth", "peer", "name", peer)
            _ip("link", "set", peer, "netns", ns)
            _ip("link", "set", veth, "master", bridge, "up")
            _ip("-n", ns, "addr", "add", f"{node.address}/24", "dev", peer)
            _ip("-n", ns, "link", "set", peer, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            for dns in _dns_servers():
                _ip("-n", ns, "route", "add", "unreachable", f"{dns}/32", check=False)
            config = workdir / f"sshd_config_{rank}"
            config.write_text(
                f"Port 22\nListenAddress {node.address}\nHostKey {host_key}\n"
                f"AuthorizedKeysFile {authorized}\nPasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nStrictModes no\n"
                f"PidFile {workdir / f'sshd_{rank}.pid'}\nPermitRootLogin yes\nUsePAM no\n"
                "MaxSessions 50\nMaxStartups 50\nLogLevel ERROR\n"
                f"SetEnv PATH={os.environ.get('PATH', '/usr/bin:/bin')}\n"
            )
            mounts = " && ".join(
                f"mount --bind {src} {dst}" for src, dst in (binds or {}).get(rank, ())
            )
            script = f"{mounts + ' && ' if mounts else ''}exec {SSHD} -D -e -f {config}"
            Path("/run/sshd").mkdir(exist_ok=True)
            node.sshd = subprocess.Popen(
                node.exec_argv(
                    ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]
                ),
                stderr=subprocess.DEVNULL,
            )
            known.append(f"{node.address} {host_key.with_suffix('.pub').read_text().strip()}")
        for node in made:
            _wait_port(node, 22)
        known_hosts = workdir / "known_hosts"
        known_hosts.write_text("\n".join(known) + "\n")
        ssh_config = workdir / "ssh_config"
        ssh_config.write_text(
            "Host *\n"
            f"  IdentityFile {client_key}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {known_hosts}\n  GlobalKnownHostsFile /dev/null\n"
        )
        yield Cluster(made, workdir, ssh_config, user, bridge, f"10.77.{subnet}.1", runs)
    finally:
        _teardown(made, bridge, runs)


def _teardown(nodes: list[NetNode], bridge: str, runs: Sequence[Path]) -> None:
    for node in nodes:
        for pid in node.pids():  # everything in our namespace is ours: vLLM, sessions, sshd
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if node.sshd is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.sshd.wait(5)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(n.pids() for n in nodes):
        time.sleep(0.1)
    for node in nodes:
        _ip("netns", "del", node.netns, check=False)
    _ip("link", "del", bridge, check=False)
    for name in _leftovers(runs):
        with contextlib.suppress(OSError):
            os.unlink(f"/dev/shm/{name}")
