"""The startup-time prediction (``plan``'s ``startup``) against real startups.

``--corpus``: the timestamped vLLM startups of ``../shared/corpus/logs`` (``vllm/``, from which
the constants were derived, and ``batch2/``, kept out: the unseen score). For each log that
shows a phase, the phase's prediction given the setup the log shows (compile cold/warm from
"Directly load the compiled graph", the captured sizes from ``cudagraph_capture_sizes`` or the
capture bar, TP from the config line) against its logged figure ("torch.compile takes N s in
total", "Graph capturing finished in N secs"): the median error and the share within +-30 %.
``--derive`` prints the medians and quartiles the constants in
``core/startup_time/constants.py`` were taken from.

``--corpus`` scores ``before`` (the per-phase constants) and ``after`` (warm compile per layer,
capture per size x layer), the per-layer constants leave-one-out over ``vllm/``.
It also gives, for each phase and scaling (one constant, per layer, per
graph, per graph x layer), the share within +-30 % the best single constant could reach,
chosen with hindsight on the same logs: an upper bound for any such constant. And
(``cold_forms``) each cold compile's two parts as its log prints them (Dynamo's trace,
Inductor's compile of the pieces) with the Inductor adaptor its version uses, and forms of the
cold compile built from them, scored leave-one-out on ``vllm/`` and unseen on ``batch2/``.
``--derive`` also prints ``INDUCTOR_PER_COMPILE`` and ``LOAD_PER_COMPILE`` (one more compile
range or size, cold and warm).

``--real``: real vLLM (the 0.32 CPU build) on a 1.22 GB float32 Llama in 7 shards
(``--which eager``: ``--enforce-eager`` with a cold and a warm page cache) and a 4-layer one
(``--which compile``: torch.compile with an empty ``VLLM_CACHE_ROOT`` and Inductor cache, then
the same again). ``--which live`` starts the eager pair through ``bringup run --json
--exit-when-ready``: the follower's own phase events and ETA. Before each start the
prediction is made twice on one storage measurement: ``after`` (the repack measured in the
engine's python, no model-init band: the fourth round's form, which ``run`` does not use)
and ``before`` (``run``'s: the repack at a fresh copy's rate plus the corpus's band).

Writes bench/results/startup_time.md (the machine's load average beside every figure). A
measurement, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CORPUS = next(
    (
        p / "shared" / "corpus" / "logs"
        for p in (REPO.parent, REPO.parent.parent)
        if (p / "shared" / "corpus" / "logs").is_dir()
    ),
    REPO.parent / "shared" / "corpus" / "logs",
)
OUT = REPO / "bench" / "results" / "startup_time.md"
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from bringup.core.startup_time import CompileCache, StartupSetup, predict  # noqa: E402
from bringup.core.vocab import Phase  # noqa: E402

WITHIN = 0.30


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


# -- the corpus ----------------------------------------------------------------------------

_PATTERNS = {
    "compile_s": re.compile(r"torch\.compile takes ([\d.]+) s in total"),
    "capture_s": re.compile(r"Graph capturing finished in ([\d.]+) secs"),
    "init_s": re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+)"),
    "sizes": re.compile(r"'cudagraph_capture_sizes': \[([\d, ]*)\]"),
    "tp": re.compile(r"tensor_parallel_size=(\d+)"),
    "bar": re.compile(r"Capturing CUDA graphs?[^|]*\|[^|]*\| *\d+/(\d+) \["),
    # the compile's own parts (vllm/compilation/backends.py): Dynamo's trace, then Inductor's
    # compile of every piece (cold) or the load of the compiled pieces (warm)
    "dynamo_s": re.compile(r"Dynamo bytecode transform time: ([\d.]+) s"),
    "inductor_s": re.compile(r"Compiling a graph for [^\n]*? takes ([\d.]+) s"),
    "load_s": re.compile(r"Directly load the compiled graph\(s\) for [^\n]*?took ([\d.]+) s"),
    "version": re.compile(r"LLM engine \(v([0-9][^) ]*)\)"),
    "compile_sizes": re.compile(r"[\"']compile_sizes[\"']: ?\[([^\]]*)\]"),
    "split_points": re.compile(
        r"[\"']compile_ranges_(?:split_points|endpoints)[\"']: ?\[([^\]]*)\]"
    ),
}


def log_facts(path: Path) -> dict[str, Any]:
    """What a startup log shows of its setup and its phases' durations."""
    text = path.read_bytes().decode("utf-8", "replace").replace("\r", "\n")
    facts: dict[str, Any] = {"file": f"{path.parent.name}/{path.name}"}
    for key, pattern in _PATTERNS.items():
        found = pattern.findall(text)
        if not found:
            continue
        if key in ("sizes", "compile_sizes", "split_points"):
            facts[key] = len([x for x in found[-1].split(",") if x.strip()])
        elif key == "version":
            facts[key] = found[0]
        elif key == "bar":
            facts[key] = max(int(x) for x in found)
        elif key == "tp":
            facts[key] = int(found[-1])
        else:
            facts[key] = float(found[0])
    facts["warm"] = "Directly load the compiled graph" in text
    facts["graphs"] = facts.get("sizes") or facts.get("bar")
    return facts


