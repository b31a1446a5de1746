"""Real batch-1 decode measurements (``../shared/corpus/decode/points.jsonl``) beside the plan.

Each point gives its setup (model, GPU and count, interconnect and nodes, all-reduce backend,
tp, ep, dcp, KV dtype, CUDA graphs, context) and ``measured.decode_tok_s``. The point is planned with ``bringup plan
--json`` (its decode object) and scored: ceiling >= measured (always), measured within
+-25 % of "expected". Configs: ``../shared/corpus/memory/hf_configs/`` (``config_ref``), else a
bench/configs file or a bundled model; a point with none is named, not dropped.
bench_decode.py calls this (``--points``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONFIGS = Path(__file__).parent / "configs"
# points without config_ref: (substring of the model id, lower case) -> bench/configs file or
# bundled name; None: not plannable, with why
OTHER_MODELS: tuple[tuple[str, str | None, str], ...] = (
    ("llama-2-7b", "Llama-2-7B", ""),
    ("llama-2-70b", "Llama-2-70B", ""),
    ("qwen3-4b", "Qwen3-4B", ""),
    ("qwq-32b", "Qwen2.5-32B", "QwQ-32B has Qwen2.5-32B's architecture"),
    ("nemotron-super-49b", None, "Nemotron-Super-49B (DeciLM, per-layer shapes): no config"),
    ("qwen3.5-397b", None, "Qwen3.5 (hybrid gated delta net + attention): no config"),
)


@dataclass
class DecodeRow:
    """One measurement beside the plan."""

    id: str
    engine: str
    measured: float
    unplannable: str | None = None
    ceiling: float = 0.0
    expected: float = 0.0
    bound_by: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        """measured / expected."""
        return self.measured / self.expected if self.expected else 0.0


def interconnect(text: str) -> str | None:
    """The plan's --interconnect for the point's free text (None: one GPU or unknown).

    "no NVLink" and "NVLink bridge not mentioned" are PCIe. GPUs split across CPU sockets are
    ``pcie-numa`` (traffic staged through host memory) unless the text says P2P is on across
    them: NCCL then uses its P2P transport over the socket link (NCCL_P2P_LEVEL=SYS, NCCL's
    environment-variable docs), which is ``pcie``'s class, not a host-memory copy."""
    t = text.lower()
    if t in ("", "n/a"):
        return None
    t = re.sub(r"no nvlink|nvlink bridge not mentioned", "", t)
    if "p2p disabled" in t:
        return "pcie-numa"
    if "numa" in t or "dual-socket" in t or "two root" in t:
        return "pcie" if "p2p on" in t else "pcie-numa"
    if "nvlink" in t or "nvswitch" in t:
        return "nvlink"
    if "pcie" in t:
        return "pcie"
    return None


def nodes(text: str) -> tuple[int, str | None]:
    """The nodes a point's free text names ("2 nodes: NVLink intra-node + InfiniBand
    inter-node") and their network, as ``--nnodes`` and ``--node-interconnect`` take them
    ((1, None): one node)."""
    t = text.lower()
    found = re.search(r"(\d+) nodes", t)
    if found is None or int(found.group(1)) < 2:
        return 1, None
    network = next(
        (
            v
            for k, v in (("infiniband", "ib"), ("roce", "roce"), ("ethernet", "ethernet"))
            if k in t
        ),
        None,
    )
    return int(found.group(1)), network


def quantization(text: str, config: dict[str, Any] | None) -> str | None:
    """--quantization for the point's free text, when the config does not already say it."""
    t = text.lower()
    has = bool((config or {}).get("quantization_config"))
    if "nvfp4" in t:
        return "nvfp4"
    if "awq" in t:
        return "awq"
    if t.startswith("fp8") and not has:
        return "fp8"
    return None


def model_for(point: dict[str, Any], corpus: Path) -> tuple[str | None, str]:
    """(config path or bundled name, a note or why not plannable)."""
    ref = point.get("config_ref")
    if ref:
        path = (corpus / "decode" / ref).resolve()
        return (str(path), "") if path.is_file() else (None, f"{ref} absent")
    name = str(point.get("model") or "").lower()
    for needle, config, note in OTHER_MODELS:
        if needle in name:
            if config is None:
                return None, note
            path = CONFIGS / f"{config}.json"
            return (str(path) if path.is_file() else config), note
    return None, "no config for this model"


