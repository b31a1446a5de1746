"""`bringup plan` against 50 real vLLM startups (a script, not a test): per point and medians.

    .venv/bin/python bench/bench_plan_memory.py [--data ../shared/corpus/memory/vllm-memory.jsonl]
                                                [--out bench/results/plan_memory.md]

Each point of ``vllm-memory.jsonl`` (read from ../shared, never copied here) is planned with
the settings it ran with (model config bundled in bringup or written from the model's public
config in bench/configs/, GPU, TP, utilization, max_model_len, max_num_seqs, KV dtype,
quantization, eager, vLLM version), and the plan is compared with what vLLM printed:

- **weights** per GPU: "Model loading took X GiB" (also "Loading model weights took X GB",
  which is GiB too);
- **KV bytes per token**: the pool over the tokens vLLM reported for it ("Available KV cache
  memory" / "GPU KV cache size"; V0: ``kv_cache_size`` / ``# GPU blocks`` x 16), against the
  tokens the plan's own reporting rule gives for that pool (``plan.kv_cache`` arithmetic for
  the version), so the per-token cost and the version's reporting are both checked;
- **KV tokens**: the plan's prediction from the GPU's memory, only where the GPU's memory is
  known (a GiB figure in the log or a catalog GPU named in the log);
- **verdict**: fits vs the startup's outcome, on points whose outcome is a memory outcome
  (ready, cuda_oom, kv_cache_insufficient, gpu_memory_utilization).

Points that cannot be used say why (no public config written, a multimodal/hybrid-Mamba model
the planner does not model, no model name, a GGUF checkpoint).

**In-sample or not.** The planner's memory constants (``core/plan/peaks.py``: kernel
workspace 256 MiB, CUDA context 512 MiB, NCCL 256 MiB, non-torch growth 96/256 MiB, graph
pool 0.40/0.70 MiB per layer per captured size) are fixed numbers, not fitted by code: they
were set once (commit 26939af, before this corpus was used) from the public figures collected
in ``shared/reference/memory.md`` (graphs: Llama-3-8B on an H100, 0.67 GiB, and Qwen3-235B TP8
EP on L40S, 3.45 GiB; non-torch 0.2-0.5 GiB per GPU), and have not changed since. The
per-version rules were, however, written while reading these startups, so the KV-token median
is an in-sample figure, not a held-out one. The one scale the corpus can refit is the graph
pool's: 31 startups print "Graph capturing finished ... took X GiB". The bench refits one
factor ``k = median(measured / planned graph pool)`` and reports the KV-token median (a) as
shipped, (b) with ``k`` fitted on every point (in-sample), (c) leave-one-out: each point's
prediction uses ``k`` fitted without that point. The graph pool enters the KV budget only
from vLLM 0.21 (before, it is captured outside the budget), so only those points move; the
KV tokens are taken as proportional to the pool, as for the bytes-per-token check. The
activation and non-torch constants cannot be refit here: no point prints them apart (the five
V0 breakdowns mix the profile peak with non-torch memory differently per version).
"""

from __future__ import annotations

import argparse
import io
import json
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "bench" / "configs"
_SHARED = next(
    (p / "shared" for p in (ROOT.parent, ROOT.parent.parent) if (p / "shared").is_dir()),
    ROOT.parent / "shared",
)
DEFAULT_DATA = _SHARED / "corpus" / "memory" / "vllm-memory.jsonl"
DEFAULT_BATCH2 = _SHARED / "corpus" / "memory" / "batch2.jsonl"
GiB = 1024**3

