"""One model over several machines (pure): the nodes file, each node's command, and the
pre-flight decisions over the facts gathered on every node.

The nodes file lists the nodes in rank order, one a line: the ssh address, then optional
``NAME=value`` words, the environment of the server on that node (quoted as in a shell;
``#`` starts a comment)::

    # rank 0 serves the API; the others run headless
    ops@gpu1  GLOO_SOCKET_IFNAME=eth0 NCCL_SOCKET_IFNAME=eth0 VLLM_HOST_IP=10.0.0.1
    ops@gpu2  GLOO_SOCKET_IFNAME=eth0 NCCL_SOCKET_IFNAME=eth0 VLLM_HOST_IP=10.0.0.2

From the one command given, every node gets its own: the engine pack's multi-node flags
(for vLLM ``--nnodes N --node-rank i --master-addr A``, ``--headless`` on ranks > 0, a
bounded ``--distributed-timeout-seconds`` when none was given). bringup rides the engine's
own runtime: it neither launches ranks itself nor rendezvous.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bringup.core import engine_args
from bringup.core.diagnosis import Event, Failure, Remedy
from bringup.core.live import ClusterEvent, FailureFound, Joined, NodeEvent
from bringup.core.packs.types import MultiNodeSpec, RayBackendSpec
from bringup.core.probes import ProbeObservation
from bringup.core.startup import StartupMachine, StartupPolicy
from bringup.core.verdict import State
from bringup.core.vocab import FailureClass, Phase
from bringup.errors import InputError

_ADDRESS = re.compile(
    r"^(?:(?P<user>[^@\s:]+)@)?(?P<host>\[[0-9a-fA-F:.]+\]|[^@\s:\[\]]+)(?::(?P<port>\d{1,5}))?$"
)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SOCKET_IFNAME_VARIABLES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
SHM_MINIMUM_BYTES = 64 * 2**20  # below this, the engine's shared-memory queues fail outright
SHM_ADVISED_BYTES = 1 * 2**30  # NCCL and vLLM's broadcast buffers want room
DEFAULT_RAY_PORT = 6379  # Ray's own default GCS port


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


# -- each node's command ---------------------------------------------------------------------


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
        value = engine_args.get_flag(words, flag)
        try:
            size = int(value) if value is not None else default
        except ValueError:
            problems.append(
                _command_problem(
                    "command", f"{flag} {value!r} is not a number", f"give {flag} an integer"
                )
            )
            size = default
        world *= max(size, 1)
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
    http_text = engine_args.get_flag(words, "--port")
    try:
        http_port = int(http_text) if http_text else default_http_port
    except ValueError:
        http_port = default_http_port
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
        http_port=http_port,
        timeout_seconds=timeout,
        timeout_added=timeout_added,
        notes=tuple(notes),
        problems=tuple(problems),
    )


def _node_ip(node: Node) -> str | None:
    """The address Ray should use for the node (``--node-ip-address``): its VLLM_HOST_IP, else
    its host when that is an address (a host name is left to Ray to resolve)."""
    ip = node.env_value("VLLM_HOST_IP") or node.host
    return ip if _is_ip(ip) else None


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
        value = engine_args.get_flag(words, flag)
        try:
            devices *= max(int(value) if value is not None else default, 1)
        except ValueError:
            problems.append(
                _command_problem(
                    "command", f"{flag} {value!r} is not a number", f"give {flag} an integer"
                )
            )
    head_ip = _node_ip(nodes[0]) or nodes[0].host
    head = f"[{head_ip}]:{ray_port}" if ":" in head_ip else f"{head_ip}:{ray_port}"
    temp_dirs = tuple(f"/tmp/bringup-ray-{ray_tag}-{node.rank}" for node in nodes)
    commands = []
    for node in nodes:
        ip = _node_ip(node)
        cmd = ["ray", "start"]
        cmd += ["--head", "--port", str(ray_port)] if node.rank == 0 else ["--address", head]
        cmd += ["--block", "--disable-usage-stats", "--temp-dir", temp_dirs[node.rank]]
        if ip is not None:
            cmd += ["--node-ip-address", ip]
        commands.append((*cmd, *ray_args))
    http_text = engine_args.get_flag(words, "--port")
    try:
        http_port = int(http_text) if http_text else default_http_port
    except ValueError:
        http_port = default_http_port
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
        http_port=http_port,
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


# -- pre-flight ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ModelFile:
    """One file of the model folder: its size and a digest of what identifies its content."""

    size: int
    digest: str | None  # sha256 of small files; of the header and sampled slices of weights


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What the pre-flight found on one node (from ``adapters.nodes``), or why it could not."""

    reached: bool
    error: str | None = None  # ssh failed, or the probe script did
    hostname: str | None = None
    hostname_addresses: tuple[str, ...] = ()
    interfaces: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    inherited_env: Mapping[str, str] = field(
        default_factory=dict
    )  # the socket variables the login shell sets
    engine_path: str | None = None  # the engine's executable, None when not found
    python: str | None = None
    python_version: str | None = None
    packages: Mapping[str, str | None] = field(default_factory=dict)  # name -> version
    model_path: str | None = None  # where the model was found (a snapshot folder for a repo id)
    model_files: Mapping[str, ModelFile] | None = None  # None: no model there
    model_error: str | None = None
    gpu_count: int | None = None  # None: not known (no nvidia-smi)
    gpu_error: str | None = None
    shm_total_bytes: int | None = None
    connect_ok: bool | None = None  # None: not tried
    connect_error: str | None = None
    offline: bool = False  # HF_HUB_OFFLINE set: a repo id is not downloaded
    # the `ray` command (None: not on the node's PATH), and the versions its Python sees: the
    # Ray workers run in that Python, so it must import the same engine as node 0's
    ray_path: str | None = None
    ray_python_version: str | None = None
    ray_packages: Mapping[str, str | None] = field(default_factory=dict)
    ray_error: str | None = None
    asked_ray: bool = False  # the probe looked for Ray


