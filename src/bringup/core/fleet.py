"""The fleet view: an inventory of hosts and units, one row per service (pure).

The inventory is TOML (read with ``tomllib`` by the caller)::

    [[host]]
    address = "ops@gpu1"            # [user@]server[:port], as for --host
    units = ["vllm-llama"]
    accept_new_host_key = false     # optional

A row comes from ``bringup status``'s report of one unit, or, for a host that cannot be
reached, from the error (one row per unit, so the table still lists every service).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bringup.errors import InputError


@dataclass(frozen=True, slots=True)
class HostEntry:
    """One ``[[host]]`` of the inventory."""

    address: str
    units: tuple[str, ...]
    accept_new_host_key: bool = False


@dataclass(frozen=True, slots=True)
class GpuUse:
    """One GPU of a row: what ``nvidia-smi`` (or a readings file) says about it."""

    index: int
    name: str
    used_bytes: int
    total_bytes: int


@dataclass(frozen=True, slots=True)
class FleetRow:
    """One service: where it runs, how it is, and why not, when it is not."""

    host: str
    unit: str
    state: str | None  # "active/running", "failed/failed", ...
    verdict: str | None  # ready, failed, starting, unknown (bringup status's verdict)
    phase: str | None
    ready_since: str | None  # ISO 8601
    gpus: tuple[GpuUse, ...]
    last_failure: str | None  # "class: summary"
    error: str | None = None  # the host could not be asked


def parse_inventory(data: Mapping[str, Any], *, source: str = "inventory") -> list[HostEntry]:
    """The ``[[host]]`` tables, checked: every host has an address and at least one unit."""
    hosts = data.get("host")
    if not isinstance(hosts, list) or not hosts:
        raise InputError(
            f"{source}: no [[host]] tables",
            hint='add [[host]] address = "ops@gpu1" units = ["vllm"]',
        )
    entries = []
    for i, host in enumerate(hosts, start=1):
        where = f"{source}: host #{i}"
        if not isinstance(host, Mapping):
            raise InputError(f"{where}: not a table")
        address, units = host.get("address"), host.get("units")
        if not isinstance(address, str) or not address.strip():
            raise InputError(f"{where}: address missing", hint='address = "[user@]server[:port]"')
        if (
            not isinstance(units, list)
            or not units
            or not all(isinstance(u, str) and u for u in units)
        ):
            raise InputError(
                f"{where} ({address}): units must be a non-empty list of unit names",
                hint='units = ["vllm-llama"]',
            )
        accept = host.get("accept_new_host_key", False)
        if not isinstance(accept, bool):
            raise InputError(f"{where} ({address}): accept_new_host_key must be true or false")
        entries.append(HostEntry(address.strip(), tuple(units), accept))
    return entries


def parse_nvidia_smi(text: str) -> tuple[GpuUse, ...]:
    """``nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv,noheader,nounits``
    (MiB) as GPU values; lines that do not parse are left out."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4:
            continue
        try:
            gpus.append(
                GpuUse(
                    int(parts[0]),
                    parts[1],
                    int(float(parts[2]) * 2**20),
                    int(float(parts[3]) * 2**20),
                )
            )
        except ValueError:
            continue
    return tuple(gpus)


def row_from_status(
    host: str, report: Mapping[str, Any], gpus: Sequence[GpuUse] | None = None
) -> FleetRow:
    """A row from ``bringup status --json``'s object; ``gpus`` replaces the report's own GPUs."""
    state = report.get("state") or {}
    active, sub = state.get("active_state"), state.get("sub_state")
    failure = report.get("failure")
    last = None
    if failure:
        last = (
            ": ".join(str(p) for p in (failure.get("class"), failure.get("summary")) if p) or None
        )
    own = tuple(
        GpuUse(
            int(g["index"]),
            str(g.get("name", "GPU")),
            int(g.get("used_bytes", 0)),
            int(g.get("total_bytes", 0)),
        )
        for g in report.get("gpus") or ()
    )
    return FleetRow(
        host=host,
        unit=str(report.get("unit", "?")),
        state=f"{active}/{sub}" if active and sub else active,
        verdict=report.get("verdict"),
        phase=report.get("phase"),
        ready_since=report.get("ready_since"),
        gpus=tuple(gpus) if gpus is not None else own,
        last_failure=last,
    )


def rows_for_error(host: str, units: Sequence[str], message: str) -> list[FleetRow]:
    """One row per unit of a host that could not be asked, carrying the error."""
    return [FleetRow(host, unit, None, None, None, None, (), None, error=message) for unit in units]


def row_json(row: FleetRow) -> dict[str, Any]:
    """The ``--json`` object of a row: host, unit, state, phase, ready_since, gpus, last_failure, error."""
    return {
        "host": row.host,
        "unit": row.unit,
        "state": row.state,
        "verdict": row.verdict,
        "phase": row.phase,
        "ready_since": row.ready_since,
        "gpus": [
            {
                "index": g.index,
                "name": g.name,
                "used_bytes": g.used_bytes,
                "total_bytes": g.total_bytes,
            }
            for g in row.gpus
        ],
        "last_failure": row.last_failure,
        "error": row.error,
    }


def fleet_exit_code(rows: Sequence[FleetRow]) -> int:
    """0 every service ready; 1 any failed or unreachable; 3 otherwise (starting or unknown)."""
    if all(r.verdict == "ready" for r in rows):
        return 0
    if any(r.error is not None or r.verdict == "failed" for r in rows):
        return 1
    return 3