# (substring of the model name, lower case) -> (config: bundled name or bench/configs file,
# --quantization to pass, or None for the point's own)
MODELS: tuple[tuple[str, str, str | None], ...] = (
    ("qwen3-coder-30b-a3b", "Qwen3-30B-A3B-2507", None),
    ("qwen3-30b-a3b-thinking-2507-awq", "Qwen3-30B-A3B-2507", "w4a16"),
    ("qwen3-30b-a3b-instruct-2507", "Qwen3-30B-A3B-2507", None),
    ("qwen3-30b-a3b", "Qwen3-30B-A3B", None),
    ("tinyllama", "TinyLlama-1.1B", None),
    ("meta-llama-3.1-70b", "Llama-3.1-70B", None),
    ("llama-3.1-8b", "Llama-3.1-8B", None),
    ("llama-3-8b", "Llama-3-8B", None),
    ("llama-3.2-1b", "Llama-3.2-1B", None),
    ("deepseek-r1-distill-qwen-32b", "DeepSeek-R1-Distill-Qwen-32B", None),
    ("deepseek-r1-distill-qwen-14b-awq", "DeepSeek-R1-Distill-Qwen-14B-AWQ", None),
    ("deepseek-r1-distill-qwen-14b-fp8", "DeepSeek-R1-Distill-Qwen-14B", None),
    ("qwen-3/transformers/8b", "Qwen3-8B", None),
    ("minimax-m2.5", "MiniMax-M2.5", None),
    ("dialogpt-small", "DialoGPT-small", None),
    ("qwen2.5-14b-instruct-awq", "Qwen2.5-14B-AWQ", None),
    ("qwen2.5-32b", "Qwen2.5-32B", None),
    ("mistral-7b-instruct-v0.3", "Mistral-7B-v0.3", None),
    ("gpt-oss-20b", "gpt-oss-20b", None),
    ("gpt-oss-120b", "gpt-oss-120b", None),
    ("qwen2-7b", "Qwen2-7B", None),
    ("phi-3-mini-4k", "Phi-3-mini-4k", None),
    ("qwen2.5-coder-7b", "Qwen2.5-7B", None),
    ("qwen2.5-7b", "Qwen2.5-7B", None),
    ("qwen2___5-7b", "Qwen2.5-7B", None),
    ("qwen2___5-3b", "Qwen2.5-3B", None),
    ("qwen2.5-0.5b-instruct-awq", "Qwen2.5-0.5B-AWQ", None),
    ("gemma-3-27b", "gemma-3-27b", None),
    ("mixtral 8x7b awq", "Mixtral-8x7B", "awq"),
)
UNUSABLE: tuple[tuple[str, str], ...] = (
    ("gemma-4", "Gemma-4 (multimodal, per-layer embeddings): no public config written here"),
    ("qwen3.5-27b", "Qwen3.5 (hybrid gated-delta-net + attention): config not written here"),
    ("qwen3.6-27b", "Qwen3.6 (hybrid gated-delta-net + attention): config not written here"),
    ("dotsocr", "dots.ocr is a vision-language model: the encoder's profile is not modelled"),
    ("dots.ocr", "dots.ocr is a vision-language model: the encoder's profile is not modelled"),
    ("gemma-3-12b", "gemma-3-12b QAT AWQ: config not written here"),
    ("glm-5", "GLM-5 (MLA + sparse indexer): config not written here"),
    ("qwen2.5-vl", "Qwen2.5-VL is a vision-language model: the encoder's profile is not modelled"),
    ("jamba", "Jamba is a Mamba hybrid with experts_int8: not modelled"),
    ("llama-4-maverick", "Llama-4 Maverick (PP 3 over Ray, truncated name): config not written"),
    (".gguf", "a GGUF checkpoint served by vLLM: the vLLM planner reads safetensors configs"),
    ("/data/model/llama", "the log does not say which Llama"),
)
# GPUs named in the logs that the catalog lacks: total memory as CUDA reported it in a log
EXTRA_GPUS = {"tesla t4": 14.56, "gfx1201": 15.92}
MEMORY_OUTCOMES = {"ready", "cuda_oom", "kv_cache_insufficient", "gpu_memory_utilization"}


@dataclass
class Row:
    """One point: what was planned, what vLLM said, and the errors."""

    file: str
    model: str
    version: str
    config: str | None = None
    gpu: str = "?"
    unusable: str | None = None
    weights: tuple[float, float] | None = None  # (predicted GiB, measured GiB)
    bytes_per_token: tuple[float, float] | None = None  # (predicted, measured)
    kv_tokens: tuple[int, int] | None = None  # (predicted, measured)
    kv_tokens_note: str = ""
    verdict: tuple[str, str] | None = None  # (predicted, real)
    confidence: str = "certain"  # the plan's verdict confidence ("certain" before it had one)
    because: list[str] = field(default_factory=list)  # the plan's uncertain_because
    notes: list[str] = field(default_factory=list)
    graph: tuple[float, float] | None = None  # graph pool (planned GiB, measured "took" GiB)
    graph_in_budget: bool = False  # the plan charges the graph pool to the KV budget (0.21+)
    kv_pool: float = 0.0  # the plan's KV pool per GPU, bytes
    sizes: tuple[int, int] | None = None  # CUDA-graph capture sizes (planned, the log's)

    @staticmethod
    def err(pair: tuple[float, float] | None) -> float | None:
        """Relative error of a (predicted, measured) pair."""
        if pair is None or not pair[1]:
            return None
        return (pair[0] - pair[1]) / pair[1]