def predicted(facts: dict[str, Any], layers: int = 0) -> dict[Phase, tuple[float, float, float]]:
    """The model's compile and capture prediction for the setup a log shows (``layers``: the
    model's decoder layers, 0 for the per-phase constants alone: the model before the
    per-layer terms)."""
    from bringup.core import vllm_compile

    version = vllm_compile.version_parts(facts.get("version"))
    setup = StartupSetup(
        weights_bytes_per_rank=0,
        checkpoint_bytes=0,
        world_size=facts.get("tp") or 1,
        storage=None,
        compile_cache=CompileCache.WARM if facts["warm"] else CompileCache.COLD,
        graphs=facts.get("graphs") or 0,
        layers=layers,
        inductor_compiles=inductor_compiles(facts),
        adaptor=vllm_compile.inductor_adaptor(version, {}),
    )
    p = predict(setup)
    return {e.phase: (e.seconds, e.low, e.high) for e in p.phases}


def inductor_compiles(facts: dict[str, Any]) -> int:
    """The Inductor compiles of every piece the log's config says: its compile ranges (the
    printed split points, ``max_num_batched_tokens`` already among them, 0.13 on) or the one
    general shape, plus each compile size."""
    return max(1, facts.get("split_points") or 0) + (facts.get("compile_sizes") or 0)


def _quartiles(values: list[float], source: str) -> Any:
    from bringup.core.startup_time.constants import Band

    if len(values) < 2:
        return None
    q = statistics.quantiles(values, n=4)
    return Band(statistics.median(values), q[0], q[2], source)


def per_layer_samples(folder: Path) -> list[dict[str, Any]]:
    """Every log of ``folder`` with its layers: the derivation set of the per-layer terms."""
    out = []
    for path in sorted(folder.glob("*vllm*.log")):
        f = log_facts(path)
        text = path.read_bytes().decode("utf-8", "replace").replace("\r", "\n")
        f["layers"] = _layers(text) or 0
        out.append(f)
    return out


def per_layer_constants(samples: list[dict[str, Any]], leave_out: str = "") -> dict[str, Any]:
    """COMPILE_WARM_PER_LAYER and GRAPH_PER_LAYER as medians (quartiles as the band) over
    ``samples`` less the log ``leave_out``: the constants of core/startup_time/constants.py
    when nothing is left out."""
    rest = [f for f in samples if f["file"] != leave_out and f["layers"]]
    warm = [f["compile_s"] / f["layers"] for f in rest if f.get("compile_s", 0) > 0 and f["warm"]]
    graph = [
        f["capture_s"] / (f["graphs"] * f["layers"])
        for f in rest
        if f.get("capture_s", 0) > 0 and f.get("graphs")
    ]
    return {
        "COMPILE_WARM_PER_LAYER": _quartiles(warm, "loo"),
        "GRAPH_PER_LAYER": _quartiles(graph, "loo"),
    }


