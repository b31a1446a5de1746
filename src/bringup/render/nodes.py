"""How a startup over several nodes looks: one timeline, each line naming node and rank.

Plain lines (``bringup: [  12.3s] node 1 rank 1: phase distributed_init``) with the nodes'
own lines echoed as ``[node 1] ...``; ``--json``: JSON Lines, every event carrying
``node`` and ``rank``, then a summary with every node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from bringup.core.live import ClusterEvent, NodesResult
from bringup.core.nodes import ClusterPlan, NodeProblem
from bringup.core.vocab import Phase
from bringup.render.json_out import write_line
from bringup.render.live import PHASE_WORDS, format_failure, format_probe
from bringup.units import format_seconds


def plan_lines(plan: ClusterPlan) -> list[str]:
    """What bringup will run where."""
    if plan.is_ray:
        head = (
            f"{len(plan.nodes)} nodes over Ray, placement group of {plan.devices_needed}, "
            f"Ray head {plan.master_addr}:{plan.master_port}"
        )
    else:
        head = (
            f"{len(plan.nodes)} nodes, world size {plan.world_size} ({plan.per_node} per node), "
            f"master {plan.master_addr}:{plan.master_port}"
        )
    out = [head]
    for node, argv in zip(plan.nodes, plan.commands, strict=True):
        env = " ".join(f"{k}={v}" for k, v in node.env)
        out.append(f"{node.label}: {env + ' ' if env else ''}{' '.join(argv)}")
    if plan.is_ray:
        env = " ".join(f"{k}={v}" for k, v in (*plan.nodes[0].env, *plan.serve_env))
        out.append(
            f"{plan.nodes[0].label}, once every node is in: {env} {' '.join(plan.serve_command)}"
        )
    out.extend(plan.notes)
    return out


def problem_lines(problems: Sequence[NodeProblem]) -> list[str]:
    """Each problem on one line: errors first, then warnings."""
    errors = [p for p in problems if p.severity == "error"]
    warnings = [p for p in problems if p.severity != "error"]
    return [f"pre-flight: {p.line()}" for p in errors] + [
        f"pre-flight warning: {p.line()}" for p in warnings
    ]


def _who(fields: Mapping[str, Any]) -> str:
    return f"node {fields['rank']} ({fields['node']})"


class PlainNodesObserver:
    """Plain lines on a stream; the nodes' own lines prefixed with their rank."""

    def __init__(self, stream: TextIO, *, echo: bool = True) -> None:
        self.stream = stream
        self.echo = echo

    def _say(self, t: float | None, text: str) -> None:
        stamp = f"[{format_seconds(t):>7}] " if t is not None else ""
        self.stream.write(f"bringup: {stamp}{text}\n")
        self.stream.flush()

    def event(self, event: ClusterEvent) -> None:
        f = event.fields
        who = _who(f)
        if event.event == "phase":
            self._say(event.t, f"{who}: phase {f['phase']}: {PHASE_WORDS[Phase(f['phase'])]}")
        elif event.event == "joined":
            what = "the Ray cluster" if f.get("runtime") == "ray" else "the group"
            self._say(event.t, f"{who}: joined {what}")
        elif event.event == "probe":
            self._say(event.t, f"{who}: {format_probe(f)}")
        elif event.event == "failure":
            for i, line in enumerate(format_failure(f)):
                self._say(event.t if i == 0 else None, f"{who}: {line}" if i == 0 else line)
        elif event.event == "ready":
            self._say(
                event.t,
                f"READY: {f.get('model') or 'the model'} answered the smoke request ({f.get('url')}); every node is alive",
            )

    def line(self, rank: int, text: str) -> None:
        if self.echo:
            self.stream.write(f"[node {rank}] {text}\n")

    def note(self, text: str) -> None:
        self._say(None, text)

    def close(self, result: NodesResult) -> None:
        s = result.summary
        failure = s.get("failure")
        if s["outcome"] == "ready":
            self._say(None, f"ready in {format_seconds(s['time_to_ready_seconds'] or 0.0)}")
        elif failure:
            self._say(
                None,
                f"{s['outcome']}: node {failure['rank']} ({failure['node']}): {failure['summary']}",
            )
            if failure.get("line"):
                self._say(None, f"  root cause: {failure['line']}")
        for node in s["nodes"]:
            if "ray_joined_t" in node:  # the Ray backend: the node's Ray joined the cluster
                joined = (
                    "in the Ray cluster"
                    if node["ray_joined_t"] is not None
                    else "never joined the Ray cluster"
                )
            else:
                joined = "joined" if node["joined_t"] is not None else "never joined"
            code = "" if node["exit_code"] is None else f", exit {node['exit_code']}"
            self._say(
                None, f"  node {node['rank']} ({node['node']}): {node['phase']}, {joined}{code}"
            )


class JsonNodesObserver:
    """JSON Lines: every event with ``node`` and ``rank``; the summary last."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def _write(self, obj: Mapping[str, Any]) -> None:
        write_line(obj, self.stream)

    def event(self, event: ClusterEvent) -> None:
        self._write(event.to_json())

    def line(self, rank: int, text: str) -> None: ...

    def note(self, text: str) -> None: ...

    def close(self, result: NodesResult) -> None:
        self._write(result.summary)


class BothObservers:
    """JSON on stdout and plain lines on stderr."""

    def __init__(self, *observers: Any) -> None:
        self.observers = observers

    def event(self, event: ClusterEvent) -> None:
        for o in self.observers:
            o.event(event)

    def line(self, rank: int, text: str) -> None:
        for o in self.observers:
            o.line(rank, text)

    def note(self, text: str) -> None:
        for o in self.observers:
            o.note(text)

    def close(self, result: NodesResult) -> None:
        for o in self.observers:
            o.close(result)
