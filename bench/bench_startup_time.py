"""The startup-time prediction (``plan``'s ``startup``) against real startups.

``--corpus``: the timestamped vLLM startups of ``../shared/corpus/logs`` (``vllm/``, from which
the constants were derived, and ``batch2/``, kept out: the unseen score). For each log that
shows a phase, the phase's prediction given the setup the log shows (compile cold/warm from
"Directly load the compiled graph", the captured sizes from ``cudagraph_capture_sizes`` or the
capture bar, TP from the config line) against its logged figure ("torch.compile takes N s in
total", "Graph capturing finished in N secs"): the median error and the share within +-30 %.
``--derive`` prints the medians and quartiles the constants in
``core/startup_time/constants.py`` were taken from.

``--real``: real vLLM (the 0.32 CPU build) on a 1.35 GB float32 Llama in 7 shards, four
starts: cold/warm page cache (``posix_fadvise(DONTNEED)`` on the shards, or every shard read
first) x cold/warm compile cache (a fresh ``VLLM_CACHE_ROOT`` and Inductor cache, or the
previous run's). Before each start the prediction is made as ``run`` makes it; the start is
then timed (wall clock to the first answered /v1/models) and its log read for "Model loading
took", "torch.compile takes" and the shard bar, whose elapsed times replay the live ETA
(``core.startup_time.eta``) to check it once 25 % of the bytes are read.

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
}


def log_facts(path: Path) -> dict[str, Any]:
    """What a startup log shows of its setup and its phases' durations."""
    text = path.read_bytes().decode("utf-8", "replace").replace("\r", "\n")
    facts: dict[str, Any] = {"file": f"{path.parent.name}/{path.name}"}
    for key, pattern in _PATTERNS.items():
        found = pattern.findall(text)
        if not found:
            continue
        if key == "sizes":
            facts[key] = len([x for x in found[-1].split(",") if x.strip()])
        elif key == "bar":
            facts[key] = max(int(x) for x in found)
        elif key == "tp":
            facts[key] = int(found[-1])
        else:
            facts[key] = float(found[0])
    facts["warm"] = "Directly load the compiled graph" in text
    facts["graphs"] = facts.get("sizes") or facts.get("bar")
    return facts


def predicted(facts: dict[str, Any]) -> dict[Phase, tuple[float, float, float]]:
    """The model's compile and capture prediction for the setup a log shows."""
    setup = StartupSetup(
        weights_bytes_per_rank=0,
        checkpoint_bytes=0,
        world_size=facts.get("tp") or 1,
        storage=None,
        compile_cache=CompileCache.WARM if facts["warm"] else CompileCache.COLD,
        graphs=facts.get("graphs") or 0,
    )
    p = predict(setup)
    return {e.phase: (e.seconds, e.low, e.high) for e in p.phases}


def score_corpus(folder: Path) -> dict[str, Any]:
    rows: dict[str, list[tuple[str, float, float]]] = {
        "torch_compile": [],
        "cuda_graph_capture": [],
    }
    for path in sorted(folder.glob("*vllm*.log")):
        f = log_facts(path)
        pred = predicted(f)
        if "compile_s" in f and f["compile_s"] > 0:
            rows["torch_compile"].append((f["file"], pred[Phase.TORCH_COMPILE], f["compile_s"]))
        if "capture_s" in f and f.get("graphs") and f["capture_s"] > 0:
            got = pred.get(Phase.CUDA_GRAPH_CAPTURE)
            if got is not None:
                rows["cuda_graph_capture"].append((f["file"], got, f["capture_s"]))
    return {phase: _summary(r) for phase, r in rows.items()}


def _summary(rows: list[tuple[str, tuple[float, float, float], float]]) -> dict[str, Any]:
    errors = [(p[0] - m) / m for _, p, m in rows]
    return {
        "n": len(rows),
        "in_band": sum(p[1] <= m <= p[2] for _, p, m in rows) / len(rows) if rows else None,
        "median_abs_error": statistics.median(abs(e) for e in errors) if errors else None,
        "within": sum(abs(e) <= WITHIN for e in errors) / len(errors) if errors else None,
        "rows": rows,
    }


def derive(folder: Path) -> None:
    """The medians and quartiles behind the corpus constants."""
    cold, warm, one, many = [], [], [], []
    for path in sorted(folder.glob("*vllm*.log")):
        f = log_facts(path)
        if "compile_s" in f:
            (warm if f["warm"] else cold).append(f["compile_s"])
        if "capture_s" in f and f.get("graphs"):
            (one if (f.get("tp") or 1) == 1 else many).append(f["capture_s"] / f["graphs"])
    for name, values in (("compile cold", cold), ("compile warm", warm)):
        print(name, len(values), [round(q, 2) for q in statistics.quantiles(values, n=4)])
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
cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers = 1024, 4096, 20
cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim = 16, 4, 64
torch.manual_seed(0)
with torch.no_grad():
    model = LlamaForCausalLM(cfg).to(torch.float32)