def score_corpus(folder: Path, derivation: list[dict[str, Any]]) -> dict[str, Any]:
    """Each log's compile and capture, predicted before (per-phase constants) and after (the
    per-layer terms, their constants the medians over ``derivation`` less this very log:
    leave-one-out), against the logged figure."""
    from bringup.core.startup_time import constants as c

    keys = ("torch_compile", "cuda_graph_capture")
    rows: dict[str, list[Any]] = {f"{k} {w}": [] for k in keys for w in ("before", "after")}
    saved = {k: getattr(c, k) for k in ("COMPILE_WARM_PER_LAYER", "GRAPH_PER_LAYER")}
    try:
        for f in per_layer_samples(folder):
            for name, band in per_layer_constants(derivation, leave_out=f["file"]).items():
                setattr(c, name, band or saved[name])
            for when, layers in (("before", 0), ("after", f["layers"])):
                pred = predicted(f, layers)
                if "compile_s" in f and f["compile_s"] > 0:
                    got = pred[Phase.TORCH_COMPILE]
                    rows[f"torch_compile {when}"].append((f["file"], got, f["compile_s"]))
                if "capture_s" in f and f.get("graphs") and f["capture_s"] > 0:
                    cap = pred.get(Phase.CUDA_GRAPH_CAPTURE)
                    if cap is not None:
                        rows[f"cuda_graph_capture {when}"].append((f["file"], cap, f["capture_s"]))
    finally:
        for name, band in saved.items():
            setattr(c, name, band)
    out = {phase: _summary(r) for phase, r in rows.items()}
    layered = {f["file"] for f in per_layer_samples(folder) if f["layers"]}
    for phase, r in rows.items():
        out[f"{phase} (layers known)"] = _summary([x for x in r if x[0] in layered])
    return out


def _summary(rows: list[tuple[str, tuple[float, float, float], float]]) -> dict[str, Any]:
    errors = [(p[0] - m) / m for _, p, m in rows]
    return {
        "n": len(rows),
        "in_band": sum(p[1] <= m <= p[2] for _, p, m in rows) / len(rows) if rows else None,
        "median_abs_error": statistics.median(abs(e) for e in errors) if errors else None,
        "within": sum(abs(e) <= WITHIN for e in errors) / len(errors) if errors else None,
        "rows": rows,
    }


_BARS = re.compile(r"Capturing CUDA graphs? ?(?:\(([^)]*)\))?[^|\n]*\|[^|\n]*\| *\d+/(\d+) \[")
_MODEL = re.compile(r"model='([^']*)'")


# batch2's models bench/bench_plan_memory.py has no config for: num_hidden_layers of each
# model's public config.json on the Hugging Face Hub (deepseek-ai/DeepSeek-R1-Distill-Qwen-14B
# and Qwen/Qwen2.5-14B-Instruct 48, Qwen/Qwen2-VL-2B-Instruct 28, Qwen/Qwen3-14B 40,
# meta-llama/Meta-Llama-3-70B 80, Qwen/Qwen3-Next-80B-A3B-Instruct 48)
PUBLIC_LAYERS = (
    ("deepseek-r1-14b", 48),
    ("qwen2_5_14b", 48),
    ("qwen2-vl-2b", 28),
    ("qwen3-14b", 40),
    ("llama3-70b", 80),
    ("qwen3-next-80b", 48),
)


def _layers(text: str) -> int | None:
    """The model's layer count, from the config bench/bench_plan_memory.py maps its name to
    (public config.json figures), else ``PUBLIC_LAYERS``, or None."""
    import bench_plan_memory as pm

    from bringup.adapters.model_source import load_model, locate_model
    from bringup.core.plan import parse_architecture

    m = _MODEL.search(text)
    if not m:
        return None
    name, _quant, _why = pm._config(m.group(1))
    if name is None:
        lowered = m.group(1).lower()
        return next((n for needle, n in PUBLIC_LAYERS if needle in lowered), None)
    try:
        config = load_model(locate_model(pm._config_path(name), {})).config
        return int(parse_architecture(config).num_layers)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def best_constant_share(pairs: list[tuple[float, float]]) -> tuple[float, float] | None:
    """The most logs any single constant c could put within +-30 %, chosen with hindsight on
    these very logs (prediction c * x against the logged m): (share, c). An upper bound for
    every model of the form constant x this normalisation, not a model."""
    intervals = sorted(
        ((1 - WITHIN) * m / x, (1 + WITHIN) * m / x) for x, m in pairs if x > 0 and m > 0
    )
    if not intervals:
        return None
    best, best_c = 0, 0.0
    for lo, _hi in intervals:  # an optimal c sits at some interval's low end
        n = sum(a <= lo <= b for a, b in intervals)
        if n > best:
            best, best_c = n, lo
    return best / len(intervals), best_c


