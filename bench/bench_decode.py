"""The plan's batch-1 decode speed checked on real engines on this machine's CPU.

1. A model big enough to be memory-bound, made offline with random weights: a dense Llama
   (hidden 1024, MLP 4096, 20 layers, 16 heads / 4 KV heads, a ~500-token vocabulary) in
   float32, about 1.35 GB: as a GGUF for llama.cpp (llama-cpp-python's server) and as
   safetensors for vLLM's CPU build (same shapes; the tokenizer from tests/builders/tiny_hf.py).
2. For each engine, several rounds of: ``bringup bench URL --concurrency 1 --device cpu
   --threads T --checkpoint MODEL --json`` in a fresh process (bench measures this machine's
   read bandwidth with T threads just before it measures, and computes the plan's ceiling and
   expected speed for it), then this machine's bandwidth again.
3. The table: measured single-stream decode, the plan's ceiling and expected speed at the
   bandwidth measured in the same round, measured <= ceiling, measured within 20 % of expected.
4. No GPU here: public single-stream figures (:data:`PUBLISHED`, each with its source) beside
   the plan's GPU prediction for the same setup; ``--published-only`` rewrites just that part.

Both engines decode with one thread (llama.cpp ``--n_threads 1``; vLLM
``VLLM_CPU_OMP_THREADS_BIND=0``), so the figures do not depend on how busy the other core is;
the machine is shared with other work, so every round is kept and the median is reported.
Real vLLM runs only under /work/locks/with-vllm-slot when that exists. Writes
bench/results/decode.md. A measurement, not a test: nothing here asserts a time.

    .venv/bin/python bench/bench_decode.py [--rounds 3] [--work /tmp/bench-decode]
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
REPO = HERE.parent
RESULTS = HERE / "results" / "decode.md"
NOTES = """Observed while building the check (not part of the table): on this machine one thread streams
about 22 GB/s of float64 (`numpy.dot`) but only 12-13 GB/s of float32 dot products, the rate
llama.cpp's single-thread float32 decode also gets, so the probe measures float32 dot products
with the engine's threads (adapters/membw.py). With `--n_threads 2` llama.cpp's own eval time
was 62 ms per token (19.5 GB/s, 0.87 of the two-thread probe) but the server delivered 114 ms
per token: with every core computing, llama-cpp-python's Python side (sampling, streaming)
waits for a core, which is why its default is half the cores. On a machine this busy the
figures move by 10-15 % between rounds; `--priority` gives the engine and the probe their core.

vLLM's CPU build, as its log of the run shows: the model runs in its Worker process with one
OpenMP thread on core 0 (`VLLM_CPU_OMP_THREADS_BIND='0'`, "core ids=[0]"), in float32
(`--dtype float32`: this CPU has no bf16 instructions), through torch.compile's AOT-compiled
graph (its log also says Inductor compilation is disabled); the scheduler (EngineCore) and the
HTTP server (APIServer) are other processes, free to run on the other core. Its per-step work
outside the model stayed within the CPU constants' 50 us per layer (1 ms a step here): at 1.06
of the expected speed no separate per-step constant was needed, and none was fitted.