for old in out.glob("*.safetensors"):
    old.unlink()
model.save_pretrained(out, safe_serialization=True, max_shard_size="200MB")
"""


def build_model(work: Path, vllm_python: Path, env: dict[str, str]) -> Path:
    out = work / "startup-check-hf"
    if not (out / ".complete").exists():
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run(
            [str(vllm_python), "-c", HF_BUILD, str(out), str(REPO / "tests" / "builders")],
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
    m = _PATTERNS["compile_s"].search(text)
    if m:
        out["compile_s"] = float(m.group(1))
    out["bar"] = [(int(d), int(t), int(mm) * 60 + int(ss)) for d, t, mm, ss in _BAR.findall(text)]
    out["warm_compile"] = "Directly load the compiled graph" in text
    return out


def eta_check(
    bar: list[tuple[int, int, int]], weights_s: float, predicted_s: float
) -> dict[str, Any]:
    """Replay the live ETA on the shard bar (elapsed seconds since the bar began at each
    shard): the ETA given once 25 % of the shards (equal-sized: the bytes) are done,
    against the real end of the reads."""
    from bringup.core.startup_time.eta import WeightsEta

    if not bar:
        return {}
    total = bar[-1][1]
    end = bar[-1][2]
    eta = WeightsEta(total_units=total, predicted_seconds=predicted_s, start=0.0)
    for done, _total, elapsed in bar:
        estimate = eta.update(float(elapsed), done)
        if done / total >= 0.25 and done < total:
            real_left = end - elapsed
            return {
                "at_share": done / total,
                "eta_s": estimate.eta_seconds,
                "real_left_s": real_left,
                "bar_end_s": end,
            }
    return {"bar_end_s": end}


def run_real(work: Path, eager: bool = False) -> list[dict[str, Any]]:
    from bench_serving import _free_port as free_port
    from bench_serving import serving

    from bringup.follow.startup_time import for_command

    from builders.vllm_env import serve_argv, vllm_environ, vllm_problem, vllm_python

    problem = vllm_problem()
    if problem:
        raise SystemExit(f"vLLM CPU is not available ({problem})")
    work.mkdir(parents=True, exist_ok=True)
    build_env = vllm_environ(work / "build-env")
    model = build_model(work, vllm_python(), build_env)
    rows = []
    plan = [
        ("cold", "cold", "a"),
        ("warm", "warm", "a"),
        ("cold", "warm", "a"),
        ("warm", "cold", "b"),
    ]
    if eager:  # --enforce-eager: the page cache alone (no compile to wait for)
        plan = [("cold", "off", "a"), ("warm", "off", "a")]
    for page, compile_state, env_name in plan:
        folder = work / f"env-{env_name}"
        if compile_state == "cold":
            shutil.rmtree(folder, ignore_errors=True)
        env = vllm_environ(folder, kv_cache_gib=1)
        env["VLLM_CPU_OMP_THREADS_BIND"] = "0"
        (drop_cache if page == "cold" else fill_cache)(model)
        port = free_port()
        argv = serve_argv(model, port, eager=eager, max_model_len=512, memory_fraction=0.3)
        prediction = for_command(argv, env)
        assert prediction is not None
        (drop_cache if page == "cold" else fill_cache)(model)  # the measurement read a little
        load_before = loadavg()
        log = work / f"vllm-{page}-{compile_state}.log"
        t0 = time.monotonic()
        with serving(argv, port, log, env=env, ready_seconds=1500):
            ready = time.monotonic() - t0
        facts = read_log(log)
        weights = prediction.phase(Phase.WEIGHTS_LOADING)
        comp = prediction.phase(Phase.TORCH_COMPILE)
        assert weights is not None
        row = {
            "page_cache": page,
            "compile_cache": compile_state,
            "predicted_weights": weights.seconds,
            "weights_band": (weights.low, weights.high),
            "weights_basis": weights.basis,
            "measured_weights": facts.get("weights_s"),
            "predicted_compile": comp.seconds if comp else None,
            "compile_basis": comp.basis if comp else None,
            "measured_compile": facts.get("compile_s"),
            "predicted_ready": prediction.total_seconds,
            "measured_ready": ready,
            "eta": eta_check(facts["bar"], facts.get("weights_s") or 0.0, weights.seconds),
            "load_before": load_before,
            "load_after": loadavg(),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="store_true")
    parser.add_argument("--derive", action="store_true")
    parser.add_argument("--real", action="store_true")
    parser.add_argument("--eager", action="store_true", help="with --real: --enforce-eager runs")
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
        result["corpus"] = {name: score_corpus(CORPUS / name) for name in ("vllm", "batch2")}
    if args.real:
        result["real"] = run_real(Path(args.work), eager=args.eager)
    text = json.dumps(result, indent=1, default=str)
    if args.json_out:
        Path(args.json_out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