def ceilings(folder: Path) -> dict[str, Any]:
    """For each phase and normalisation, the hindsight ceiling of a single constant."""
    rows: dict[str, list[tuple[float, float]]] = {}
    rounded = 0
    captures = 0
    for path in sorted(folder.glob("*vllm*.log")):
        text = path.read_bytes().decode("utf-8", "replace").replace("\r", "\n")
        f = log_facts(path)
        layers = _layers(text)
        if "compile_s" in f and f["compile_s"] > 0:
            kind = "warm" if f["warm"] else "cold"
            rows.setdefault(f"torch_compile {kind}: one constant", []).append((1.0, f["compile_s"]))
            if layers:
                rows.setdefault(f"torch_compile {kind}: per layer", []).append(
                    (float(layers), f["compile_s"])
                )
        if "capture_s" in f and f.get("graphs") and f["capture_s"] > 0:
            captures += 1
            rounded += f["capture_s"] <= 2  # "%.0f secs": +-0.5 s is +-25 % or more
            bars: dict[str, int] = {}
            for kind, total in _BARS.findall(text):
                bars[kind] = max(bars.get(kind, 0), int(total))
            every = sum(bars.values()) or f["graphs"]
            tp = "TP 1" if (f.get("tp") or 1) == 1 else "TP > 1"
            m = f["capture_s"]
            rows.setdefault(f"cuda_graph_capture {tp}: per size", []).append((f["graphs"], m))
            rows.setdefault(f"cuda_graph_capture {tp}: per graph (every bar)", []).append(
                (float(every), m)
            )
            if layers:
                rows.setdefault(f"cuda_graph_capture {tp}: per graph x layer", []).append(
                    (float(every * layers), m)
                )
    out: dict[str, Any] = {"capture_logs": captures, "capture_at_most_2_s": rounded}
    for name, pairs in sorted(rows.items()):
        got = best_constant_share(pairs)
        out[name] = {"n": len(pairs), "ceiling": got[0] if got else None}
    return out


def cold_samples(folder: Path) -> list[dict[str, Any]]:
    """The cold startups of ``folder`` that print both parts of the compile (Dynamo's
    trace and Inductor's compile), with the model's layers and the Inductor adaptor their
    version compiles with (``vllm_compile.inductor_adaptor``)."""
    from bringup.core import vllm_compile

    out = []
    for f in per_layer_samples(folder):
        needed = ("compile_s", "dynamo_s", "inductor_s")
        if f["warm"] or any(k not in f for k in needed) or not f["layers"]:
            continue
        version = vllm_compile.version_parts(f.get("version"))
        f["adaptor"] = vllm_compile.inductor_adaptor(version, {}) or "unknown"
        out.append(f)
    return out


def _cold_form(form: str, f: dict[str, Any], rest: list[dict[str, Any]]) -> float | None:
    """One cold compile predicted by ``form`` from medians over ``rest``."""
    if not rest:
        return None
    layers = f["layers"]
    if form == "one constant":
        return statistics.median(r["compile_s"] for r in rest)
    dynamo = statistics.median(r["dynamo_s"] / r["layers"] for r in rest) * layers
    same = [r for r in rest if r["adaptor"] == f["adaptor"]] or rest
    if form == "Dynamo per layer + Inductor constant":
        return dynamo + statistics.median(r["inductor_s"] for r in rest)
    if form == "Dynamo per layer + Inductor constant by adaptor":
        return dynamo + statistics.median(r["inductor_s"] for r in same)
    if form == "Dynamo per layer + Inductor per layer by adaptor":
        return dynamo + layers * statistics.median(r["inductor_s"] / r["layers"] for r in same)
    return None


COLD_FORMS = (
    "one constant",
    "Dynamo per layer + Inductor constant",
    "Dynamo per layer + Inductor constant by adaptor",
    "Dynamo per layer + Inductor per layer by adaptor",
)


def cold_forms(corpus: Path) -> dict[str, Any]:
    """Each cold compile's parts as its log prints them, and each form scored: ``vllm``
    leave-one-out (every log from medians over the other vllm logs), ``batch2`` from medians
    over all of ``vllm`` (unseen)."""
    derivation = cold_samples(corpus / "vllm")
    out: dict[str, Any] = {
        "logs": {
            name: [
                {
                    k: f.get(k)
                    for k in ("file", "version", "adaptor", "layers", "compile_s", "dynamo_s")
                }
                | {
                    "inductor_s": f["inductor_s"],
                    "inductor_per_layer": round(f["inductor_s"] / f["layers"], 3),
                    "dynamo_per_layer": round(f["dynamo_s"] / f["layers"], 3),
                }
                for f in cold_samples(corpus / name)
            ]
            for name in ("vllm", "batch2")
        }
    }
    for name in ("vllm", "batch2"):
        samples = derivation if name == "vllm" else cold_samples(corpus / name)
        for form in COLD_FORMS:
            errors = []
            for f in samples:
                rest = [r for r in derivation if r["file"] != f["file"]]
                got = _cold_form(form, f, rest)
                if got is not None:
                    errors.append((got - f["compile_s"]) / f["compile_s"])
            out[f"{name}: {form}"] = {
                "n": len(errors),
                "within": sum(abs(e) <= WITHIN for e in errors) / len(errors) if errors else None,
                "median_abs_error": statistics.median(abs(e) for e in errors) if errors else None,
            }
    return out