def checked_configs() -> set[str]:
    """The config files bench/configs/README.md marks as checked ("yes" in its last column)."""
    readme = CONFIGS / "README.md"
    rows = [line.split("|") for line in readme.read_text().splitlines() if line.startswith("| ")]
    return {
        cells[1].strip()
        for cells in rows
        if len(cells) >= 4 and cells[-2].strip().startswith("yes")
    }


def _config(model: str) -> tuple[str | None, str | None, str | None]:
    """(config name, quantization override, reason unusable) for a point's model name."""
    name = model.lower()
    for needle, why in UNUSABLE:
        if needle in name:
            return None, None, why
    for needle, config, quant in MODELS:
        if needle in name:
            return config, quant, None
    return None, None, "no config written for this model"


def _config_path(name: str) -> str:
    written = CONFIGS / f"{name}.json"
    return str(written) if written.exists() else name


def _version(text: str) -> str | None:
    """``"0.6.4.post1"`` → ``"0.6.4"``, ``"0.8.x V0"`` → ``"0.8"`` (the patch matters to V0)."""
    m = re.search(r"\d+\.\d+(?:\.\d+)?", text or "")
    return m.group() if m else None


def _catalog_gpu(point: dict[str, Any]) -> Any:
    from bringup.core import gpu_catalog

    for probe in re.split(r"[(),;]| on ", point.get("gpu_model") or ""):
        probe = re.sub(r"^\s*\d+x\s*", "", probe).strip()
        model = gpu_catalog.find(probe) if probe else None
        if model is not None:
            return model
    return None


def _gpu_memory_gib(point: dict[str, Any]) -> tuple[float | None, str]:
    """Total GPU memory as CUDA reports it (GiB) and where the figure came from."""
    text = point.get("gpu_memory") or ""
    m = re.search(r"([\d.]+)\s*GiB", text)
    if m:
        return float(m.group(1)), "log"
    m = re.search(r"(\d+)\s*MiB", text)
    if m:
        return int(m.group(1)) / 1024, "nvidia-smi"
    name = (point.get("gpu_model") or "").lower()
    for key, gib in EXTRA_GPUS.items():
        if key in name:
            return gib, "log of the same GPU"
    model = _catalog_gpu(point)
    if model is not None:
        return model.memory_bytes / GiB, f"catalog {model.name}"
    return None, "unknown"


def _num(pattern: str, text: str | None) -> float | None:
    m = re.search(pattern, text or "")
    return float(m.group(1).replace(",", "")) if m else None


def _measured(rep: dict[str, str]) -> dict[str, float]:
    out: dict[str, float] = {}
    w = _num(r"took ([\d.]+) ?Gi?B", rep.get("model_loading"))
    if w is not None:
        out["weights"] = w
    kv = _num(r"Available KV cache memory: ([\d.]+) GiB", rep.get("available_kv_cache"))
    v0 = _num(r"kv_cache_size=([\d.]+)GiB", rep.get("v0_memory_profiling_results"))
    v0 = v0 if v0 is not None else _num(r"KV Cache is ([\d.]+)GiB", rep.get("v0_profile_breakdown"))
    if kv is not None or v0 is not None:
        out["kv_gib"] = kv if kv is not None else v0  # type: ignore[assignment]
    tokens = _num(r"GPU KV cache size: ([\d,]+) tokens", rep.get("gpu_kv_cache_size"))
    blocks = _num(r"# GPU blocks: (\d+)", rep.get("gpu_blocks"))
    if tokens is not None:
        out["tokens"] = tokens
    elif blocks is not None:
        out["tokens"] = blocks * 16
        out["v0"] = 1
    if "v0_profile_breakdown" in rep or "v0_memory_profiling_results" in rep:
        out["v0"] = 1
    return out


LOGS = _SHARED / "corpus" / "logs" / "vllm"