def facts_from_json(data: Mapping[str, Any]) -> NodeFacts:
    """The facts from the probe script's JSON object (see ``adapters.nodes``)."""
    engine = data.get("engine") or {}
    model = data.get("model") or {}
    files = model.get("files")
    shm = data.get("shm") or {}
    connect = data.get("connect") or {}
    gpus = data.get("gpus") or {}
    ray = data.get("ray")
    ray_facts = ray or {}
    return NodeFacts(
        reached=True,
        error=data.get("error") or engine.get("error"),
        hostname=data.get("hostname"),
        hostname_addresses=tuple(data.get("hostname_addresses") or ()),
        interfaces={str(k): tuple(v) for k, v in (data.get("interfaces") or {}).items()},
        inherited_env={str(k): str(v) for k, v in (data.get("env") or {}).items()},
        engine_path=engine.get("path"),
        python=engine.get("python"),
        python_version=engine.get("python_version"),
        packages=dict(engine.get("packages") or {}),
        model_path=model.get("path"),
        model_files=(
            {str(k): ModelFile(int(v["size"]), v.get("digest")) for k, v in files.items()}
            if isinstance(files, Mapping)
            else None
        ),
        model_error=model.get("error"),
        gpu_count=gpus.get("count"),
        gpu_error=gpus.get("error"),
        shm_total_bytes=shm.get("total"),
        connect_ok=connect.get("ok"),
        connect_error=connect.get("error"),
        offline=bool(data.get("offline")),
        ray_path=ray_facts.get("path"),
        ray_python_version=ray_facts.get("python_version"),
        ray_packages=dict(ray_facts.get("packages") or {}),
        ray_error=ray_facts.get("error"),
        asked_ray=ray is not None,
    )


@dataclass(frozen=True, slots=True)
class ListenResult:
    """Whether node 0 could listen on the master address and port for the reachability test."""

    ok: bool
    error: str | None = None


def _is_loopback(address: str) -> bool:
    return address.startswith("127.") or address == "::1"


def _ifname_names(value: str) -> list[str]:
    """Interface names a ``*_SOCKET_IFNAME`` value asks for (``^`` exclusions are not names)."""
    if value.startswith("^"):
        return []
    return [part.lstrip("=") for part in value.split(",") if part.strip("= ")]


def _human(n_bytes: int) -> str:
    return f"{n_bytes / 2**30:.1f} GiB" if n_bytes >= 2**30 else f"{n_bytes / 2**20:.0f} MiB"


def preflight(
    plan: ClusterPlan,
    facts: Sequence[NodeFacts],
    spec: MultiNodeSpec,
    *,
    listen: ListenResult | None = None,
    ray_args: Sequence[str] = (),
) -> list[NodeProblem]:
    """Every problem the facts show, node by node; node 0 is the reference for versions and model.
    With the Ray backend also: ``ray`` on every node, Ray's version (and the engine its Python
    sees) the same as node 0's, and the engine's placement group satisfiable (``ray_args``: the
    ``ray start`` flags, whose ``--num-gpus`` overrides what Ray would detect)."""
    problems: list[NodeProblem] = []
    reference = facts[0]
    for node, f in zip(plan.nodes, facts, strict=True):
        problems.extend(_node_problems(plan, node, f, reference, spec))
    if plan.is_ray and spec.ray is not None:
        problems.extend(_placement_problems(plan, facts, spec.ray, ray_args))
    if listen is not None and not listen.ok:
        node0 = plan.nodes[0]
        what = "the Ray head's address" if plan.is_ray else "the master address"
        port_fix = (
            "pick a free --ray-port" if plan.is_ray else f"pick a free {spec.master_port_flag}"
        )
        addr_fix = (
            "give node 0 its own address as VLLM_HOST_IP in the nodes file"
            if plan.is_ray
            else f"{spec.master_addr_flag} must be an address of node 0"
        )
        problems.append(
            NodeProblem(
                0,
                node0.label,
                "master",
                f"cannot listen on {what} {plan.master_addr}:{plan.master_port} ({listen.error})",
                (
                    port_fix
                    if listen.error and "in use" in listen.error
                    else f"{addr_fix} (one of {_addresses(facts[0])})"
                ),
            )
        )
    return problems


def _ray_gpus(f: NodeFacts, ray_args: Sequence[str]) -> int | None:
    """The GPUs a node's Ray registers: ``--num-gpus`` when given, else those it can see."""
    given = engine_args.get_flag(list(ray_args), "--num-gpus")
    if given is not None:
        try:
            return int(float(given))
        except ValueError:
            return None
    return f.gpu_count


def _is_cpu_build(f: NodeFacts, spec_packages: Sequence[str]) -> bool:
    return "+cpu" in (f.packages.get("torch") or "") or any(
        "cpu" in p for p in spec_packages if f.packages.get(p)
    )