Re-measured in issue 25's second round (2026-12-02) on another host CPU behind this machine
(AMD EPYC with AVX-512: the float32 dot probe streams 26-28 GB/s on one thread, twice the
earlier 11-13): llama.cpp followed the bandwidth (7.6 -> 15.0 and 13.9 tok/s in two runs, 0.84
and 0.79 of expected: its wheel is built with GGML_NATIVE=OFF, scripts/install-engine.sh, so
probably without the AVX-512 the numpy probe uses), vLLM's CPU build did not (8.7 -> 8.5 tok/s,
0.47 of expected against the float32-dot probe, below the ceiling). Its linears are
PyTorch's CPU matmul: timed alone in vLLM's own environment (torch.nn.functional.linear, one
thread, float32, one token, the model's 80 matrices, 1.34 GB) they streamed 13.8-14.1 GB/s, half
of the probe; vLLM's decode reached 10.3 GB/s with its attention and per-step work. On the
earlier host the probe and torch's GEMV were both about 12 GB/s and the prediction agreed by
coincidence of the two. So `bringup bench --engine-python PATH` now measures with the engine's
own kernel (PyTorch's F.linear of one token in that interpreter), and this check passes vLLM's.
"""
SLOT = Path("/work/locks/with-vllm-slot")
SHAPE = {"n_embd": 1024, "n_ff": 4096, "n_layer": 20, "n_head": 16, "n_head_kv": 4}
THREADS = 1
PROMPT, OUTPUT, REQUESTS = 32, 48, 3

sys.path.insert(0, str(REPO / "tests"))

from bench_serving import NotStarted, prioritize, serving  # noqa: E402
from bench_serving import _free_port as free_port  # noqa: E402


def build_gguf(work: Path) -> Path:
    from builders.gguf import write_tiny_llama_gguf

    path = work / "decode-check.gguf"
    if not path.exists():
        write_tiny_llama_gguf(path, n_ctx=2048, name="decode-check", **SHAPE)
    return path


HF_BUILD = """
import sys, json
from pathlib import Path
sys.path.append(sys.argv[2])
import torch
from tiny_hf import build
from transformers import LlamaConfig, LlamaForCausalLM
out = Path(sys.argv[1])
build(out)  # tokenizer (and a tiny model, replaced below)
cfg = LlamaConfig.from_pretrained(out)
cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers = 1024, 4096, 20
cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim = 16, 4, 64
torch.manual_seed(0)
with torch.no_grad():
    model = LlamaForCausalLM(cfg).to(torch.float32)
model.save_pretrained(out, safe_serialization=True)
print(sum(p.numel() for p in model.parameters()))
"""


def build_hf(work: Path, vllm_python: Path, env: dict[str, str]) -> Path:
    out = work / "decode-check-hf"
    if not (out / ".complete").exists():
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run(
            [str(vllm_python), "-c", HF_BUILD, str(out), str(REPO / "tests" / "builders")],
            check=True,
            env=env,
            timeout=900,
        )
        (out / ".complete").write_text("ok\n")
    return out


def loadavg() -> str:
    """The 1/5/15-minute load averages, as /proc/loadavg gives them ("n/a" elsewhere)."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def bandwidth() -> float:
    from bringup.adapters.membw import measure_read_bandwidth

    return measure_read_bandwidth(threads=THREADS)


def bench_round(url: str, model: Path, extra: Sequence[str] = ()) -> dict[str, Any]:
    argv = [
        sys.executable,
        "-m",
        "bringup",
        "bench",
        url,
        "--concurrency",
        "1",
        "--input-tokens",
        str(PROMPT),
        "--output-tokens",
        str(OUTPUT),
        "--requests",
        str(REQUESTS),
        "--duration",
        "300s",
        "--device",
        "cpu",
        "--threads",
        str(THREADS),
        "--checkpoint",
        str(model),
        "--json",
        *extra,
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"bench failed ({proc.returncode}): {proc.stderr[-2000:]}")
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


def measure(
    name: str, url: str, model: Path, rounds: int, extra: Sequence[str] = ()
) -> dict[str, Any]:
    rows = []
    for i in range(rounds):
        report = bench_round(url, model, extra)
        after = bandwidth()
        d = report["decode"]
        plan = d["plan"]
        rows.append(
            {
                "measured": d["measured_tokens_per_s"],
                "ceiling": plan["ceiling_tokens_per_s"],
                "expected": plan["expected_tokens_per_s"],
                "bytes": plan["bytes_per_token_per_gpu"],
                "bandwidth_after": after,
                "over_ceiling": d["measured_over_ceiling"],
                "over_expected": d["measured_over_expected"],
            }
        )
        print(
            f"{name} round {i + 1}: measured {d['measured_tokens_per_s']:.2f} tok/s, ceiling "
            f"{plan['ceiling_tokens_per_s']:.2f}, expected {plan['expected_tokens_per_s']:.2f}, "
            f"bandwidth after {after / 1e9:.2f} GB/s",
            flush=True,
        )
    return {"name": name, "rounds": rows}


def llamacpp(work: Path, rounds: int, priority: bool) -> dict[str, Any] | str:
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (scripts/install-engine.sh); not measured"
    model = build_gguf(work)
    from engine.real_engine import server_argv  # --n_threads 1: THREADS

    port = free_port()
    argv = server_argv(model, port, "--n_ctx", "512")
    with serving(argv, port, work / "llamacpp.log", priority=priority) as url:
        return measure("llama.cpp (llama-cpp-python 0.3.36)", url, model, rounds)


def vllm(
    work: Path, rounds: int, priority: bool, slot_wait: float, holding_slot: bool
) -> dict[str, Any] | str:
    from builders.vllm_env import serve_argv, vllm_environ, vllm_problem, vllm_python

    problem = vllm_problem()
    if problem:
        return f"vLLM CPU is not available ({problem}); not measured"
    env = vllm_environ(work / "vllm-env", kv_cache_gib=1)
    env["VLLM_CPU_OMP_THREADS_BIND"] = "0"  # one OpenMP thread, on core 0
    model = build_hf(work, vllm_python(), env)
    port = free_port()
    argv = serve_argv(model, port, eager=False, max_model_len=512, memory_fraction=0.3)
    if SLOT.exists() and not holding_slot:
        argv = [str(SLOT), *argv]
    try:
        with serving(
            argv,
            port,
            work / "vllm.log",
            env=env,
            ready_seconds=600,
            priority=priority,
            start_seconds=slot_wait,
        ) as url:
            # the probe is vLLM's own kernel: PyTorch's F.linear in vLLM's interpreter
            engine = ["--engine-python", str(vllm_python())]
            return measure("vLLM 0.32.0 CPU build (torch.compile)", url, model, rounds, engine)
    except NotStarted:
        return f"vLLM CPU not measured: no vLLM slot came free within {slot_wait:.0f} s"


PUBLISHED_HEADING = "## Published single-stream figures beside the plan's GPU prediction"


@dataclass(frozen=True)
class Published:
    """One public batch-1 (or bounding) decode figure and the plan that predicts it."""

    setup: str  # model, precision, GPUs, parallelism, engine and version
    workload: str  # the request shape as the source gives it
    tokens_per_s: float
    at_least: bool  # the figure bounds the batch-1 speed from below (measured at a higher batch)
    source: str  # where it comes from, and who says it
    plan: tuple[str, ...]  # `bringup plan` flags that describe the same setup
    caveat: str = ""


PUBLISHED: tuple[Published, ...] = (
    Published(
        "Llama-3.1-8B-Instruct BF16, 1 x A100 40GB, vLLM 0.23.0",
        "`vllm bench serve`, concurrency 1, 1024 in / 128 out, --ignore-eos",
        75.0,
        False,
        'J. Musgrave, "vLLM throughput-latency sweep on NVIDIA A100" '
        "(https://johnmusgrave.com/p/vllm-throughput-latency-sweep-on): the commands are given",
        ("Llama-3.1-8B", "--gpu", "A100 40GB", "--context-tokens", "1088"),
    ),
    Published(
        "gpt-oss-120b MXFP4, 1 x A100 80GB (NVLink), vLLM gpt-oss image (Aug. 2025), TP 1",
        "not given (a user's single-request figure)",
        90.0,
        False,
        "a user in vllm-project/vllm#22331 (https://github.com/vllm-project/vllm/issues/22331); "
        "a second user reports 88",
        ("gpt-oss-120b", "--gpu", "A100 80GB"),
        "A100 has no FP4 units: the MXFP4 experts are unpacked in the kernel",
    ),
    Published(
        "gpt-oss-120b MXFP4, 2 x A100 80GB (NVLink), same image, TP 2",
        "as above",
        77.0,
        False,
        "the same comment (TP 2 and TP 4: 77-78 tok/s)",
        ("gpt-oss-120b", "--gpu", "A100 80GB", "-tp", "2"),
    ),
    Published(
        "gpt-oss-120b MXFP4, 4 x A100 80GB (NVLink), same image, TP 4",
        "as above",
        78.0,
        False,
        "the same comment",
        ("gpt-oss-120b", "--gpu", "A100 80GB", "-tp", "4"),
    ),
    Published(
        "DeepSeek-V3 FP8, TP 8, SGLang 0.4.1.post2 (CUDA graph, FP8 GEMM tuning)",
        "batch 1, 128 in / 256 out",
        30.29,
        False,
        "SGLang's release note, by a maintainer (https://github.com/sgl-project/sglang/pull/2643)",
        ("DeepSeek-V3", "--gpu", "H200", "-tp", "8", "--context-tokens", "256"),
        "the note names no GPU; DeepSeek-V3 in FP8 (671 GB of weights) needs 8 GPUs of 96 GB "
        "or more, so it was planned on 8 x H200 (on 8 x H20, 4.0 TB/s, the plan expects "
        "197 tok/s: the gap stays)",
    ),
    Published(
        "DeepSeek-R1-0528 FP8 (DeepSeek-V3's architecture), 8 x H200, SGLang 0.5.7, TP 8",
        "concurrency 8, 1024 in / 1024 out: mean TPOT 12.8 ms, so one stream alone gets at "
        "least 1000 / 12.8",
        78.1,
        True,
        "an automated sweep posted in SemiAnalysisAI/InferenceX#870 "
        "(https://github.com/SemiAnalysisAI/InferenceX/issues/870)",
        ("DeepSeek-V3", "--gpu", "H200", "-tp", "8", "--context-tokens", "1536"),
    ),
    Published(
        "Kimi-K2.5 NVFP4, 8 x RTX PRO 6000 over PCIe split across two CPU sockets, vLLM, TP 8",
        "one request",
        60.0,
        False,
        "the seed of this project (issue 16's first paragraph): an engineer's report, not a "
        "public source",
        (
            "Kimi-K2",
            "--quantization",
            "nvfp4",
            "-tp",
            "8",
            "--gpu",
            "RTX PRO 6000",
            "--interconnect",
            "pcie-numa",
        ),
        "planned with Kimi-K2's config (Kimi-K2.5 has the same text model shape)",
    ),
)


PUBLISHED_READING = """How to read it (written in issue 16 with that round's constants; the table above is
recomputed with the current ones: issue 25 made the ceiling bytes over peak bandwidth only and
put per-kernel and Marlin-MoE fixed costs into "expected", core/plan/decode_costs.py, which
brought rows 5-7 closer; its second round dropped the Marlin MoE call from graphs (a
host-launched timing), counted the activation-quantization kernels of FP8/NVFP4 GEMMs and moved
PCIe latencies by NCCL's ring step per rank: rows 5-7 moved to 0.29, >= 0.76 and 0.99, these
five rows not tuned to. gpt-oss on A100 (rows 2-4: MXFP4 through Marlin on Ampere) is still
1.9-3.7x below expected. The 30-point set: bench/results/decode_points.md):

- **Dense on one GPU agrees** (row 1: 0.94 of expected, 0.73 of the ceiling). It is the one
  figure with the engine version, the exact commands and batch 1 all given.
- **MoE and MLA do not**: every such figure is below the plan's expected speed, from 0.69 (the
  seed, row 7) down to 0.14 (DeepSeek-V3 in SGLang 0.4.1, row 5). Every figure stays below the
  plan's ceiling, so the ceiling holds as an upper bound; the expected value for MoE and MLA is
  optimistic, and plainly so.
- The gap is not bandwidth: DeepSeek-V3's architecture at TP 8 on GPUs of 96 GB or more went
  from 30 tok/s (SGLang 0.4.1, row 5) to at least 78 (SGLang 0.5.7 on H200, row 6), and gpt-oss-120b on A100 gets *slower* with more
  GPUs (90, 77, 78 tok/s at TP 1, 2, 4) where the plan, which splits the bytes, gets faster. What
  dominates is a fixed cost per layer and per step (routing, top-k, the grouped expert GEMMs at
  batch 1, kernel tails, sampling, the engine's CPU work per step) that TP does not shrink and
  that each engine version sets. Solving row 6 for it gives at most about 160 us per MLA layer
  (the plan assumes 30), row 5 about 500 us.
- **What was done: no constant was tuned.** The MoE/MLA figures disagree with each other by
  2.6x across engine versions, the only vLLM MoE figures (rows 2-4) are a user's without the
  request shape, and row 7 is not public; fitting a per-layer cost between 160 and 500 us to
  them would be choosing a number, not measuring one. What would settle it: `bringup bench
  --concurrency 1 --gpu ... --checkpoint MODEL` on a GPU machine (it prints measured beside
  the plan's expected and ceiling) for one MoE and one MLA model on a current vLLM.
- Until then, read the MoE/MLA "expected" as the best case of a well-tuned engine, and the
  ceiling as a hard limit; the comparison between two setups of the same class (the seed's
  decision) is still informative, the absolute number less so.
"""


def plan_decode(flags: Sequence[str]) -> dict[str, Any]:
    """``bringup plan FLAGS --json``'s decode object, run in this process."""
    from bringup.cli.main import Context
    from bringup.cli.main import main as bringup_main

    out, err = io.StringIO(), io.StringIO()
    code = bringup_main(["plan", *flags, "--json"], Context(stdout=out, stderr=err, environ={}))
    if code not in (0, 1):  # 1: does not fit, which does not change the decode prediction
        raise SystemExit(f"bringup plan {' '.join(flags)} failed ({code}): {err.getvalue()}")
    decode: dict[str, Any] = json.loads(out.getvalue())["decode"]
    return decode


def published_section() -> list[str]:
    """The published figures, each beside the plan's ceiling and expected speed for its setup."""
    lines = [
        PUBLISHED_HEADING,
        "",
        (
            "No GPU here: these are public figures, each with its source, beside what `bringup "
            "plan` predicts for the same model, GPUs and parallelism (`--json`'s decode object, "
            "computed by this script). No constant was tuned to them (see below)."
        ),
        "",
        "| setup | workload | published (tok/s) | plan ceiling | plan expected | published / expected | bound by | agrees (within 20 % of expected) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for i, f in enumerate(PUBLISHED, 1):
        d = plan_decode(f.plan)
        ratio = f.tokens_per_s / d["expected_tokens_per_s"]
        if f.at_least:
            agrees = "yes" if ratio >= 0.8 else "NO (or the plan is optimistic)"
            shown, ratio_text = f">= {f.tokens_per_s:.1f}", f">= {ratio:.2f}"
        else:
            agrees = "yes" if abs(ratio - 1) <= 0.20 else "NO"
            shown, ratio_text = f"{f.tokens_per_s:.1f}", f"{ratio:.2f}"
        over = " (above the ceiling!)" if f.tokens_per_s > d["ceiling_tokens_per_s"] else ""
        lines.append(
            f"| {i}. {f.setup} | {f.workload} | {shown} | {d['ceiling_tokens_per_s']:.1f}{over} | "
            f"{d['expected_tokens_per_s']:.1f} | {ratio_text} | {d['bound_by']} | {agrees} |"
        )
        notes.append(
            f"{i}. Source: {f.source}. Plan: `bringup plan {' '.join(_quoted(f.plan))}`."
            + (f" {f.caveat[0].upper()}{f.caveat[1:]}." if f.caveat else "")
        )
    return [*lines, "", *notes, "", PUBLISHED_READING]


def _quoted(words: Sequence[str]) -> list[str]:
    return [f"'{w}'" if " " in w else w for w in words]


def table(results: list[dict[str, Any] | str]) -> list[str]:
    lines = [
        "| engine | rounds | measured (tok/s) | ceiling (tok/s) | expected (tok/s) | measured / ceiling | measured / expected | bytes per token | read bandwidth (GB/s, 1 thread) | measured <= ceiling | within 20 % of expected |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for r in results:
        if isinstance(r, str):
            notes.append(f"- {r}")
            continue
        rows = r["rounds"]
        med = {k: statistics.median(x[k] for x in rows) for k in rows[0]}
        bw = med["ceiling"] * med["bytes"] / 1e9
        below = all(x["measured"] <= x["ceiling"] for x in rows)
        within = abs(med["over_expected"] - 1) <= 0.20
        lines.append(
            f"| {r['name']} | {len(rows)} | {med['measured']:.2f} | {med['ceiling']:.2f} | "
            f"{med['expected']:.2f} | {med['over_ceiling']:.2f} | {med['over_expected']:.2f} | "
            f"{med['bytes'] / 1e9:.3f} GB | {bw:.2f} | {'yes' if below else 'NO'} | "
            f"{'yes' if within else 'NO'} |"
        )
        for i, x in enumerate(rows, 1):
            notes.append(
                f"- {r['name']}, round {i}: measured {x['measured']:.2f}, ceiling "
                f"{x['ceiling']:.2f}, expected {x['expected']:.2f} (measured/expected "
                f"{x['over_expected']:.2f}); bandwidth after the round "
                f"{x['bandwidth_after'] / 1e9:.2f} GB/s"
            )
    return [*lines, "", *notes]


SHARED = next(
    (p / "shared" for p in (REPO.parent, REPO.parent.parent) if (p / "shared").is_dir()),
    REPO.parent / "shared",
)
POINTS = SHARED / "corpus" / "decode" / "points.jsonl"


def score_points(notes: Sequence[str]) -> int:
    """Score the real decode measurements of the corpus (bench/decode_points.py)."""
    if not POINTS.is_file():
        print(f"skipped: {POINTS} is absent")
        return 0
    sys.path.insert(0, str(HERE))
    import decode_points

    points = [json.loads(line) for line in POINTS.read_text().splitlines() if line.strip()]
    rows = [decode_points.evaluate(p, SHARED / "corpus", plan_decode) for p in points]
    lines = ["# bringup plan's decode speed against real single-stream measurements", ""]
    lines += [line for note in notes for line in (note, "")]
    lines += decode_points.report(rows, "`../shared/corpus/decode/points.jsonl`")
    out = HERE / "results" / "decode_points.md"
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(out.read_text(encoding="utf-8"))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", type=Path, help="keep the models here (default: a temp folder)")
    parser.add_argument("--only", choices=("llamacpp", "vllm"))
    parser.add_argument(
        "--slot-wait", type=float, default=1800, help="seconds to wait for a vLLM slot (1800)"
    )
    parser.add_argument(
        "--published-only",
        action="store_true",
        help="rewrite only the published-figures section of bench/results/decode.md (no engine "
        "runs: the plan's predictions for the public figures)",
    )
    parser.add_argument(
        "--holding-slot",
        action="store_true",
        help="the caller already holds a vLLM slot (run as `with-vllm-slot measure bench_decode.py "
        "--holding-slot`): start vLLM without taking another",
    )
    parser.add_argument(
        "--priority",
        action="store_true",
        help="run at the highest CPU priority (root; nice and scheduler autogroup -20): on a "
        "shared machine the engines and the bandwidth probe then get their core, not a share",
    )
    parser.add_argument(
        "--points",
        action="store_true",
        help="score ../shared/corpus/decode/points.jsonl (real single-stream measurements) "
        "against the plan and write bench/results/decode_points.md (no engine runs)",
    )
    parser.add_argument("--note", action="append", default=[], help="a paragraph for the top")
    args = parser.parse_args()
    if args.points:
        return score_points(args.note)
    if args.published_only:
        kept = RESULTS.read_text(encoding="utf-8").split(PUBLISHED_HEADING)[0].rstrip()
        RESULTS.write_text(kept + "\n\n" + "\n".join(published_section()), encoding="utf-8")
        print(RESULTS.read_text(encoding="utf-8"))
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the servers on the way out
    if args.priority:
        prioritize(os.getpid())  # this script, its bench and bandwidth probes
    started = time.time()
    load_before = loadavg()
    with tempfile.TemporaryDirectory(prefix="bench-decode-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        results: list[dict[str, Any] | str] = []
        if args.only in (None, "llamacpp"):
            results.append(llamacpp(work, args.rounds, args.priority))
        if args.only in (None, "vllm"):
            results.append(
                vllm(work, args.rounds, args.priority, args.slot_wait, args.holding_slot)
            )
    took = time.time() - started
    load_after = loadavg()
    text = "\n".join(
        [
            "# Decode speed: the plan's prediction checked on real engines (issue 16)",
            "",
            *table(results),
            "",
            (
                f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
                f"{platform.python_version()}, no GPU; shared with other work while measuring. "
                f"Script: `bench/bench_decode.py --rounds {args.rounds}"
                f"{' --priority' if args.priority else ''}"
                f"{' --holding-slot` under `with-vllm-slot measure' if args.holding_slot else ''}"
                f"` ({took:.0f} s"
                f"{', at the highest CPU priority' if args.priority else ''}); load average "
                f"{load_before} before, {load_after} after."
            ),
            "",
            (
                "Model: a dense Llama with random float32 weights (hidden 1024, MLP 4096, 20 layers, "
                "16 heads, 4 KV heads), made offline: a GGUF for llama.cpp, safetensors for vLLM. "
                f"Each round: `bringup bench URL --concurrency 1 --input-tokens {PROMPT} "
                f"--output-tokens {OUTPUT} --requests {REQUESTS} --device cpu --threads {THREADS} "
                "--checkpoint MODEL --json` in a fresh process: bench measures the read bandwidth "
                "(float32 dot products over a 1 GiB buffer, 4x the last-level cache, one thread, "
                "best of 10: adapters/membw.py; for vLLM, with `--engine-python` its own "
                "interpreter, the rate of PyTorch's F.linear of one token, the kernel vLLM's CPU "
                "build runs its linears through) just before, "
                "and puts the plan's ceiling and expected speed (core/plan/decode.py, CPU constants: "
                "85 % of the read bandwidth, 50 us per layer) beside the measured single-stream "
                "decode (1000 / mean TPOT). Medians over the rounds."
            ),
            "",
            NOTES,
            *published_section(),
        ]
    )
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