def logged_capture_sizes(corpus_file: str) -> int | None:
    """How many batch sizes the startup captured graphs for, as its log says: "Profiling CUDA
    graph memory: PIECEWISE=N", the "Capturing CUDA graphs (..PIECEWISE..): n/N" bar (or the
    plain one), else the length of the ``cudagraph_capture_sizes`` list in its config."""
    path = LOGS / corpus_file
    if not path.is_file():
        return None
    text = path.read_text(errors="replace")
    for pattern in (
        r"Profiling CUDA graph memory: PIECEWISE=(\d+)",
        r"Capturing CUDA graphs? \([^)]*PIECEWISE[^)]*\):[^\n]*?\d+/(\d+)",
        r"Capturing CUDA graphs? \(PIECEWISE\):[^\n]*?\d+/(\d+)",
        r"Capturing CUDA graph shapes:[^\n]*?\d+/(\d+)",
    ):
        m = re.search(pattern, text)
        if m:
            return int(m.group(1))
    m = re.search(r"cudagraph_capture_sizes\"?:\s*\[([\d,\s]+)\]", text)
    return len([s for s in m.group(1).split(",") if s.strip()]) if m else None


def _says_v1_engine(corpus_file: str) -> bool:
    path = LOGS / corpus_file
    return path.is_file() and "Initializing a V1 LLM engine" in path.read_text(errors="replace")


def planned_capture_sizes(plan: dict[str, Any]) -> int:
    """The capture sizes the plan's graph pool is for (``per_gpu.cuda_graph_capture_sizes``:
    ``core.vllm_compile.graph_capture``, the engine flags' sizes and mode read per version)."""
    return len(plan["per_gpu"]["cuda_graph_capture_sizes"])


def _plan(argv: list[str], environ: dict[str, str]) -> tuple[int, dict[str, Any] | None, str]:
    from bringup.cli.main import Context, main

    out, err = io.StringIO(), io.StringIO()
    code = main(["plan", *argv, "--json"], Context(stdout=out, stderr=err, environ=environ))
    try:
        return code, json.loads(out.getvalue()), err.getvalue()
    except json.JSONDecodeError:
        return code, None, err.getvalue()