def _placement_problems(
    plan: ClusterPlan, facts: Sequence[NodeFacts], ray: RayBackendSpec, ray_args: Sequence[str]
) -> list[NodeProblem]:
    """Whether the engine's placement group fits the cluster: ``devices_needed`` bundles of one
    device each, packed by Ray over the nodes (vLLM 0.32 ``initialize_ray_cluster``); what does
    not fit, the engine waits for (``ray.placement_wait_seconds``) instead of failing."""
    node0, f0 = plan.nodes[0], facts[0]
    if not f0.reached or f0.engine_path is None:
        return []
    if _is_cpu_build(f0, ()) or "cpu" in " ".join(k for k, v in f0.packages.items() if v):
        key = ray.cpu_device_key
        if not key:
            return [
                NodeProblem(
                    0,
                    node0.label,
                    "placement",
                    "the engine's CPU build cannot run its workers on Ray: its CPU platform has no Ray "
                    "device to ask for, so it stops with 'current platform cpu does not support ray.' "
                    "once it has joined the cluster",
                    f"drop {ray.backend_flag} {ray.backend_value}: bringup then starts the engine's own "
                    "multi-node runtime on the same nodes",
                )
            ]
    key = ray.gpu_device_key
    needed = plan.devices_needed
    counts = [_ray_gpus(f, ray_args) if f.reached else None for f in facts]
    if any(c is None for c in counts):
        unknown = [n.label for n, c in zip(plan.nodes, counts, strict=True) if c is None]
        return [
            NodeProblem(
                None,
                "the cluster",
                "placement",
                f"cannot count the {key}s of {', '.join(unknown)}: whether the engine's placement group of {needed} {key} bundles fits is not known",
                "install the NVIDIA driver tools (nvidia-smi) there, or give Ray --num-gpus (--ray-arg)",
                "warning",
            )
        ]
    known = [c or 0 for c in counts]
    total = sum(known)
    by_node = ", ".join(f"node {n.rank} {c}" for n, c in zip(plan.nodes, known, strict=True))
    out: list[NodeProblem] = []
    if total < needed:
        out.append(
            NodeProblem(
                None,
                "the cluster",
                "placement",
                f"the engine asks Ray for {needed} bundles of 1 {key} (tensor × pipeline parallel) but the "
                f"nodes have {total} ({by_node}); it would wait {ray.placement_wait_seconds // 60} minutes "
                "('Waiting for creating a placement group ...') before failing",
                f"lower -tp/-pp to fit {total} {key}s, make more {key}s visible (CUDA_VISIBLE_DEVICES on a node's line), or add nodes",
            )
        )
    v1_executor = (node0.env_value(ray.driver_device_variable) or "1") == "0"
    if v1_executor and known[0] < 1:
        out.append(
            NodeProblem(
                0,
                node0.label,
                "placement",
                f"{ray.driver_device_variable}=0 selects the executor whose driver (node 0) must hold a {key} itself, and node 0 has none",
                f"give node 0 a {key}, or leave {ray.driver_device_variable} unset",
            )
        )
    out.extend(
        NodeProblem(
            n.rank,
            n.label,
            "placement",
            f"no {key} for Ray here: this node adds nothing to the engine's placement group",
            f"make its {key}s visible, or leave it out of the nodes file",
            "warning",
        )
        for n, c in zip(plan.nodes, known, strict=True)
        if c == 0 and total >= needed
    )
    return out


def _addresses(f: NodeFacts) -> str:
    found = [a for addrs in f.interfaces.values() for a in addrs if not _is_loopback(a)]
    return ", ".join(found) or "none found"


def _node_problems(
    plan: ClusterPlan, node: Node, f: NodeFacts, ref: NodeFacts, spec: MultiNodeSpec
) -> list[NodeProblem]:
    where = node.label

    def problem(check: str, message: str, fix: str, severity: str = "error") -> NodeProblem:
        return NodeProblem(node.rank, where, check, message, fix, severity)

    if not f.reached:
        return [
            problem(
                "ssh",
                f"not reached: {f.error}",
                "make `ssh " + node.address + " true` work (keys, known_hosts, address)",
            )
        ]
    out: list[NodeProblem] = []
    if f.error:
        out.append(
            problem(
                "probe",
                f"the pre-flight probe failed: {f.error}",
                "check python3 is installed on the node",
            )
        )
    program = plan.commands[node.rank][0] if plan.commands else "the engine"
    if f.engine_path is None:
        out.append(
            problem(
                "engine",
                f"`{program}` is not found on the node",
                "install the engine there, or set PATH=<its venv>/bin:... on the node's line of the nodes file",
            )
        )
    elif node.rank > 0 and ref.engine_path is not None:
        out.extend(_version_problems(node, f, ref, spec))
    out.extend(_model_problems(plan, node, f, ref))
    cpu_build = _is_cpu_build(f, spec.packages)
    if plan.is_ray:
        out.extend(_ray_problems(node, f, ref, spec))
    elif not cpu_build and f.engine_path is not None:
        if f.gpu_count is None:
            out.append(
                problem(
                    "gpus",
                    f"cannot count the GPUs ({f.gpu_error or 'nvidia-smi not found'}); the node must provide {plan.per_node}",
                    "install the NVIDIA driver tools (nvidia-smi) or check the GPUs by hand",
                    "warning",
                )
            )
        elif f.gpu_count < plan.per_node:
            out.append(
                problem(
                    "gpus",
                    f"{f.gpu_count} GPU{'s' if f.gpu_count != 1 else ''} visible, the world size {plan.world_size} over {len(plan.nodes)} nodes needs {plan.per_node} here",
                    "make more GPUs visible (CUDA_VISIBLE_DEVICES on the node's line) or lower -tp/-pp",
                )
            )
    if f.connect_ok is False:
        out.append(
            problem(
                "master",
                f"cannot reach the {'Ray head' if plan.is_ray else 'master'} {plan.master_addr}:{plan.master_port} ({f.connect_error})",
                (
                    f"node 0's VLLM_HOST_IP must be its address as this node sees it, and port {plan.master_port} (--ray-port) must be open between the nodes"
                    if plan.is_ray
                    else f"{spec.master_addr_flag} must be node 0's address as this node sees it, and port {plan.master_port} must be open between the nodes"
                ),
            )
        )
    ifname_set = {v: node.env_value(v) or f.inherited_env.get(v) for v in SOCKET_IFNAME_VARIABLES}
    own = [a for addrs in f.interfaces.values() for a in addrs if not _is_loopback(a)]
    if (
        not any(ifname_set.values())
        and f.hostname_addresses
        and all(_is_loopback(a) for a in f.hostname_addresses)
    ):
        iface = _interface_of(f, node.env_value("VLLM_HOST_IP") or (own[0] if own else None))
        out.append(
            problem(
                "hostname",
                f"its hostname {f.hostname!r} resolves to {f.hostname_addresses[0]} and no socket interface is set, so the other nodes would be told to connect to loopback",
                f"set GLOO_SOCKET_IFNAME={iface or '<interface>'} (and NCCL_SOCKET_IFNAME on GPUs) on its line of the nodes file, or map the hostname to its address in /etc/hosts",
            )
        )
    for variable, value in ifname_set.items():
        if not value:
            continue
        prefix_match = variable == "NCCL_SOCKET_IFNAME" and not value.startswith("=")
        for name in _ifname_names(value):
            matches = [
                i for i in f.interfaces if i == name or (prefix_match and i.startswith(name))
            ]
            if not matches:
                out.append(
                    problem(
                        "interface",
                        f"{variable}={value}: no interface {name!r} on the node (it has {', '.join(sorted(f.interfaces)) or 'none'})",
                        f"set {variable} to the interface that carries the node's address",
                    )
                )
            elif not any(f.interfaces[i] for i in matches):
                out.append(
                    problem(
                        "interface",
                        f"{variable}={value}: interface {name!r} has no address",
                        f"bring {name} up with an address, or name another interface",
                    )
                )
    host_ip = node.env_value("VLLM_HOST_IP")
    if (
        host_ip
        and f.interfaces
        and host_ip not in {a for addrs in f.interfaces.values() for a in addrs}
    ):
        out.append(
            problem(
                "address",
                f"VLLM_HOST_IP={host_ip} is not an address of the node (it has {', '.join(own) or 'none'})",
                "set VLLM_HOST_IP to one of the node's own addresses",
            )
        )
    if f.shm_total_bytes is not None:
        if f.shm_total_bytes < SHM_MINIMUM_BYTES:
            out.append(
                problem(
                    "shm",
                    f"/dev/shm is {_human(f.shm_total_bytes)}; the engine's shared-memory queues need more",
                    "give it at least 1 GiB (docker --shm-size=1g, or mount -o remount,size=1G /dev/shm)",
                )
            )
        elif f.shm_total_bytes < SHM_ADVISED_BYTES:
            out.append(
                problem(
                    "shm",
                    f"/dev/shm is only {_human(f.shm_total_bytes)}",
                    "give it at least 1 GiB (docker --shm-size=1g, or mount -o remount,size=1G /dev/shm)",
                    "warning",
                )
            )
    return out