def derive(folder: Path) -> None:
    """The medians and quartiles behind the corpus constants."""
    cold, warm, one, many = [], [], [], []
    for path in sorted(folder.glob("*vllm*.log")):
        f = log_facts(path)
        if "compile_s" in f:
            (warm if f["warm"] else cold).append(f["compile_s"])
        if "capture_s" in f and f.get("graphs"):
            (one if (f.get("tp") or 1) == 1 else many).append(f["capture_s"] / f["graphs"])
    inductor, load = [], []
    for path in sorted(folder.glob("*vllm*.log")):
        f = log_facts(path)
        if "inductor_s" in f and not f["warm"]:
            inductor.append(f["inductor_s"])
        if "load_s" in f and f["warm"]:
            load.append(f["load_s"])
    for name, values in (
        ("compile cold", cold),
        ("compile warm", warm),
        ("INDUCTOR_PER_COMPILE", inductor),
        ("LOAD_PER_COMPILE", load),
    ):
        q = statistics.quantiles(values, n=4)
        print(name, len(values), round(statistics.median(values), 2), [round(x, 2) for x in q])
    for name, values in (("seconds/size TP1", one), ("seconds/size TP>1", many)):
        print(name, len(values), [round(q, 3) for q in statistics.quantiles(values, n=4)])


# -- real vLLM -----------------------------------------------------------------------------

HF_BUILD = """
import sys
from pathlib import Path
sys.path.append(sys.argv[2])
import torch
from tiny_hf import build
from transformers import LlamaConfig, LlamaForCausalLM
out = Path(sys.argv[1])
build(out)
cfg = LlamaConfig.from_pretrained(out)
cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers = 1024, 4096, int(sys.argv[3])
cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim = 16, 4, 64
torch.manual_seed(0)
with torch.no_grad():
    model = LlamaForCausalLM(cfg).to(torch.float32)
for old in out.glob("*.safetensors"):
    old.unlink()
model.save_pretrained(out, safe_serialization=True, max_shard_size="200MB")
"""


def build_model(work: Path, vllm_python: Path, env: dict[str, str], layers: int = 20) -> Path:
    out = work / ("startup-check-hf" if layers == 20 else f"startup-check-hf-{layers}l")
    if not (out / ".complete").exists():
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run(
            [
                str(vllm_python),
                "-c",
                HF_BUILD,
                str(out),
                str(REPO / "tests" / "builders"),
                str(layers),
            ],
            check=True,
            env=env,
            timeout=1200,
        )
        (out / ".complete").write_text("ok\n")
    return out


def shards(model: Path) -> list[Path]:
    return sorted(model.glob("*.safetensors"))


def drop_cache(model: Path) -> None:
    for p in shards(model):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def fill_cache(model: Path) -> None:
    for p in shards(model):
        with p.open("rb") as fh:
            while fh.read(16 << 20):
                pass


_BAR = re.compile(
    r"Loading safetensors checkpoint shards:\s+\d+% Completed \| (\d+)/(\d+) \[(\d+):(\d+)"
)
_INIT_MODEL = re.compile(r"Initializing model took ([\d.]+) seconds")
_LOADING_WEIGHTS = re.compile(r"Loading weights took ([\d.]+) seconds")
_MODEL_LOADING = re.compile(r"Model loading took [\d.]+ ?GiB(?: memory)? and ([\d.]+) seconds")