def flags_for(point: dict[str, Any], model: str, gpu: Any) -> tuple[list[str], list[str]]:
    """``bringup plan`` flags for a point, and notes on what was assumed."""
    import json

    notes: list[str] = []
    count = int(point.get("gpu_count") or 1)
    tp = point.get("tp")
    if tp is None:
        tp = count
        notes.append(f"TP not given: planned at TP {tp} (the GPU count)")
    config = json.loads(Path(model).read_text()) if Path(model).is_file() else None
    argv = [model, "--gpu", gpu.name, "-tp", str(tp), "--gpus", str(max(count, int(tp)))]
    link = interconnect(str(point.get("interconnect") or ""))
    if link and int(tp) > 1:
        argv += ["--interconnect", link]
    count_nodes, network = nodes(str(point.get("interconnect") or ""))
    if count_nodes > 1:
        argv += ["--nnodes", str(count_nodes)]
        if network:
            argv += ["--node-interconnect", network]
    if "--disable-custom-all-reduce" in str(point.get("allreduce_backend") or ""):
        argv.append("--disable-custom-all-reduce")
    q = quantization(str(point.get("quantization") or ""), config)
    if q:
        argv += ["--quantization", q]
    kv = str(point.get("kv_cache_dtype") or "auto").split()[0].lower()
    if kv.startswith("fp8"):
        argv += ["--kv-cache-dtype", "fp8"]
    if (point.get("ep") or 1) > 1:
        argv.append("--enable-expert-parallel")
    if (point.get("dcp") or 1) > 1:
        argv += ["-dcp", str(point["dcp"])]
    if point.get("context_tokens"):
        argv += ["--context-tokens", str(int(point["context_tokens"]))]
    if point.get("cuda_graphs") is False:
        argv.append("--enforce-eager")
    return argv, notes


def catalog_gpu(text: str) -> Any:
    """The catalog GPU the point's text names: the longest leading run of its words (sizes
    written "40GB") that the catalog knows, else the first piece between brackets or commas."""
    from bringup.core import gpu_catalog

    text = re.sub(r"(\d+) GB", r"\1GB", text)
    words = re.split(r"[\s(),;]+", text)
    for n in range(len(words), 0, -1):
        found = gpu_catalog.find(" ".join(words[:n]))
        if found is not None:
            return found
    for piece in re.split(r"[(),;]", text):
        found = gpu_catalog.find(piece.strip()) if piece.strip() else None
        if found is not None:
            return found
    for n in range(len(words), 0, -1):  # an ambiguous name: the fastest of its parts (a
        parts = gpu_catalog.candidates(" ".join(words[:n]))  # ceiling stays a bound)
        if parts:
            return max(parts, key=lambda g: g.memory_bandwidth_bytes_per_second)
    return None


Decoder = Callable[[list[str]], dict[str, Any]]


def evaluate(point: dict[str, Any], corpus: Path, decode: Decoder) -> DecodeRow:
    """Plan one measurement's setup and put the plan beside it."""
    row = DecodeRow(
        point["id"], str(point.get("engine") or ""), float(point["measured"]["decode_tok_s"])
    )
    model, note = model_for(point, corpus)
    if model is None:
        row.unplannable = note
        return row
    if note:
        row.notes.append(note)
    gpu = catalog_gpu(str(point.get("gpu") or ""))
    if gpu is None:
        row.unplannable = f"GPU not in the catalog: {point.get('gpu')}"
        return row
    argv, notes = flags_for(point, model, gpu)
    row.notes += notes
    try:
        d = decode(argv)
    except SystemExit as exc:
        row.unplannable = f"plan refused: {str(exc)[-160:]}"
        return row
    row.ceiling = float(d["ceiling_tokens_per_s"])
    row.expected = float(d["expected_tokens_per_s"])
    row.bound_by = str(d["bound_by"])
    return row


def report(rows: list[DecodeRow], source: str) -> list[str]:
    """The markdown section: the goals' counts, then every point."""
    planned = [r for r in rows if r.unplannable is None]
    below = [r for r in planned if r.measured <= r.ceiling]
    within = [r for r in planned if abs(r.ratio - 1) <= 0.25]
    n = max(1, len(planned))
    lines = [
        f"## Real single-stream decode measurements: {source}",
        "",
        (
            f"{len(rows)} measurements; {len(planned)} planned, {len(rows) - len(planned)} "
            "not plannable (named below)."
        ),
        "",
        "| goal | points | result |",
        "|---|---|---|",
        f"| ceiling >= measured on all | {len(planned)} | {len(below)}/{len(planned)} |",
        (
            f"| measured within +-25 % of expected on >= 85 % | {len(planned)} | "
            f"{len(within)}/{len(planned)} = {100 * len(within) / n:.0f} % |"
        ),
        "",
        (
            "| point | engine | measured (tok/s) | plan ceiling | plan expected | measured / "
            "expected | bound by | notes |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in planned:
        over = " **above the ceiling**" if r.measured > r.ceiling else ""
        mark = "" if abs(r.ratio - 1) <= 0.25 else " (outside +-25 %)"
        lines.append(
            f"| {r.id} | {r.engine} | {r.measured:g} | {r.ceiling:.1f}{over} | "
            f"{r.expected:.1f} | {r.ratio:.2f}{mark} | {r.bound_by} | {'; '.join(r.notes)} |"
        )
    lines += ["", "Not plannable:", ""]
    lines += [f"- {r.id}: {r.unplannable}" for r in rows if r.unplannable]
    return lines