def _ray_problems(
    node: Node, f: NodeFacts, ref: NodeFacts, spec: MultiNodeSpec
) -> list[NodeProblem]:
    """``ray`` on the node, the same Ray and Python as node 0's, and the engine in Ray's Python
    (Ray starts the engine's workers with the Python of ``ray start``)."""
    where = node.label
    if not f.asked_ray:
        return []
    if f.ray_path is None:
        return [
            NodeProblem(
                node.rank,
                where,
                "ray",
                "`ray` is not found on the node",
                "install Ray next to the engine (pip install ray"
                + (f"=={ref.ray_packages.get('ray')}" if ref.ray_packages.get("ray") else "")
                + "), or put its bin folder first in PATH on the node's line of the nodes file",
            )
        ]
    out = []
    if f.ray_error:
        out.append(NodeProblem(node.rank, where, "ray", f.ray_error, "check the node's `ray` runs"))
        return out
    ray_here = f.ray_packages.get("ray")
    engine_here = _first(f.ray_packages, spec.packages)
    engine_name = next((p for p in spec.packages if f.ray_packages.get(p)), spec.packages[0])
    if engine_here is None:
        out.append(
            NodeProblem(
                node.rank,
                where,
                "ray",
                f"Ray's Python ({f.python if f.ray_path is None else f.ray_path}) has no {engine_name}: Ray would start the engine's workers where they cannot import it",
                "install Ray into the engine's environment (the same venv as `vllm`)",
            )
        )
    elif (mine := _first(f.packages, spec.packages)) is not None and mine != engine_here:
        out.append(
            NodeProblem(
                node.rank,
                where,
                "ray",
                f"Ray's Python sees {engine_name} {engine_here}, the node's `vllm` is {mine}",
                "install Ray into the engine's environment (the same venv as `vllm`)",
            )
        )
    if node.rank == 0 or ref.ray_path is None:
        return out
    pairs = [
        ("Ray", ray_here, ref.ray_packages.get("ray")),
        ("Ray's Python", f.ray_python_version, ref.ray_python_version),
    ]
    out.extend(
        NodeProblem(
            node.rank,
            where,
            "versions",
            f"{name} {here or 'not installed'} here, {there or 'not installed'} on node 0; "
            "Ray refuses a node whose Ray or Python differs from the head's",
            f"install the same {name.removesuffix(chr(39) + 's Python')} on every node ({name} {there} as on node 0)",
        )
        for name, here, there in pairs
        if here != there
    )
    return out


def _interface_of(f: NodeFacts, address: str | None) -> str | None:
    if address is None:
        return None
    return next((name for name, addrs in f.interfaces.items() if address in addrs), None)


def _version_problems(
    node: Node, f: NodeFacts, ref: NodeFacts, spec: MultiNodeSpec
) -> list[NodeProblem]:
    out = []
    pairs: list[tuple[str, str | None, str | None]] = [
        ("Python", f.python_version, ref.python_version)
    ]
    engine_name = next((p for p in spec.packages if ref.packages.get(p)), spec.packages[0])
    pairs.append(
        (engine_name, _first(f.packages, spec.packages), _first(ref.packages, spec.packages))
    )
    pairs.append(("torch", f.packages.get("torch"), ref.packages.get("torch")))
    for name, here, there in pairs:
        if here != there:
            out.append(
                NodeProblem(
                    node.rank,
                    node.label,
                    "versions",
                    f"{name} {here or 'not installed'} here, {there or 'not installed'} on node 0",
                    f"install the same {name} on every node ({name} {there} as on node 0)"
                    if there
                    else f"install {name} on node 0",
                )
            )
    return out


