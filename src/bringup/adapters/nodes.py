"""Gather the pre-flight facts of every node over ssh, all nodes at once.

Each node runs the probe script (``node_probe_script.py``, sent on stdin to the node's
``python3``) with the node's environment from the nodes file. The master port test first
has node 0 listen on the master address and port, then every node connects to it; so a
wrong ``--master-addr``, a firewall or a port already taken shows in seconds, before any
engine starts (with the Ray backend: the Ray head's port, where every node's ``ray start``
connects). The decisions are pure (``bringup.core.nodes.preflight``).
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bringup.adapters.ssh import SshRunner, SshTarget, ssh_argv
from bringup.core.nodes import ClusterPlan, ListenResult, Node, NodeFacts, facts_from_json
from bringup.errors import BringupError

SCRIPT = (Path(__file__).parent / "node_probe_script.py").read_text()
LISTEN_SECONDS = 60.0
PROBE_TIMEOUT_SECONDS = 120.0  # hashing the sampled slices of a large checkpoint takes a while

TargetFor = Callable[[Node], SshTarget]


def remote_argv(node: Node, args: Mapping[str, object]) -> list[str]:
    """``env NAME=value ... python3 -c SCRIPT ARGS``: the probe under the node's environment."""
    return ["env", *(f"{k}={v}" for k, v in node.env), "python3", "-c", SCRIPT, json.dumps(args)]


def _probe(target: SshTarget, node: Node, args: Mapping[str, object]) -> NodeFacts:
    try:
        result = SshRunner(target).run(
            remote_argv(node, args), timeout_seconds=PROBE_TIMEOUT_SECONDS
        )
    except BringupError as exc:
        return NodeFacts(reached=False, error=exc.message)
    lines = result.stdout.strip().splitlines()
    try:
        data = json.loads(lines[-1])
    except (IndexError, ValueError):
        detail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return NodeFacts(reached=True, error=f"exit {result.returncode}: {detail}")
    return facts_from_json(data)


class _Listener:
    """Node 0 listening on the master address while the others connect."""

    def __init__(self, target: SshTarget, node: Node, addr: str, port: int) -> None:
        argv = ssh_argv(target, remote_argv(node, {"listen": [addr, port, LISTEN_SECONDS]}))
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # stdin stays open: the listener serves until bringup closes it (or its time is up)
        self.result = ListenResult(False, "no answer from node 0")
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True, name="listener").start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("LISTENING"):
                self.result = ListenResult(True)
                break
            if line.startswith("LISTEN-ERROR"):
                self.result = ListenResult(False, line.split(" ", 1)[1].strip())
                break
        self._ready.set()

    def wait(self, seconds: float) -> ListenResult:
        self._ready.wait(seconds)
        return self.result

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(5)
            return
        except subprocess.TimeoutExpired:
            pass
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def gather(
    plan: ClusterPlan,
    target_for: TargetFor,
    *,
    packages: Sequence[str],
    program: str | None = None,
) -> tuple[list[NodeFacts], ListenResult | None]:
    """The facts of every node (in rank order) and whether node 0 could listen on the master port."""
    program = program or plan.engine_program
    args: dict[str, object] = {
        "program": program,
        "packages": [*packages, "torch", "ray"],
        "model": plan.model,
        "ray": plan.is_ray,
    }
    targets = [target_for(node) for node in plan.nodes]
    listener = _Listener(targets[0], plan.nodes[0], plan.master_addr, plan.master_port)
    try:
        listen = listener.wait(30.0)
        if listen.ok:
            args["connect"] = [plan.master_addr, plan.master_port]
        with ThreadPoolExecutor(max_workers=len(plan.nodes)) as pool:
            facts = list(
                pool.map(
                    lambda pair: _probe(pair[0], pair[1], args),
                    zip(targets, plan.nodes, strict=True),
                )
            )
    finally:
        listener.close()
    if not facts[0].reached:
        return facts, None  # node 0 not reached: its listener says nothing new
    return facts, listen
