"""A service on a remote host as seen from here: its URL, its GPUs (``nvidia-smi`` over ssh)."""

from __future__ import annotations

from collections.abc import Sequence

from bringup.adapters.ssh import SshRunner, SshTarget
from bringup.core import engine_args, packs
from bringup.core.endpoint import resolve_url
from bringup.core.fleet import parse_nvidia_smi
from bringup.core.gpu import GpuReading
from bringup.errors import RemoteError

_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


def probe_url(url: str, runner: object) -> str:
    """A URL the server gave for itself (``127.0.0.1:8000``) as seen from here: on the ssh host."""
    target = getattr(runner, "target", None)
    if not isinstance(target, SshTarget) or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    hostport, slash, path = rest.partition("/")
    host, colon, port = (
        hostport.rpartition(":") if not hostport.endswith("]") else (hostport, "", "")
    )
    if host not in _LOOPBACK:
        return url
    remote = f"[{target.host}]" if ":" in target.host else target.host
    return f"{scheme}://{remote}{colon}{port}{slash}{path}"


GPU_QUERY = [
    "nvidia-smi",
    "--query-gpu=index,name,memory.used,memory.total",
    "--format=csv,noheader,nounits",
]


def remote_gpus(runner: SshRunner) -> tuple[list[dict[str, object]], str | None]:
    """The remote host's GPUs through ``nvidia-smi`` (status's ``gpus`` shape), or a note why not."""
    try:
        result = runner.run(GPU_QUERY)
    except RemoteError as exc:
        return [], f"not read: {exc}"
    if result.returncode == 127:  # the shell's "command not found"
        return [], f"not read: {runner.target} has no nvidia-smi (no NVIDIA driver there)"
    if result.returncode != 0:
        detail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return (
            [],
            f"not read: {runner.target}: nvidia-smi exited with {result.returncode}: {detail}",
        )
    return [
        {"index": g.index, "name": g.name, "used_bytes": g.used_bytes, "total_bytes": g.total_bytes}
        for g in parse_nvidia_smi(result.stdout)
    ], None


class RemoteGpus:
    """The host's GPUs as a ``GpuSource`` (``nvidia-smi`` over ssh): what ``up --retry --host``
    waits on before a restart when the remedy is to wait for free GPUs."""

    def __init__(self, runner: SshRunner) -> None:
        self.runner = runner

    def read(self) -> list[GpuReading]:
        result = self.runner.check(GPU_QUERY)
        return [
            GpuReading(g.index, g.name, "", g.total_bytes, g.used_bytes)
            for g in parse_nvidia_smi(result.stdout)
        ]


def server_url(argv: Sequence[str], runner: SshRunner) -> str:
    """Where a remote server command (its ``--host``/``--port``, else the engine's default port)
    answers, as seen from here."""
    engine = engine_args.parse_server_command(list(argv)).engine if argv else None
    try:
        port = packs.get(engine).http.default_port if engine is not None else 8000
    except KeyError:
        port = 8000
    return probe_url(resolve_url(None, list(argv), port), runner)
