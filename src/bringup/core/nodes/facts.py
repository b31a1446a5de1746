"""What the pre-flight found on each node (``adapters.nodes`` gathers it), as plain values (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


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


def is_loopback(address: str) -> bool:
    return address.startswith("127.") or address == "::1"


def is_cpu_build(f: NodeFacts, spec_packages: Sequence[str]) -> bool:
    return "+cpu" in (f.packages.get("torch") or "") or any(
        "cpu" in p for p in spec_packages if f.packages.get(p)
    )


def first_version(packages: Mapping[str, str | None], names: Sequence[str]) -> str | None:
    return next((packages[n] for n in names if packages.get(n)), None)