def evaluate(point: dict[str, Any]) -> Row:
    """Plan one point and compare."""
    model = point.get("model") or ""
    row = Row(point["corpus_file"][:3], model[-40:] or "(none)", point.get("vllm_version") or "")
    if not model:
        row.unusable = "the log does not name the model"
        return row
    config, quant, why = _config(model)
    if config is None:
        row.unusable = why
        return row
    row.config = config
    version = _version(row.version)
    gib, source = _gpu_memory_gib(point)
    row.gpu = f"{gib:.2f} GiB ({source})" if gib else "unknown"
    measured = _measured(point.get("reported") or {})
    tp = point.get("tensor_parallel_size") or 1
    argv = [
        _config_path(config),
        "--gpu-memory",
        f"{gib or 80}GiB",
        "--gpus",
        str(tp),
        "-tp",
        str(tp),
    ]
    catalog = _catalog_gpu(point)
    if catalog is not None:
        argv += ["--gpu", catalog.name]  # vLLM's defaults look at the name (A100)
    if "second instance on the same GPU" in (point.get("notes") or "") and gib:
        # the first instance (same config, gmu 0.1) holds at least its whole budget
        argv += ["--gpu-free", f"{gib * (1 - 0.1):.3f}GiB"]
        row.notes.append("free memory: the GPU minus the first instance's 0.1 budget")
    if version:
        argv += ["--engine-version", version]
    for flag, key in (
        ("--gpu-memory-utilization", "gpu_memory_utilization"),
        ("--max-model-len", "max_model_len"),
        ("--max-num-seqs", "max_num_seqs"),
    ):
        if point.get(key) is not None:
            argv += [flag, str(point[key])]
    if point.get("kv_cache_dtype") not in (None, "auto"):
        argv += ["--kv-cache-dtype", str(point["kv_cache_dtype"])]
    q = quant or point.get("quantization")
    if q:
        argv += ["--quantization", str(q)]
    if point.get("enforce_eager"):
        argv.append("--enforce-eager")
    environ = {"VLLM_USE_V1": "0"} if measured.get("v0") else {}
    if (
        version
        and tuple(map(int, version.split("."))) < (0, 8)
        and _says_v1_engine(point["corpus_file"])
    ):
        environ = {"VLLM_USE_V1": "1"}  # 0.7's V1 engine, opted into
    _code, plan, err = _plan(argv, environ)
    if plan is None:
        row.unusable = f"plan refused: {err.strip()[:120]}"
        return row
    g = plan["per_gpu"]
    if "weights" in measured:
        row.weights = (g["weights_bytes"] / GiB, measured["weights"])
    if "kv_gib" in measured and "tokens" in measured and measured["tokens"]:
        pool = measured["kv_gib"] * GiB
        measured_bpt = pool / measured["tokens"]
        predicted_tokens = _reported_tokens(plan, pool)
        row.bytes_per_token = (pool / predicted_tokens if predicted_tokens else 0.0, measured_bpt)
    if "tokens" in measured:
        if gib is None:
            row.kv_tokens_note = "GPU memory unknown"
        elif source.startswith("catalog") and "nominal" in source:
            row.kv_tokens_note = "GPU memory nominal"
        else:
            row.kv_tokens = (plan["kv_cache"]["tokens"], int(measured["tokens"]))
    outcome = point.get("startup_outcome")
    real = "fits" if outcome == "ready" else (point.get("failure_class") or outcome)
    if outcome == "ready" or (point.get("failure_class") in MEMORY_OUTCOMES):
        if gib is None:
            row.notes.append("verdict: GPU memory unknown")
        else:
            v = plan["verdict"]
            row.verdict = ("fits" if v["fits"] else str(v["failure_class"]), str(real))
            row.confidence = str(v.get("confidence") or "certain")
            row.because = [str(b) for b in v.get("uncertain_because") or []]
    if plan.get("warnings"):
        row.notes += plan["warnings"]
    graph = _num(r"took (-?[\d.]+) GiB", (point.get("reported") or {}).get("cuda_graph"))
    planned_graph = g["cuda_graph_bytes"] / GiB
    if graph is not None and graph > 0 and planned_graph > 0:
        row.graph = (planned_graph, graph)
    row.graph_in_budget = bool(plan["settings"]["cuda_graphs_in_budget"]) and planned_graph > 0
    row.kv_pool = float(g["kv_cache_bytes"])
    logged = logged_capture_sizes(point["corpus_file"])
    if logged is not None and not plan["settings"]["enforce_eager"]:
        row.sizes = (planned_capture_sizes(plan), logged)
    return row


def graph_scale(rows: list[Row], leave_out: Row | None = None) -> float | None:
    """The graph pool's one refittable factor: median of measured / planned over the points
    that print their pool (without ``leave_out``)."""
    ratios = [r.graph[1] / r.graph[0] for r in rows if r.graph and r is not leave_out]
    return statistics.median(ratios) if ratios else None


def tokens_with_graph_scale(row: Row, k: float | None) -> int | None:
    """The row's planned KV tokens with its graph pool scaled by ``k`` (0.21+: the pool is in
    the KV budget; the tokens follow the KV pool proportionally)."""
    if row.kv_tokens is None:
        return None
    planned = row.kv_tokens[0]
    if k is None or not row.graph_in_budget or row.kv_pool <= 0:
        return planned
    graphs = (row.graph[0] if row.graph else 0.0) * GiB
    if not graphs:
        return planned
    pool = max(0.0, row.kv_pool - (k - 1.0) * graphs)
    return int(planned * pool / row.kv_pool)


def loo_kv_errors(rows: list[Row]) -> tuple[list[float], list[float], float | None, int]:
    """(|KV err| with the graph scale fitted on all points, |KV err| leave-one-out, the
    all-points scale, how many KV-token points the scale moves)."""
    k_all = graph_scale(rows)
    fitted, loo, moved = [], [], 0
    for r in rows:
        if r.kv_tokens is None or not r.kv_tokens[1]:
            continue
        real = r.kv_tokens[1]
        a = tokens_with_graph_scale(r, k_all)
        b = tokens_with_graph_scale(r, graph_scale(rows, leave_out=r))
        fitted.append(abs((a or 0) - real) / real)
        loo.append(abs((b or 0) - real) / real)
        moved += int(r.graph_in_budget)
    return fitted, loo, k_all, moved