def _first(packages: Mapping[str, str | None], names: Sequence[str]) -> str | None:
    return next((packages[n] for n in names if packages.get(n)), None)


def _model_problems(
    plan: ClusterPlan, node: Node, f: NodeFacts, ref: NodeFacts
) -> list[NodeProblem]:
    model = plan.model or "the model"
    where = node.label
    if f.model_files is None:
        if f.model_error == "download" and not f.offline:
            return []  # a repo id no node has on disk: the engine downloads it, each node alike
        return [
            NodeProblem(
                node.rank,
                where,
                "model",
                f"no model at {model} ({f.model_error or 'not found'})",
                (
                    f"copy node 0's model there (e.g. rsync -a {plan.nodes[0].host}:{ref.model_path}/ {model}/) or mount the same storage"
                    if ref.model_files is not None and node.rank > 0
                    else "give the model's path as it is on every node"
                ),
            )
        ]
    if node.rank == 0 or ref.model_files is None:
        return []
    ours, theirs = f.model_files, ref.model_files
    missing = sorted(set(theirs) - set(ours))
    extra = sorted(set(ours) - set(theirs))
    other_size = sorted(k for k in set(ours) & set(theirs) if ours[k].size != theirs[k].size)
    other_content = sorted(
        k
        for k in set(ours) & set(theirs)
        if k not in other_size and ours[k].digest != theirs[k].digest
    )
    if not (missing or extra or other_size or other_content):
        return []
    parts = []
    if missing:
        parts.append(f"missing {_few(missing)}")
    if extra:
        parts.append(f"extra {_few(extra)}")
    if other_size:
        parts.append(f"other sizes: {_few(other_size)}")
    if other_content:
        parts.append(f"other content: {_few(other_content)}")
    return [
        NodeProblem(
            node.rank,
            where,
            "model",
            f"the model at {f.model_path} is not the one node 0 has ({'; '.join(parts)}); the engine would serve it without a word",
            f"copy node 0's files to it (rsync -a {plan.nodes[0].host}:{ref.model_path}/ {f.model_path}/) so every node loads the same weights",
        )
    ]