def read_log(log: Path) -> dict[str, Any]:
    text = log.read_text(errors="replace").replace("\r", "\n")
    out: dict[str, Any] = {}
    m = _MODEL_LOADING.search(text)
    init = _INIT_MODEL.search(text)
    reads = _LOADING_WEIGHTS.search(text)
    if m:
        out["weights_s"] = float(m.group(1))
    elif init and reads:  # 0.32's CPU runner says the two parts apart
        out["weights_s"] = float(init.group(1)) + float(reads.group(1))
    if init and reads:
        out["init_s"], out["reads_s"] = float(init.group(1)), float(reads.group(1))
    out["phase_s"] = phase_span(text)
    m = _PATTERNS["compile_s"].search(text)
    if m:
        out["compile_s"] = float(m.group(1))
    else:  # 0.32's CPU runner prints no total: its compile is its warmup, by timestamps
        out["compile_s"] = span(text, "Warming up model for the compilation", "Warming up done")
    out["bar"] = [(int(d), int(t), int(mm) * 60 + int(ss)) for d, t, mm, ss in _BAR.findall(text)]
    out["warm_compile"] = "Directly load the compiled graph" in text
    return out


_STAMP = re.compile(r"\d\d-\d\d (\d\d):(\d\d):(\d\d)")


def span(text: str, first: str, last: str) -> float | None:
    """Whole seconds between the first line holding ``first`` and the next holding ``last``."""
    lines = text.splitlines()
    a = next((i for i, line in enumerate(lines) if first in line), None)
    if a is None:
        return None
    b = next((line for line in lines[a:] if last in line), None)
    t0, t1 = _STAMP.search(lines[a]), _STAMP.search(b or "")
    if t0 is None or t1 is None:
        return None
    seconds = [int(h) * 3600 + int(m) * 60 + int(x) for h, m, x in (t0.groups(), t1.groups())]
    return float((seconds[1] - seconds[0]) % 86400)