def _reported_tokens(plan: dict[str, Any], pool_bytes: float) -> int:
    """The tokens the plan's reporting rule gives for a pool of ``pool_bytes`` (same version)."""
    kv = plan["kv_cache"]
    pool = plan["per_gpu"]["kv_cache_bytes"]
    if not pool or not kv["tokens"]:
        return 0
    return int(kv["tokens"] * pool_bytes / pool)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f} %"


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "plan_memory.md"))
    parser.add_argument(
        "--batch2",
        default=str(DEFAULT_BATCH2),
        help="the second memory set (scored in the same run; '' to skip)",
    )
    parser.add_argument(
        "--batch2-out", default=str(ROOT / "bench" / "results" / "plan_memory_batch2.md")
    )
    parser.add_argument(
        "--note",
        action="append",
        default=[],
        help="a paragraph for the top (the load the measure wrapper printed, a comparison)",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    points = [json.loads(line) for line in Path(args.data).read_text().splitlines() if line.strip()]
    rows = [evaluate(p) for p in points]
    w = [abs(e) for r in rows if (e := Row.err(r.weights)) is not None]
    b = [abs(e) for r in rows if (e := Row.err(r.bytes_per_token)) is not None]
    t = [abs(e) for r in rows if (e := Row.err(r.kv_tokens)) is not None]  # type: ignore[arg-type]
    verdicts = [r.verdict for r in rows if r.verdict is not None]
    right = sum(1 for p, real in verdicts if p == real)
    sys.path.insert(0, str(ROOT / "bench"))
    import memory_batch2

    sure = memory_batch2.confidences([(r.verdict, r.confidence) for r in rows if r.verdict])
    usable = [r for r in rows if r.unusable is None]
    fitted, loo, k_all, moved = loo_kv_errors(usable)
    graphs = sum(1 for r in usable if r.graph)
    gp = [abs(e) for r in usable if (e := Row.err(r.graph)) is not None]
    sized = [r for r in usable if r.sizes]
    sizes_right = [r for r in sized if r.sizes and r.sizes[0] == r.sizes[1]]
    lines = [
        "# bringup plan against real vLLM memory figures",
        "",
        (
            f"{len(points)} startups in `../shared/corpus/memory/vllm-memory.jsonl`; "
            f"{len(usable)} planned, {len(points) - len(usable)} unusable (reasons below). "
            "Median |error| and how many points each figure has:"
        ),
        "",
        "| figure | points | median abs error | goal |",
        "|---|---|---|---|",
        f"| weights per GPU | {len(w)} | {_pct(_median(w))} | 2 % |",
        f"| KV bytes per token | {len(b)} | {_pct(_median(b))} | 1 % |",
        f"| KV tokens (GPU memory known) | {len(t)} | {_pct(_median(t))} | 8 % |",
        (
            f"| verdict right (memory outcomes, GPU known) | {len(verdicts)} | "
            f"{right}/{len(verdicts)} = {100 * right / max(1, len(verdicts)):.0f} % | 90 % |"
        ),
        (
            f"| verdicts right (certain only) / uncertain / wrong while certain | {len(verdicts)} "
            f"| {sure.cell()} ({sure.right_uncertain} right ones uncertain) | all / few / 0 |"
        ),
        f'| CUDA-graph pool (vs "Graph capturing ... took") | {len(gp)} | {_pct(_median(gp))} | - |',
        (
            f"| CUDA-graph capture sizes = the log's count | {len(sized)} | "
            f"{len(sizes_right)}/{len(sized)} exact | all |"
        ),
        "",
        *[line for note in args.note for line in (note, "")],
        (
            "In-sample or held out (module docstring): the memory constants are fixed numbers "
            "set from the public figures in shared/reference/memory.md, not fitted by code, and "
            "the per-version rules were written while reading these startups, so the KV-token "
            "figure above is in-sample. The one scale the corpus can refit is the CUDA-graph "
            f"pool's (measured on {graphs} planned points): refit on all of them it is "
            f"k = {k_all if k_all is None else round(k_all, 2)} x the plan's estimate; the pool "
            f"is in the KV budget on {moved} of the {len(t)} KV-token points (vLLM 0.21+), the "
            "others do not move."
        ),
        "",
        "| KV tokens, median abs error | points | value |",
        "|---|---|---|",
        f"| as shipped (fixed constants) | {len(t)} | {_pct(_median(t))} |",
        f"| graph scale refit on all points (in-sample) | {len(fitted)} | {_pct(_median(fitted))} |",
        f"| graph scale leave-one-out | {len(loo)} | {_pct(_median(loo))} |",
        "",
    ]
    for r in usable:
        if r.kv_tokens is None or not r.graph_in_budget:
            continue
        k = graph_scale(usable, leave_out=r)
        moved_to = tokens_with_graph_scale(r, k)
        pool = (
            f"; graph pool planned {r.graph[0]:.2f} GiB, vLLM captured {r.graph[1]:.2f} GiB"
            if r.graph
            else ""
        )
        lines.append(
            f"- {r.file} (vLLM {r.version[:6]}): KV tokens planned {r.kv_tokens[0]:,}, "
            f"leave-one-out k = {k if k is None else round(k, 2)} gives {moved_to or 0:,}, "
            f"vLLM {r.kv_tokens[1]:,}{pool}"
        )
    lines += [
        "",
        (
            "| log | model | vLLM | config | GPU | weights err | bytes/token err | KV tokens "
            "(plan / vLLM) | KV err | verdict (plan / real) | notes |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    wrong_sizes = [r for r in sized if r.sizes and r.sizes[0] != r.sizes[1]]
    for r in rows:
        if r.unusable:
            continue
        tokens = (
            f"{r.kv_tokens[0]:,} / {r.kv_tokens[1]:,}" if r.kv_tokens else r.kv_tokens_note or "-"
        )
        verdict = memory_batch2.verdict_cell(r.verdict, r.confidence)
        lines.append(
            f"| {r.file} | {r.model} | {r.version[:12]} | {r.config} | {r.gpu} | "
            f"{_pct(Row.err(r.weights))} | {_pct(Row.err(r.bytes_per_token))} | {tokens} | "
            f"{_pct(Row.err(r.kv_tokens))} | {verdict} | {'; '.join(r.notes)[:160]} |"  # type: ignore[arg-type]
        )
    checked = checked_configs()
    unchecked = sorted(f.stem for f in CONFIGS.glob("*.json") if f.name not in checked)
    lines += [
        "",
        (
            "Sampler warmup: the plan follows vLLM's model runner (core/plan/peaks.py): the V1 "
            "runner's profile run holds the same sampler pass as its warmup, the V2 runner "
            "(dense models from 0.22, all from 0.28) profiles the logits only and its warmup "
            "needs 12 B per logit element more."
        ),
        "",
        (
            f"Configs in bench/configs/ checked against a public copy of their config.json: "
            f"{len(checked)} of {len(checked) + len(unchecked)} (bench/configs/README.md says "
            f"against what); not (or only partly) checked ({len(unchecked)}): "
            + ", ".join(unchecked)
        ),
    ]
    if wrong_sizes:
        lines += ["", "Capture sizes planned / logged where they differ:", ""]
        lines += [
            f"- {r.file} (vLLM {r.version[:8]}, {r.model}): {r.sizes[0]} / {r.sizes[1]}"  # type: ignore[index]
            for r in wrong_sizes
        ]
    lines += memory_batch2.uncertain_lines(
        [(f"{r.file} {r.model}", r.verdict, r.because) for r in rows if r.because]
    )
    lines += ["", "Unusable points:", ""]
    lines += [f"- {r.file} `{r.model}`: {r.unusable}" for r in rows if r.unusable]
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)
    if args.batch2 and Path(args.batch2).is_file():
        score_batch2(Path(args.batch2), Path(args.batch2_out), args.note)
    elif args.batch2:
        print(f"skipped: {args.batch2} is absent")


def score_batch2(data: Path, out: Path, notes: list[str]) -> None:
    """Score the second memory set (bench/memory_batch2.py) in the same run."""
    import memory_batch2

    points = [json.loads(line) for line in data.read_text().splitlines() if line.strip()]
    rows = [memory_batch2.evaluate(p, data.parent / "hf_configs", _plan) for p in points]
    lines = ["# bringup plan against the second set of real vLLM memory figures", ""]
    lines += [line for note in notes for line in (note, "")]
    lines += memory_batch2.report(rows, "`../shared/corpus/memory/batch2.jsonl`")
    text = "\n".join(lines) + "\n"
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