def _few(names: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


# -- one startup over every node -------------------------------------------------------------


@dataclass
class NodeRun:
    """How one node's part of the startup stands."""

    node: Node
    machine: StartupMachine
    waiting_at: float | None = None  # when it said it is about to meet the others
    meets_at: tuple[str, int] | None = None  # the address it said it meets them at
    joined_at: float | None = None  # when its first "joined the group" line came
    exited: bool = False
    exit_code: int | None = None
    unreachable_line: str | None = None  # its last "cannot reach the head" line
    rendezvous_line: str | None = None  # its line naming where it meets the others
    # the Ray backend: the node's `ray start`
    ray_started_at: float | None = None  # bringup started it
    ray_up_at: float | None = None  # it said its runtime is in the cluster
    ray_exited: bool = False
    ray_exit_code: int | None = None
    ray_last_line: str = ""
    ray_error_line: str | None = None  # its first line that says what went wrong
    ray_lines: int = 0

    @property
    def alive(self) -> bool:
        """Still running (as far as bringup has seen)."""
        return not self.exited and not self.ray_exited


# Ray's own lines (ray 2.60 ``ray start --block``, python/ray/scripts/scripts.py): the node's
# runtime is up once it registered with the head's GCS (``Node`` waits for that before this
# line); with --block it then watches its daemons, and when one dies it says which and exits 1
RAY_UP = re.compile(r"Ray runtime started\.")
RAY_ERROR = re.compile(
    r"Some Ray subprocesses exited unexpectedly|\[exit code=-?\d+\]|Version mismatch|"
    r"(?:Connection|Runtime|Value)Error\b|Failed to connect to GCS|Unable to connect to GCS|"
    r"\bERROR\b.*--|^\w+Error: "
)
RAY_DAEMON_EXIT = re.compile(r"(?P<daemon>[A-Za-z_]+) \[exit code=(?P<code>-?\d+)\]")
# Ray's prefix on a line of one of its workers that the driver prints: the worker's node is
# named by its address when it is not the driver's (vLLM 0.32 RayWorkerProc / older RayWorkerWrapper)
RAY_WORKER_PREFIX = re.compile(
    r"\((?P<actor>[A-Za-z_][\w.]*) pid=(?P<pid>\d+)(?:, ip=(?P<ip>[0-9A-Fa-f.:]+))?\)"
)


class ClusterMachine:
    """The verdict of a startup over several nodes, from what each node's log and exit say.

    Each node has its own ``StartupMachine`` (phases, root-cause lines, exit); rank 0's
    also takes the HTTP probes. Ready only when rank 0 answered the smoke request *and*
    every node is alive. The first node to fail names the failure (the others' errors
    follow from it). A node that has not joined the group ``join_seconds`` after node 0
    reached the rendezvous (from then on its store waits for the others) fails, with its last "cannot
    reach" line if it printed one; before that, slow imports are no join problem (rank 0's
    stall limit covers a node that shows nothing). Sooner, where the log already tells:
    a node whose rendezvous (or retry) line names another address than the head's fails at
    once, and a node at the rendezvous together with node 0 that has not joined
    ``meet_seconds`` later fails then (healthy nodes meet within seconds of both being there),
    as does a node that has printed nothing ``meet_seconds`` after node 0 reached it (node 0
    imported, spawned its engine and waits: the same work, done, on the other node).
    Every node's pending failure (an unknown exception) settles after the grace, not only at
    its exit.
    """

    def __init__(
        self,
        plan: ClusterPlan,
        spec: MultiNodeSpec,
        policy: StartupPolicy,
        start: float,
        *,
        join_seconds: float | None = 60.0,
        meet_seconds: float | None = 30.0,
    ) -> None:
        self.plan = plan
        self.spec = spec
        self.start = start
        self.join_seconds = join_seconds
        self.meet_seconds = (
            None
            if join_seconds is None or meet_seconds is None
            else min(join_seconds, meet_seconds)
        )
        quiet = dataclasses.replace(
            policy, stall_seconds=None, deadline_seconds=None, liveness_interval_seconds=0.0
        )
        self.runs = [
            NodeRun(node, StartupMachine(policy if node.rank == 0 else quiet, start))
            for node in plan.nodes
        ]
        self.state = State.STARTING
        self.failure: Failure | None = None
        self.failed_rank: int | None = None
        self.ended_at: float | None = None
        self.by_ip = {ip: n.rank for n in plan.nodes if (ip := _node_ip(n)) is not None}
        self.serve_started_at: float | None = None  # Ray: the engine started on node 0

    @property
    def rank0(self) -> StartupMachine:
        """Rank 0's machine: it serves, so the probes and the readiness are its."""
        return self.runs[0].machine

    @property
    def is_terminal(self) -> bool:
        """A verdict other than ready was reached (or the user stopped it)."""
        return self.state in (State.FAILED, State.STALLED, State.STOPPED)

    def _tag(self, rank: int, events: Sequence[ClusterEvent]) -> list[ClusterEvent]:
        node = self.plan.nodes[rank]
        return [e if isinstance(e, NodeEvent) else NodeEvent(e, node.address, rank) for e in events]

    def _settle(self, rank: int, events: Sequence[ClusterEvent], now: float) -> list[ClusterEvent]:
        out = self._tag(rank, events)
        if self.is_terminal:
            return out
        machine = self.runs[rank].machine
        if machine.state in (State.FAILED, State.STALLED):
            self.state = machine.state
            self.failure = machine.failure
            self.failed_rank = rank
            self.ended_at = now
            return out
        ready = self.state is State.STARTING and self.rank0.state is State.READY
        if ready and all(r.alive for r in self.runs) and self.cluster_up:
            self.state = State.READY
        return out

    # -- the Ray backend ---------------------------------------------------------------------

    @property
    def cluster_up(self) -> bool:
        """Every node's Ray runtime is in the cluster (always, without the Ray backend)."""
        return not self.plan.is_ray or all(
            r.ray_up_at is not None and not r.ray_exited for r in self.runs
        )

    def ray_started(self, rank: int, now: float) -> None:
        """bringup started node ``rank``'s ``ray start``."""
        self.runs[rank].ray_started_at = now

    def serve_started(self, now: float) -> None:
        """bringup started the engine on node 0 (the cluster was up)."""
        self.serve_started_at = now

    def rank_of_line(self, rank: int, text: str) -> int:
        """The node a line of node ``rank``'s engine log comes from. With the Ray backend the
        one engine log (node 0's) carries every worker's lines, and a worker's line names its
        node's address (``(RayWorkerProc pid=N, ip=X)``); any other line is node 0's own."""
        if not self.plan.is_ray:
            return rank
        for m in RAY_WORKER_PREFIX.finditer(text):
            ip = m["ip"]
            if ip is not None:
                return self.by_ip.get(ip, 0)
        return 0

    def on_ray_line(self, rank: int, text: str, now: float) -> list[ClusterEvent]:
        """A line of node ``rank``'s ``ray start``."""
        run = self.runs[rank]
        run.ray_lines += 1
        if text.strip(" -"):
            run.ray_last_line = text
        if run.ray_error_line is None and RAY_ERROR.search(text):
            run.ray_error_line = text
        elif (
            RAY_DAEMON_EXIT.search(text)
            and run.ray_error_line is not None
            and "exited unexpectedly" in run.ray_error_line
        ):
            run.ray_error_line = text  # which daemon, and how: the cause
        if run.ray_up_at is None and RAY_UP.search(text):
            run.ray_up_at = now
            return self._tag(rank, [Joined(now - self.start, now - self.start, runtime="ray")])
        return []

    def on_ray_exit(self, rank: int, exit_code: int | None, now: float) -> list[ClusterEvent]:
        """Node ``rank``'s ``ray start`` ended (its runtime is gone from the cluster)."""
        run = self.runs[rank]
        run.ray_exited, run.ray_exit_code = True, exit_code
        if self.is_terminal:
            return []
        code = "with an unknown status" if exit_code is None else f"with status {exit_code}"
        line = run.ray_error_line or run.ray_last_line
        m = RAY_DAEMON_EXIT.search(line or "")
        why = f" ({m['daemon']} exited with code {m['code']})" if m else ""
        if self.state is State.READY:
            summary = f"{run.node.label}'s Ray runtime exited {code}{why} after the model was ready"
            remedy = "the engine's workers on that node are gone; read its Ray logs, then start all nodes again"
        elif run.ray_up_at is None:
            summary = f"{run.node.label}'s `ray start` exited {code} before it joined the Ray cluster{why}"
            remedy = (
                "read the node's `ray start` lines above (the head's address and port, the same "
                "Ray and Python on every node)"
            )
        else:
            summary = f"{run.node.label}'s Ray runtime exited {code}{why}: the engine loses the workers placed there"
            remedy = "read the node's Ray logs (its run folder's ray-logs) for why the daemon ended"
        failure = Failure(
            failure_class=FailureClass.ENGINE_CORE_DIED,
            phase=run.machine.phase,
            line=line,
            line_number=run.ray_lines,
            summary=summary,
            remedy=(Remedy(remedy[0].upper() + remedy[1:] + "."),),
        )
        return self._fail(run, now, failure)

    def _fail(self, run: NodeRun, now: float, failure: Failure) -> list[ClusterEvent]:
        self.state, self.failure, self.failed_rank, self.ended_at = (
            State.FAILED,
            failure,
            run.node.rank,
            now,
        )
        return self._tag(run.node.rank, [FailureFound(now - self.start, failure)])

    def _placement_wait(self, text: str, now: float) -> list[ClusterEvent]:
        """The engine waits for a placement group the cluster cannot place: it would wait its
        whole limit (30 minutes) for resources that are not there."""
        ray = self.spec.ray
        if ray is None or (m := ray.placement_wait.search(text)) is None:
            return []
        key = ray.gpu_device_key
        failure = Failure(
            failure_class=FailureClass.CONFIG_ERROR,
            phase=self.rank0.phase,
            line=text,
            line_number=self.rank0.line_count,
            summary=(
                f"the Ray cluster cannot place the engine's placement group {m['specs']}: "
                f"{self.plan.devices_needed} bundles of 1 {key} over {len(self.plan.nodes)} nodes; "
                f"the engine would wait {ray.placement_wait_seconds // 60} minutes for it"
            ),
            remedy=(
                Remedy(
                    f"Check `ray status` on node 0: another job may hold {key}s, or a node's Ray "
                    f"registered fewer than it has; lower -tp/-pp or free the {key}s."
                ),
            ),
        )
        return self._fail(self.runs[0], now, failure)

    def _ray_tick(self, now: float) -> list[ClusterEvent]:
        """A node whose ``ray start`` has not joined ``join_seconds`` after it was started."""
        if self.join_seconds is None or self.serve_started_at is not None:
            return []
        late = [
            run
            for run in self.runs
            if run.ray_up_at is None
            and run.ray_started_at is not None
            and not run.ray_exited
            and now - run.ray_started_at >= self.join_seconds
        ]
        if not late:
            return []
        run = late[0]
        head = _show((self.plan.master_addr, self.plan.master_port))
        said = f"; its last line: {run.ray_last_line}" if run.ray_last_line else ""
        return self._fail(
            run,
            now,
            Failure(
                failure_class=FailureClass.NCCL_ERROR,
                phase=run.machine.phase,
                line=run.ray_error_line or run.ray_last_line,
                line_number=run.ray_lines,
                summary=(
                    f"{run.node.label}'s `ray start` has not joined the Ray cluster at {head} "
                    f"{self.join_seconds:g} s after it started{said}"
                ),
                remedy=(
                    Remedy(
                        f"Make node 0's address ({self.plan.master_addr}) and port "
                        f"{self.plan.master_port} reachable from node {run.node.rank}, and check "
                        "its `ray start` runs by hand."
                    ),
                ),
            ),
        )

    def on_line(
        self, rank: int, text: str, events: Sequence[Event], now: float
    ) -> list[ClusterEvent]:
        """A line of node ``rank``'s log and what its analyzer made of it."""
        run = self.runs[rank]
        run.machine.on_line(text, now)
        out: list[ClusterEvent] = []
        if self.plan.is_ray:  # Ray places the workers: no rendezvous of the engine's own to watch
            for event in events:
                out.extend(run.machine.on_event(event, now))
            out = self._settle(rank, out, now)
            if not self.is_terminal:
                out.extend(self._placement_wait(text, now))
            return out
        if run.waiting_at is None and (found := self.spec.rendezvous.search(text)):
            run.waiting_at = now
            run.meets_at = tcp_address(found.groupdict().get("method") or "")
            if run.meets_at is not None and run.node.rank > 0:
                run.rendezvous_line = text
        if run.joined_at is None and self.spec.joined.search(text):
            run.joined_at = now
            out.append(Joined(now - self.start, now - self.start))
        elif run.joined_at is None and self.spec.cannot_reach.search(text):
            run.unreachable_line = text
        for event in events:
            out.extend(run.machine.on_event(event, now))
        out = self._settle(rank, out, now)
        if not self.is_terminal and self.state is State.STARTING:
            out.extend(self._elsewhere(now))
        return out

    def _head(self) -> tuple[str, int]:
        """Where the others must meet node 0: as node 0 said, else as the command says."""
        return self.runs[0].meets_at or (self.plan.master_addr, self.plan.master_port)

    def _elsewhere(self, now: float) -> list[ClusterEvent]:
        """A node that meets the others at another address than the head's fails at once:
        it would retry until the timeout while node 0 waits (real-parts §4, wrong --master-addr)."""
        head = self._head()
        if self.runs[0].meets_at is None and not _is_ip(self.plan.master_addr):
            return []  # a host name: node 0's own line will say how the engine spells it
        for run in self.runs[1:]:
            if run.joined_at is not None or not run.alive:
                continue
            tried: tuple[str, int] | None = None
            line = None
            if run.unreachable_line is not None:
                m = self.spec.cannot_reach.search(run.unreachable_line)
                tried = tcp_address(m["addr"]) if m else None
                line = run.unreachable_line
            if tried is None and run.meets_at is not None:
                tried, line = run.meets_at, run.rendezvous_line
            if tried is None or line is None or _same_address(tried, head):
                continue
            return self._fail_join(
                run,
                now,
                summary=(
                    f"{run.node.label} connects to {_show(tried)}, but the head (node 0) listens at "
                    f"{_show(head)}: it would retry until the timeout while node 0 waits"
                ),
                line=line,
                remedy=Remedy(
                    f"Give every node the same {self.spec.master_addr_flag} (node 0's address, "
                    f"{head[0]}); look for what changes it on node {run.node.rank} (a wrapper "
                    "script, an alias, its own flags)."
                ),
                failure_class=FailureClass.CONFIG_ERROR,
            )
        return []

    def on_exit(
        self, rank: int, exit_code: int | None, failure: Failure | None, now: float
    ) -> list[ClusterEvent]:
        """Node ``rank``'s process ended; ``failure``: its analyzer's verdict on its log."""
        run = self.runs[rank]
        run.exited, run.exit_code = True, exit_code
        if self.is_terminal:
            return []
        if self.state is State.READY:
            failure = self._after_ready(run, exit_code, failure)
        return self._settle(rank, run.machine.on_exit(exit_code, failure, now), now)

    def _after_ready(self, run: NodeRun, exit_code: int | None, failure: Failure | None) -> Failure:
        """A node ended while the model was being served: say so, with what its log says."""
        code = "with an unknown status" if exit_code is None else f"with status {exit_code}"
        summary = f"{run.node.label} exited {code} after the model was ready"
        if run.node.rank:
            summary += " (rank 0 still answers /health, but the next request fails)"
        if failure is not None:
            return dataclasses.replace(
                failure, summary=f"{summary}: {failure.summary}", is_final=True
            )
        return Failure(
            failure_class=FailureClass.ENGINE_CORE_DIED,
            phase=Phase.READY,
            line=run.machine.last_line,
            line_number=run.machine.line_count,
            summary=summary,
            remedy=(
                Remedy(
                    f"Read node {run.node.rank}'s last lines for why it ended, then start all nodes again."
                ),
            ),
        )

    def on_probe(self, obs: ProbeObservation, now: float) -> list[ClusterEvent]:
        """An HTTP probe of rank 0 came back."""
        return self._settle(0, self.rank0.on_probe(obs, now), now)

    def tick(self, now: float) -> list[ClusterEvent]:
        """Time passed: stalls and deadline (rank 0), pending failures (every node), nodes
        that never joined."""
        if self.is_terminal:
            return []
        out = self._settle(0, self.rank0.tick(now), now)
        for run in self.runs[1:]:  # their policy has no stall or deadline: the grace only
            if self.ended_at is not None:  # (a failure ends the startup)
                return out
            out += self._settle(run.node.rank, run.machine.tick(now), now)
        if self.is_terminal or self.join_seconds is None or self.state is State.READY:
            return out
        if self.plan.is_ray:
            return out + self._ray_tick(now)
        head = self.runs[0].waiting_at or self.runs[0].joined_at  # its store listens from here on
        if head is None:
            return out
        waiting = [run for run in self.runs if run.joined_at is None and run.alive]
        meet = self.meet_seconds
        if meet is not None:
            met = [
                run
                for run in waiting
                if run.node.rank > 0
                and run.waiting_at is not None
                and now - max(head, run.waiting_at) >= meet
            ]
            if met:  # both at the rendezvous, and still apart
                return out + self._never_joined(met[0], now, meet)
            silent = [
                run
                for run in waiting
                if run.node.rank > 0 and run.machine.line_count == 0 and now - head >= meet
            ]
            if silent:  # node 0 imported, spawned and waits; this one never said a word
                return out + self._never_joined(silent[0], now, meet)
        if now - head < self.join_seconds:
            return out
        # a node that says it cannot reach the head is the cause; the others wait for it
        # and node 0, which hosts the store, waits for the others: it is blamed last
        waiting.sort(key=lambda run: (run.unreachable_line is None, run.node.rank == 0))
        if waiting:
            return out + self._never_joined(waiting[0], now, self.join_seconds)
        return out

    def _never_joined(self, run: NodeRun, now: float, limit: float) -> list[ClusterEvent]:
        plan = self.plan
        head = _show(self._head())
        waited = f"{limit:g} s"
        if run.unreachable_line is not None:
            m = self.spec.cannot_reach.search(run.unreachable_line)
            tried = m["addr"] if m else head
            summary = (
                f"{run.node.label} never connected to {tried} after {waited}: it keeps retrying"
            )
            if tried != head:
                summary += f" (the head, node 0, listens at {head})"
            line = run.unreachable_line
            remedy = Remedy(
                f"Make {self.spec.master_addr_flag} node 0's address as node {run.node.rank} sees it, and open port {plan.master_port} between the nodes."
            )
        elif run.waiting_at is not None and run.node.rank > 0:
            summary = (
                f"{run.node.label} reached the rendezvous with the head at {head} but has not "
                f"joined the group {waited} after both were there"
            )
            line = run.machine.last_line
            remedy = Remedy(
                f"The nodes also connect to each other, not only to port {plan.master_port}: "
                "open the ports between them, and make *_SOCKET_IFNAME name the interface "
                f"that reaches the other nodes on node {run.node.rank}."
            )
        elif run.machine.line_count == 0:
            summary = (
                f"{run.node.label} printed nothing {waited} after node 0 reached the rendezvous "
                f"at {head}: its server never started"
            )
            line = ""
            remedy = Remedy(
                f"Check that the command runs on node {run.node.rank} by hand (the same "
                "executable and environment as in the nodes file); its log is in the run folder."
            )
        else:
            summary = f"{run.node.label} did not join the group within {waited} of node 0 waiting at {head}"
            line = run.machine.last_line
            remedy = Remedy(
                f"Read node {run.node.rank}'s last lines; check it runs the same command, model and versions as node 0."
            )
        return self._fail_join(run, now, summary=summary, line=line, remedy=remedy)

    def _fail_join(
        self,
        run: NodeRun,
        now: float,
        *,
        summary: str,
        line: str,
        remedy: Remedy,
        failure_class: FailureClass = FailureClass.NCCL_ERROR,
    ) -> list[ClusterEvent]:
        failure = Failure(
            failure_class=failure_class,
            phase=run.machine.phase,
            line=line,
            line_number=run.machine.line_count,
            summary=summary,
            remedy=(remedy,),
        )
        return self._fail(run, now, failure)

    def stop(self, now: float) -> None:
        """The user asked to stop after ready: not a failure."""
        if not self.is_terminal:
            self.state = State.STOPPED
            self.ended_at = now


def tcp_address(text: str) -> tuple[str, int] | None:
    """``("10.0.0.1", 29501)`` from ``tcp://10.0.0.1:29501`` or ``10.0.0.1:29501`` (``[::1]:p``)."""
    rest = text.removeprefix("tcp://").rstrip("/,;")
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _same_address(a: tuple[str, int], b: tuple[str, int]) -> bool:
    return a[1] == b[1] and a[0].lower() == b[0].lower()


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _show(address: tuple[str, int]) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


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
