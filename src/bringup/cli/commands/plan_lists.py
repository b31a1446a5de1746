"""``bringup plan --list-models`` and ``--list-gpus``: what the planner knows without a download.

Each bundled model with the Hugging Face ids it answers to, its architecture and context, and
the public ``config.json`` it was written from (its size is in its plan: synthesising 58
checkpoints to count them takes seconds each for the large MoE models); each GPU with its memory as CUDA reports it, its bandwidths and the
datasheet they come from. ``--json``: ``{"models": [...]}`` or ``{"gpus": [...]}``.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from bringup.adapters import model_catalog
from bringup.cli.main import Context
from bringup.core import gpu_catalog
from bringup.core.plan import parse_architecture
from bringup.render.console import make_console
from bringup.render.json_out import print_json
from bringup.units import format_bytes


def model_rows() -> list[dict[str, Any]]:
    """One object per bundled model (the ``--list-models --json`` items)."""
    rows = []
    for model in model_catalog.catalog():
        arch = parse_architecture(model_catalog.config(model))
        rows.append(
            {
                "name": model.name,
                "hf_ids": list(model.hf_ids),
                "architecture": arch.name,
                "model_type": arch.model_type,
                "quantization": (arch.quantization or {}).get("quant_method"),
                "max_position_embeddings": arch.max_position_embeddings,
                "source": model.source,
                "note": model.note,
            }
        )
    return rows


def gpu_rows() -> list[dict[str, Any]]:
    """One object per catalog GPU (the ``--list-gpus --json`` items)."""
    return [
        {
            "name": g.name,
            "aliases": list(g.aliases),
            "memory_bytes": g.memory_bytes,
            "memory_bandwidth_bytes_per_second": g.memory_bandwidth_bytes_per_second,
            "interconnect": g.interconnect,
            "interconnect_bytes_per_second": g.interconnect_bytes_per_second,
            "compute_capability": f"{g.compute_capability[0]}.{g.compute_capability[1]}",
            "unified_memory": g.unified,
            "source": g.source,
            "note": g.note,
        }
        for g in gpu_catalog.CATALOG
    ]


def list_models(ctx: Context, as_json: bool) -> int:
    """Print the bundled models; 0."""
    rows = model_rows()
    if as_json:
        print_json({"models": rows}, ctx.stdout)
        return 0
    table = Table(title=f"{len(rows)} bundled models (plan MODEL takes a name or an HF id)")
    for column in ("name", "architecture", "weights", "context", "Hugging Face ids"):
        table.add_column(column, justify="right" if column == "context" else "left")
    for r in rows:
        table.add_row(
            r["name"],
            r["architecture"],
            r["quantization"] or "unquantized",
            f"{r['max_position_embeddings']:,}",
            ", ".join(r["hf_ids"]),
        )
    make_console(ctx.stdout, ctx.environ).print(table)
    ctx.stdout.write("sources: bringup plan --list-models --json (each entry's source)\n")
    return 0


def list_gpus(ctx: Context, as_json: bool) -> int:
    """Print the GPU catalog; 0."""
    rows = gpu_rows()
    if as_json:
        print_json({"gpus": rows}, ctx.stdout)
        return 0
    table = Table(title=f"{len(rows)} GPUs (plan --gpu NAME; memory as CUDA reports it)")
    for column in ("name", "memory", "bandwidth", "link", "note"):
        table.add_column(column, justify="right" if column in ("memory", "bandwidth") else "left")
    for r in rows:
        note = ("unified memory (shared with the CPU); " if r["unified_memory"] else "") + r["note"]
        table.add_row(
            r["name"],
            format_bytes(r["memory_bytes"]),
            f"{r['memory_bandwidth_bytes_per_second'] / 1e9:,.0f} GB/s",
            f"{r['interconnect']} {r['interconnect_bytes_per_second'] / 1e9:,.0f} GB/s",
            note,
        )
    make_console(ctx.stdout, ctx.environ).print(table)
    ctx.stdout.write("sources: bringup plan --list-gpus --json (each entry's datasheet)\n")
    return 0
