"""Each node's command from the one given (the engine's own multi-node runtime, or a Ray cluster
then the command on node 0), and the problems of the command itself (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bringup.core import engine_args
from bringup.core.nodes.layout import Node, node_ip
from bringup.core.packs.types import MultiNodeSpec
from bringup.core.plan.flags import convert
from bringup.errors import UsageError

DEFAULT_RAY_PORT = 6379  # Ray's own default GCS port


@dataclass(frozen=True, slots=True)
class NodeProblem:
    """One thing that stops the start (``error``) or should be known (``warning``)."""

    rank: int | None  # None: the command itself, not one node
    where: str  # "node 1 (ops@gpu2)" or "the command"
    check: str  # versions, model, gpus, master, hostname, interface, shm, command, ssh, ...
    message: str
    fix: str
    severity: str = "error"

    def line(self) -> str:
        """The one line a user reads: where, what, and the fix."""
        return f"{self.where}: {self.message}; fix: {self.fix}"

    def to_json(self) -> dict[str, Any]:
        """``{"rank", "where", "check", "message", "fix", "severity"}``."""
        return {
            "rank": self.rank,
            "where": self.where,
            "check": self.check,
            "message": self.message,
            "fix": self.fix,
            "severity": self.severity,
        }


@dataclass(frozen=True, slots=True)
class ClusterPlan:
    """The nodes, each with its command, and what bringup decided for them."""

    nodes: tuple[Node, ...]
    commands: tuple[tuple[str, ...], ...]  # by rank
    master_addr: str
    master_port: int
    world_size: int
    per_node: int  # ranks (GPUs) each node must provide
    model: str | None
    http_port: int  # where rank 0 serves
    timeout_seconds: int  # the engine's wait for the other nodes, as passed
    timeout_added: bool  # bringup passed it because the command had none
    notes: tuple[str, ...] = ()
    problems: tuple[NodeProblem, ...] = ()
    # "mp": the engine's own multi-node runtime on every node; "ray": a Ray cluster (``commands``
    # are each node's ``ray start``), then ``serve_command`` on node 0 only, with ``serve_env``
    runtime: str = "mp"
    serve_command: tuple[str, ...] = ()
    serve_env: tuple[tuple[str, str], ...] = ()
    devices_needed: int = 0  # Ray: the placement group's bundles (one device each)
    ray_temp_dirs: tuple[str, ...] = ()  # Ray: each node's --temp-dir, by rank (this run's only)

    @property
    def is_ray(self) -> bool:
        """The engine's workers run on a Ray cluster that bringup starts on the nodes."""
        return self.runtime == "ray"

    @property
    def engine_program(self) -> str:
        """The engine's executable, as the command names it (what the pre-flight looks for)."""
        command = self.serve_command if self.is_ray else self.commands[0]
        return command[0] if command else "vllm"

    @property
    def rank0_url(self) -> str:
        """Where rank 0's API answers, as seen from here (node 0's address)."""
        host = self.nodes[0].env_value("VLLM_HOST_IP") or self.nodes[0].host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.http_port}"


def _command_problem(check: str, message: str, fix: str) -> NodeProblem:
    return NodeProblem(None, "the command", check, message, fix)


def _parallel_size(words: list[str], flag: str, default: int, problems: list[NodeProblem]) -> int:
    """``flag``'s whole number on the command, ``default`` when it is not there; read as
    ``bringup plan`` reads it (``core.plan.flags.convert``), and when it is not a whole number
    ``default`` and a problem in that converter's words."""
    value = engine_args.get_flag(words, flag)
    if value is None:
        return default
    try:
        return int(convert(flag, value, int))
    except UsageError as exc:
        fix = exc.hint or f"give {flag} a whole number"
        problems.append(_command_problem("command", exc.message, fix))
        return default


def _http_port(words: list[str], default: int) -> int:
    """Where rank 0 serves: the command's ``--port``, else ``default`` (also when that is not
    a number)."""
    text = engine_args.get_flag(words, "--port")
    try:
        return int(text) if text else default
    except ValueError:
        return default


def uses_ray(argv: Sequence[str], spec: MultiNodeSpec) -> bool:
    """The command asks for the engine's Ray executor backend."""
    ray = spec.ray
    return (
        ray is not None and engine_args.get_flag(list(argv), ray.backend_flag) == ray.backend_value
    )