def phase_span(text: str) -> float | None:
    """The weights phase as the follower sees it, from the log's timestamps (whole seconds):
    "Starting to load model" to the first line after "Loading weights took" (the CPU
    GEMM's repacking runs in between, after vLLM's own figure stops)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "Starting to load model" in line), None)
    read = next((i for i, line in enumerate(lines) if "Loading weights took" in line), None)
    if start is None or read is None:
        return None
    after = next((line for line in lines[read + 1 :] if _STAMP.search(line)), None)
    t0, t1 = _STAMP.search(lines[start]), _STAMP.search(after or "")
    if t0 is None or t1 is None:
        return None
    seconds = [int(h) * 3600 + int(m) * 60 + int(x) for h, m, x in (t0.groups(), t1.groups())]
    return float((seconds[1] - seconds[0]) % 86400)


def eta_check(
    bar: list[tuple[int, int, int]], init_s: float, phase_s: float | None, predicted_s: float
) -> dict[str, Any]:
    """Replay the live ETA in the phase's time (0 at "Starting to load model"; the shard bar
    begins after the model's init, vLLM's own figure): the ETA given once 25 % of the
    shards (equal-sized: the bytes) are read, against the real end of the phase (its
    timestamps; whole seconds, so the real time left is +-1 s)."""
    from bringup.core.startup_time.eta import WeightsEta

    if not bar or phase_s is None:
        return {}
    total = bar[-1][1]
    eta = WeightsEta(total_units=total, predicted_seconds=predicted_s, start=0.0)
    for done, _total, elapsed in bar:
        now = init_s + elapsed
        estimate = eta.update(float(now), done)
        if done / total >= 0.25 and done < total:
            return {
                "at_share": done / total,
                "at_s": now,
                "eta_s": estimate.eta_seconds,
                "real_left_s": phase_s - now,
            }
    return {}


COMPILE_LAYERS = 4  # the compile-cache pair: a shorter model, so a cold compile ends here


def predictions(argv: list[str], env: dict[str, str]) -> tuple[Any, Any]:
    """(before, after) for one command from one storage measurement: ``after`` with the
    repack measured in the engine's python (issue 26's fourth round), ``before`` without it
    (``run``'s prediction: the corpus's model-init band plus the repack at a plain fresh
    copy's rate)."""
    from bringup.core import engine_args
    from bringup.follow.startup_time import (
        measure_cpu_repack,
        measure_storage,
        model_facts,
        predict_startup,
    )

    command = engine_args.parse_server_command(argv)
    facts = model_facts(command.model or "", env)
    assert facts is not None
    storage = measure_storage(facts.shards)
    assert storage is not None
    repack = measure_cpu_repack(argv, env, facts)
    out = [
        predict_startup(
            facts,
            command.flags,
            env,
            weights_bytes_per_rank=facts.checkpoint_bytes,
            world_size=1,
            graphs=0,
            device="cpu",
            storage=storage,
            repack_bytes_per_s=rate,
        )
        for rate in (None, repack)
    ]
    return out[0], out[1]


def run_real(work: Path, which: str = "all") -> list[dict[str, Any]]:
    from bench_serving import _free_port as free_port
    from bench_serving import serving

    from builders.vllm_env import serve_argv, vllm_environ, vllm_problem, vllm_python

    problem = vllm_problem()
    if problem:
        raise SystemExit(f"vLLM CPU is not available ({problem})")
    work.mkdir(parents=True, exist_ok=True)
    build_env = vllm_environ(work / "build-env")
    models = {
        "eager": build_model(work, vllm_python(), build_env),
        "compile": build_model(work, vllm_python(), build_env, layers=COMPILE_LAYERS),
    }
    rows = []
    # (page cache, compile cache, env folder, model): --enforce-eager with a cold and a warm
    # page cache, then torch.compile with an empty VLLM_CACHE_ROOT and Inductor cache and
    # again with the cache the first compile left (the page cache warm for both)
    plan = [
        ("cold", "off", "eager", "eager"),
        ("warm", "off", "eager", "eager"),
        ("warm", "cold", "compile", "compile"),
        ("warm", "warm", "compile", "compile"),
    ]
    if which == "eager":
        plan = plan[:2]
    elif which == "compile":
        plan = plan[2:]
    for page, compile_state, env_name, model_key in plan:
        model = models[model_key]
        folder = work / f"env-{env_name}"
        if compile_state == "cold" or (compile_state == "off" and page == "cold"):
            shutil.rmtree(folder, ignore_errors=True)
        env = vllm_environ(folder, kv_cache_gib=1)
        env["VLLM_CPU_OMP_THREADS_BIND"] = "0"
        (drop_cache if page == "cold" else fill_cache)(model)
        port = free_port()
        argv = serve_argv(
            model, port, eager=compile_state == "off", max_model_len=512, memory_fraction=0.3
        )
        before, after = predictions(argv, env)
        (drop_cache if page == "cold" else fill_cache)(model)  # the measurement read a little
        load_before = loadavg()
        log = work / f"vllm-{page}-{compile_state}.log"
        t0 = time.monotonic()
        with serving(argv, port, log, env=env, ready_seconds=2400):
            ready = time.monotonic() - t0
        facts = read_log(log)
        row: dict[str, Any] = {
            "page_cache": page,
            "compile_cache": compile_state,
            "layers": 20 if model_key == "eager" else COMPILE_LAYERS,
            "measured_weights": facts.get("weights_s"),
            "measured_init": facts.get("init_s"),
            "measured_reads": facts.get("reads_s"),
            "measured_phase": facts["phase_s"],
            "measured_compile": facts.get("compile_s"),
            "warm_compile_logged": facts["warm_compile"],
            "measured_ready": ready,
            "load_before": load_before,
            "load_after": loadavg(),
        }
        for name, prediction in (("before", before), ("after", after)):
            weights = prediction.phase(Phase.WEIGHTS_LOADING)
            comp = prediction.phase(Phase.TORCH_COMPILE)
            assert weights is not None
            row[name] = {
                "weights": weights.seconds,
                "weights_band": (weights.low, weights.high),
                "weights_basis": weights.basis,
                "compile": comp.seconds if comp else None,
                "compile_band": (comp.low, comp.high) if comp else None,
                "compile_basis": comp.basis if comp else None,
                "ready": prediction.total_seconds,
                "eta": eta_check(
                    facts["bar"], facts.get("init_s") or 0.0, facts["phase_s"], weights.seconds
                ),
            }
        print(json.dumps(row, default=str), flush=True)
        rows.append(row)
    return rows


def live_events(events: list[dict[str, Any]]) -> dict[str, Any]:
    """From ``bringup run --json``'s events: the weights phase's span (its first phase
    event to the next predicted phase's), and the ETA the follower gave at the first
    progress event with 25 % of the shards read, against the real time left."""
    from bringup.core.startup_time.live import predicted_phase

    start = end = None
    for ev in events:
        if ev.get("event") != "phase":
            continue
        group = predicted_phase(Phase(ev["phase"]))
        if group is Phase.WEIGHTS_LOADING and start is None:
            start = ev["t"]
        elif start is not None and group not in (None, Phase.WEIGHTS_LOADING):
            end = ev["t"]
            break
    out: dict[str, Any] = {"phase_s": None if start is None or end is None else end - start}
    for ev in events:
        if ev.get("event") != "progress" or end is None or not ev.get("total"):
            continue
        if ev["done"] / ev["total"] >= 0.25 and ev["done"] < ev["total"]:
            out.update(
                at_share=ev["done"] / ev["total"],
                eta_s=ev.get("eta_seconds"),
                real_left_s=end - ev["t"],
            )
            break
    return out


def run_live(work: Path) -> list[dict[str, Any]]:
    """The --enforce-eager pair (cold, then warm page cache) started by ``bringup run --json
    --exit-when-ready``: its own prediction, progress events and ETA, as a user sees them."""
    from bench_serving import _free_port as free_port

    from builders.vllm_env import serve_argv, vllm_environ, vllm_problem, vllm_python

    problem = vllm_problem()
    if problem:
        raise SystemExit(f"vLLM CPU is not available ({problem})")
    model = build_model(work, vllm_python(), vllm_environ(work / "build-env"))
    bringup = REPO / ".venv" / "bin" / "bringup"
    rows = []
    for page in ("cold", "warm"):
        folder = work / "env-live"
        if page == "cold":
            shutil.rmtree(folder, ignore_errors=True)
        env = vllm_environ(folder, kv_cache_gib=1)
        env["VLLM_CPU_OMP_THREADS_BIND"] = "0"
        port = free_port()
        argv = serve_argv(model, port, max_model_len=512, memory_fraction=0.3)
        (drop_cache if page == "cold" else fill_cache)(model)
        before, after = predictions(argv, env)
        (drop_cache if page == "cold" else fill_cache)(model)
        load_before = loadavg()
        log = work / f"live-{page}.log"
        t0 = time.monotonic()
        with log.open("w") as err:
            done = subprocess.run(
                [str(bringup), "run", "--json", "--exit-when-ready", "--stall", "0", "--", *argv],
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
                text=True,
                timeout=1800,
                check=False,
            )
        wall = time.monotonic() - t0
        events = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
        facts = read_log(log)
        follow = live_events(events)
        pred = next(
            (
                e.get("predicted_seconds")
                for e in events
                if e.get("event") == "phase" and e.get("phase") == "weights_loading"
            ),
            None,
        )
        row: dict[str, Any] = {
            "page_cache": page,
            "exit": done.returncode,
            "measured_weights_vllm": facts.get("weights_s"),
            "measured_init": facts.get("init_s"),
            "measured_reads": facts.get("reads_s"),
            "measured_phase_log": facts["phase_s"],
            "measured_phase_follower": follow.get("phase_s"),
            "eta": follow,
            "run_predicted_weights": pred,
            "wall_s": wall,
            "load_before": load_before,
            "load_after": loadavg(),
        }
        for name, prediction in (("before", before), ("after", after)):
            weights = prediction.phase(Phase.WEIGHTS_LOADING)
            assert weights is not None
            row[name] = {
                "weights": weights.seconds,
                "weights_band": (weights.low, weights.high),
                "weights_basis": weights.basis,
                "ready": prediction.total_seconds,
            }
        print(json.dumps(row, default=str), flush=True)
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="store_true")
    parser.add_argument("--derive", action="store_true")
    parser.add_argument("--real", action="store_true")
    parser.add_argument(
        "--which",
        choices=("all", "eager", "compile", "live"),
        default="all",
        help="with --real: the --enforce-eager pair, the compile-cache pair, or both",
    )
    parser.add_argument("--work", default="/tmp/bringup-startup-bench")
    parser.add_argument("--json-out", default=None, help="also write the raw figures here")
    args = parser.parse_args()
    if not CORPUS.is_dir() and (args.corpus or args.derive):
        print(f"skipped: no corpus at {CORPUS}")
        return 0
    if args.derive:
        derive(CORPUS / "vllm")
        return 0
    result: dict[str, Any] = {"load": loadavg()}
    if args.corpus:
        derivation = per_layer_samples(CORPUS / "vllm")
        result["constants"] = {k: str(v) for k, v in per_layer_constants(derivation).items()}
        result["corpus"] = {
            name: score_corpus(CORPUS / name, derivation) for name in ("vllm", "batch2")
        }
        result["ceilings"] = {name: ceilings(CORPUS / name) for name in ("vllm", "batch2")}
        result["cold_forms"] = cold_forms(CORPUS)
    if args.real:
        work = Path(args.work)
        live = args.which == "live"
        result["real"] = run_live(work) if live else run_real(work, which=args.which)
    text = json.dumps(result, indent=1, default=str)
    if args.json_out:
        Path(args.json_out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