def plan_cluster(
    argv: Sequence[str],
    nodes: Sequence[Node],
    spec: MultiNodeSpec,
    *,
    default_http_port: int = 8000,
    ray_port: int = DEFAULT_RAY_PORT,
    ray_args: Sequence[str] = (),
    ray_tag: str = "run",
) -> ClusterPlan:
    """Each node's command from the one given; the problems of the command itself.

    With the engine's Ray backend (``--distributed-executor-backend ray``): a Ray cluster first
    (``ray start --head`` on node 0, ``ray start --address`` on the others, each with
    ``ray_args`` and a ``--temp-dir`` of this run, ``ray_tag``), then the command unchanged on
    node 0 only, told the cluster's address."""
    words = list(argv)
    if uses_ray(words, spec):
        return _plan_ray(words, nodes, spec, default_http_port, ray_port, ray_args, ray_tag)
    parsed = engine_args.parse_server_command(words)
    problems: list[NodeProblem] = []
    notes: list[str] = []
    n = len(nodes)
    given_nnodes = engine_args.get_flag(words, spec.nnodes_flag)
    if given_nnodes is not None and given_nnodes != str(n):
        problems.append(
            _command_problem(
                "command",
                f"{spec.nnodes_flag} {given_nnodes} but the nodes file lists {n} nodes",
                f"drop {spec.nnodes_flag} (bringup sets it) or list {given_nnodes} nodes",
            )
        )
    problems.extend(
        _command_problem(
            "command",
            f"{flag} is set on the command, but it differs per node",
            f"leave {flag} out: bringup sets it on each node's command",
        )
        for flag in (spec.node_rank_flag, spec.headless_flag)
        if engine_args.has_flag(words, flag)
    )
    world = 1
    for flag, default in spec.world_flags:
        world *= max(_parallel_size(words, flag, default, problems), 1)
    if world % n:
        problems.append(
            _command_problem(
                "command",
                f"the world size (tensor × pipeline × data parallel = {world}) does not divide evenly over {n} nodes",
                f"make tp × pp × dp a multiple of {n} (e.g. -tp {n * max(world // n, 1)}), or list fewer nodes",
            )
        )
    per_node = max(world // n, 1)
    master_addr = (
        engine_args.get_flag(words, spec.master_addr_flag)
        or nodes[0].env_value("VLLM_HOST_IP")
        or nodes[0].host
    )
    port_text = engine_args.get_flag(words, spec.master_port_flag)
    try:
        master_port = int(port_text) if port_text else spec.default_master_port
    except ValueError:
        problems.append(
            _command_problem(
                "command",
                f"{spec.master_port_flag} {port_text!r} is not a port",
                "give a port number",
            )
        )
        master_port = spec.default_master_port
    timeout_text = engine_args.get_flag(words, spec.timeout_flag)
    timeout_added = timeout_text is None
    try:
        timeout = int(float(timeout_text)) if timeout_text else spec.default_timeout_seconds
    except ValueError:
        timeout = spec.default_timeout_seconds
    if timeout_added:
        notes.append(
            f"passing {spec.timeout_flag} {timeout} (the engine would otherwise wait "
            f"{spec.engine_timeout_seconds // 60} minutes for a node that never joins); give it to choose another"
        )
    commands = []
    for node in nodes:
        cmd = engine_args.set_flag(words, spec.nnodes_flag, str(n))
        cmd = engine_args.set_flag(cmd, spec.node_rank_flag, str(node.rank))
        cmd = engine_args.set_flag(cmd, spec.master_addr_flag, master_addr)
        if port_text is None:
            cmd = engine_args.set_flag(cmd, spec.master_port_flag, str(master_port))
        if timeout_added:
            cmd = engine_args.set_flag(cmd, spec.timeout_flag, str(timeout))
        if node.rank > 0:
            cmd = engine_args.set_flag(cmd, spec.headless_flag, None)
        commands.append(tuple(cmd))
    return ClusterPlan(
        nodes=tuple(nodes),
        commands=tuple(commands),
        master_addr=master_addr,
        master_port=master_port,
        world_size=world,
        per_node=per_node,
        model=parsed.model,
        http_port=_http_port(words, default_http_port),
        timeout_seconds=timeout,
        timeout_added=timeout_added,
        notes=tuple(notes),
        problems=tuple(problems),
    )


def _plan_ray(
    words: list[str],
    nodes: Sequence[Node],
    spec: MultiNodeSpec,
    default_http_port: int,
    ray_port: int,
    ray_args: Sequence[str],
    ray_tag: str,
) -> ClusterPlan:
    ray = spec.ray
    assert ray is not None
    parsed = engine_args.parse_server_command(words)
    problems = [
        _command_problem(
            "command",
            f"{flag} is set on the command, but with the Ray backend the engine places its workers on the Ray cluster",
            f"leave {flag} out (or drop {ray.backend_flag} {ray.backend_value} to use the engine's own multi-node runtime)",
        )
        for flag in (spec.nnodes_flag, spec.node_rank_flag, spec.headless_flag)
        if engine_args.has_flag(words, flag)
    ]
    devices = 1
    for flag, default in ray.parallel_flags:
        devices *= max(_parallel_size(words, flag, default, problems), 1)
    head_ip = node_ip(nodes[0]) or nodes[0].host
    head = f"[{head_ip}]:{ray_port}" if ":" in head_ip else f"{head_ip}:{ray_port}"
    temp_dirs = tuple(f"/tmp/bringup-ray-{ray_tag}-{node.rank}" for node in nodes)
    commands = []
    for node in nodes:
        ip = node_ip(node)
        cmd = ["ray", "start"]
        cmd += ["--head", "--port", str(ray_port)] if node.rank == 0 else ["--address", head]
        cmd += ["--block", "--disable-usage-stats", "--temp-dir", temp_dirs[node.rank]]
        if ip is not None:
            cmd += ["--node-ip-address", ip]
        commands.append((*cmd, *ray_args))
    note = (
        f"Ray cluster: head on node 0 at {head}; then `{' '.join(words[:2])}` on node 0 only "
        f"({ray.address_variable}={head}); the engine asks Ray for a placement group of {devices} "
        f"bundle{'s' if devices != 1 else ''} (one {ray.gpu_device_key or 'device'} each) and would wait "
        f"{ray.placement_wait_seconds // 60} minutes for it"
    )
    return ClusterPlan(
        nodes=tuple(nodes),
        commands=tuple(commands),
        master_addr=head_ip,
        master_port=ray_port,
        world_size=devices,
        per_node=max(devices // len(nodes), 1),
        model=parsed.model,
        http_port=_http_port(words, default_http_port),
        timeout_seconds=ray.placement_wait_seconds,
        timeout_added=False,
        notes=(note,),
        problems=tuple(problems),
        runtime="ray",
        serve_command=tuple(words),
        serve_env=((ray.address_variable, head),),
        devices_needed=devices,
        ray_temp_dirs=temp_dirs,
    )
