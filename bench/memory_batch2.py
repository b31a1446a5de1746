"""The second memory set (``../shared/corpus/memory/batch2.jsonl``) for bench_plan_memory.py.

Each point gives its setup in fields (tp, pp, ep, gpu, gpu_total_gib, gmu, max_model_len,
max_num_seqs, max_num_batched_tokens, kv_cache_dtype, enforce_eager, vllm_version) and what
vLLM printed in ``reported`` (weights_gib, available_kv_gib, kv_tokens, gpu_blocks,
startup_failed, oom). The model's config.json is read from ``hf_configs/`` beside the file
(never copied here). A point that cannot be planned is counted and named with its reason.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GiB = 1024**3

# (substring of the model id, lower case) -> (hf_configs file stem, --quantization or None)
CONFIGS: tuple[tuple[str, str, str | None], ...] = (
    ("qwen3-235b-a22b-instruct-2507-fp8", "Qwen3-235B-A22B-Instruct-2507", "fp8"),
    ("qwen3-235b-a22b-fp8", "Qwen3-235B-A22B", "fp8"),
    ("qwen3-coder-30b-a3b-instruct-fp8", "Qwen3-Coder-30B-A3B-Instruct", "fp8"),
    ("qwen3-coder-30b-a3b-instruct", "Qwen3-Coder-30B-A3B-Instruct", None),
    ("gpt-oss-120b", "gpt-oss-120b", None),
    ("gpt-oss-20b", "gpt-oss-20b", None),
    ("llama-3.1-8b-instruct", "Llama-3.1-8B-Instruct", None),
    ("deepseek-r1-distill-qwen-14b", "DeepSeek-R1-Distill-Qwen-14B", None),
    ("llama-3.1-405b-instruct-fp8", "Llama-3.1-405B-Instruct-FP8", None),
    ("llama-3.1-70b-instruct-quantized.w8a8", "Llama-3.1-70B-Instruct", "w8a8"),
    ("minimax-m2.7 awq", "MiniMax-M2.7", "awq"),
    ("minimax-m2.7", "MiniMax-M2.7", None),
    ("minimax-m2.5", "MiniMax-M2", None),
    ("kimi-k2.5", "Kimi-K2.5", None),
    ("qwen3-8b", "Qwen3-8B", None),
    ("qwen2-7b-instruct", "Qwen2-7B-Instruct", None),
    ("qwen3-32b", "Qwen3-32B", None),
    ("qwen2.5-vl-72b", "Qwen2.5-VL-72B-Instruct", None),
    ("mixtral-8x7b-instruct-v0.1-awq", "Mixtral-8x7B-Instruct-v0.1", "awq"),
)


@dataclass
class Point2:
    """One batch2 point: the plan's figures beside vLLM's."""

    id: str
    version: str
    unplannable: str | None = None
    gpu: str = "?"
    weights: tuple[float, float] | None = None  # GiB per GPU (plan, vLLM)
    bytes_per_token: tuple[float, float] | None = None
    kv_gib: tuple[float, float] | None = None  # the KV pool per GPU (plan, vLLM)
    kv_tokens: tuple[int, int] | None = None
    verdict: tuple[str, str] | None = None  # (plan, real)
    confidence: str = "certain"  # the plan's verdict confidence ("certain" before it had one)
    because: list[str] = field(default_factory=list)  # the plan's uncertain_because
    notes: list[str] = field(default_factory=list)


def _err(pair: tuple[float, float] | None) -> float | None:
    if pair is None or not pair[1]:
        return None
    return (pair[0] - pair[1]) / abs(pair[1])


def model_config(point: dict[str, Any], configs: Path) -> tuple[Path | None, str | None]:
    """The config.json in ``hf_configs/`` and the --quantization for a point's model."""
    name = str(point.get("model") or "").lower()
    quant = str(point.get("quantization") or "").lower()
    for needle, stem, q in CONFIGS:
        if needle in name or (needle.endswith(" awq") and needle[:-4] in name and "awq" in quant):
            path = configs / f"{stem}.json"
            return (path if path.is_file() else None), q
    return None, None


def engine_version(text: str) -> tuple[str | None, dict[str, str]]:
    """(--engine-version, environment) from the point's free-text vLLM version."""
    environ: dict[str, str] = {}
    if "V0" in text:
        environ["VLLM_USE_V1"] = "0"
    elif "VLLM_USE_V1=1" in text:
        environ["VLLM_USE_V1"] = "1"
    m = re.search(r"\d+\.\d+(?:\.\d+)?", text)  # with the patch: V0's rules read it
    return (m.group() if m else None), environ


def catalog_gpu(text: str, total_gib: float | None = None) -> Any:
    """The catalog entry the point's GPU text names, or None. With the point's memory
    given, a hedged name ("likely H100 80GB - uncertain", "A100 (80GB assumed)") is taken
    when the catalog parts of that name with that memory (within 3 %) agree on what the plan
    reads from them (compute capability, vLLM's A100 defaults): A100 80GB SXM or PCIe."""
    from bringup.core import gpu_catalog

    probes = [
        re.sub(r"^\s*(single|\d+x)\s*", "", p).strip()
        for p in re.split(r"[(),;\[\]]| on | \+ ", text)
    ]
    for probe in probes:
        found = gpu_catalog.find(probe) if probe else None
        if found is not None:
            return found
    if total_gib is None:
        return None
    for probe in probes:
        probe = re.sub(r"\b(likely|assumed|uncertain|NVIDIA)\b|-\s*$", "", probe).strip(" -")
        near = [
            g
            for g in (gpu_catalog.candidates(probe) if probe else [])
            if abs(g.memory_bytes / GiB - total_gib) <= 0.03 * total_gib
        ]
        if near and len({(g.compute_capability, g.vllm_treats_as_a100) for g in near}) == 1:
            return near[0]
    return None


def real_verdict(rep: dict[str, Any]) -> str | None:
    """fits, cuda_oom or kv_cache_insufficient from what the startup did; None when unknown
    or not a memory outcome."""
    if rep.get("oom"):
        return "cuda_oom"
    if rep.get("startup_failed"):
        failure = str(rep.get("failure") or "").lower()
        if "kv" in failure or "max seq len" in failure:
            return "kv_cache_insufficient"
        return None
    return "fits" if rep.get("oom") is False else None


def _number(value: Any) -> float | None:
    if isinstance(value, list):
        return min(float(v) for v in value) if value else None  # the tightest rank decides
    return None if value is None else float(value)


def argv_for(point: dict[str, Any], config: Path, quant: str | None) -> tuple[list[str], str]:
    """``bringup plan`` flags for the point and what its GPU figure is."""
    tp = int(point.get("tp") or 1)
    pp = int(point.get("pp") or 1)
    dp = int(point.get("dp") or 1)
    total = point.get("gpu_total_gib")
    text = str(point.get("gpu") or "")
    # a vGPU slice is a share of the named GPU: its memory is not the catalog's
    known = float(total) if isinstance(total, (int, float)) else None
    gpu = None if re.search(r"vgpu|slice", text, re.I) else catalog_gpu(text, known)
    if isinstance(total, (int, float)):
        gib, source = float(total), "point"
    elif gpu is not None:
        gib, source = gpu.memory_bytes / GiB, f"catalog {gpu.name}"
    else:
        gib, source = 80.0, "unknown (80 GiB assumed)"
    argv = [str(config), "--gpu-memory", f"{gib}GiB", "-tp", str(tp), "-pp", str(pp)]
    argv += ["--gpus", str(tp * pp * dp)]
    if dp > 1:
        argv += ["--data-parallel-size", str(dp)]
    if gpu is not None:
        argv += ["--gpu", gpu.name]
    version, _env = engine_version(str(point.get("vllm_version") or ""))
    if version:
        argv += ["--engine-version", version]
    for flag, key in (
        ("--gpu-memory-utilization", "gmu"),
        ("--max-model-len", "max_model_len"),
        ("--max-num-seqs", "max_num_seqs"),
        ("--max-num-batched-tokens", "max_num_batched_tokens"),
    ):
        if point.get(key) is not None:
            argv += [flag, str(point[key])]
    kv = str(point.get("kv_cache_dtype") or "auto").split()[0]
    if kv not in ("auto", "bf16", "bfloat16"):
        argv += ["--kv-cache-dtype", kv]
    if quant:
        argv += ["--quantization", quant]
    if point.get("enforce_eager"):
        argv.append("--enforce-eager")
    if point.get("ep"):
        argv.append("--enable-expert-parallel")
    return argv, f"{gib:.2f} GiB ({source})"


def unplannable(point: dict[str, Any]) -> str | None:
    """Why the planner cannot plan this point at all, or None."""
    if point.get("world_size") and not point.get("tp"):
        return f"world size {point['world_size']} with the TP/PP split not given"
    if isinstance(point.get("gpu_total_gib"), list):
        return "pipeline stages on GPUs of different sizes (the planner takes one GPU model)"
    return None


Planner = Callable[[list[str], dict[str, str]], tuple[int, dict[str, Any] | None, str]]


def evaluate(point: dict[str, Any], configs: Path, plan: Planner) -> Point2:
    """Plan one point and compare with what vLLM printed."""
    row = Point2(point["id"], str(point.get("vllm_version") or ""))
    why = unplannable(point)
    config, quant = model_config(point, configs)
    if why is None and config is None:
        why = "no config.json for this model in hf_configs/"
    if why is not None:
        row.unplannable = why
        return row
    assert config is not None
    argv, row.gpu = argv_for(point, config, quant)
    _version, environ = engine_version(row.version)
    _code, planned, err = plan(argv, environ)
    if planned is None:
        row.unplannable = (
            f"plan refused: {err.strip().splitlines()[0][:140] if err.strip() else '?'}"
        )
        return row
    rep = point.get("reported") or {}
    g = planned["per_gpu"]
    weights = _number(rep.get("weights_gib"))
    if weights is not None:
        row.weights = (g["weights_bytes"] / GiB, weights)
    pool = _number(rep.get("available_kv_gib", rep.get("available_kv_gib_worker1")))
    tokens = rep.get("kv_tokens")
    known_gpu = not row.gpu.startswith("80.00 GiB (unknown")
    kv = planned["kv_cache"]
    if pool is not None and tokens and g["kv_cache_bytes"] > 0 and kv["tokens"]:
        per_token_plan = g["kv_cache_bytes"] / kv["tokens"]
        row.bytes_per_token = (per_token_plan, pool * GiB / tokens)
    if known_gpu:
        if pool is not None:
            row.kv_gib = (g["kv_cache_bytes"] / GiB, pool)
        if tokens:
            row.kv_tokens = (int(kv["tokens"]), int(tokens))
        real = real_verdict(rep)
        if real is not None:
            v = planned["verdict"]
            row.verdict = ("fits" if v["fits"] else str(v["failure_class"]), real)
            row.confidence = str(v.get("confidence") or "certain")
            row.because = [str(b) for b in v.get("uncertain_because") or []]
    else:
        row.notes.append("GPU memory unknown: weights and bytes per token only")
    if point.get("speculative"):
        row.notes.append(f"speculative decoding ({point['speculative']}) not given to the plan")
    row.notes += [w[:100] for w in planned.get("warnings") or []]
    return row


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f} %"


def _median_abs(values: list[float | None]) -> float | None:
    xs = [abs(v) for v in values if v is not None]
    return statistics.median(xs) if xs else None


@dataclass(frozen=True)
class Confidences:
    """Verdicts scored with their confidence: right while certain, uncertain (right or
    wrong), wrong while certain, and how many right verdicts are uncertain."""

    total: int
    right: int
    right_certain: int
    uncertain: int
    wrong_certain: int
    right_uncertain: int

    def cell(self) -> str:
        """``17 / 5 / 0`` (right while certain / uncertain / wrong while certain)."""
        return f"{self.right_certain} / {self.uncertain} / {self.wrong_certain}"


def confidences(scored: list[tuple[tuple[str, str], str]]) -> Confidences:
    """Count ((plan, real), confidence) pairs; a plan without a confidence is certain."""
    right = [p == real for (p, real), _c in scored]
    uncertain = [c == "uncertain" for _v, c in scored]
    return Confidences(
        total=len(scored),
        right=sum(right),
        right_certain=sum(r and not u for r, u in zip(right, uncertain, strict=True)),
        uncertain=sum(uncertain),
        wrong_certain=sum(not r and not u for r, u in zip(right, uncertain, strict=True)),
        right_uncertain=sum(r and u for r, u in zip(right, uncertain, strict=True)),
    )


def verdict_cell(verdict: tuple[str, str] | None, confidence: str) -> str:
    """``fits / fits``, ``fits (uncertain) / kv_cache_insufficient``, with **wrong** marked
    where the plan's verdict differs from the real one and was given as certain."""
    if verdict is None:
        return "-"
    doubt = " (uncertain)" if confidence == "uncertain" else ""
    wrong = verdict[0] != verdict[1]
    mark = (" **wrong**" if not doubt else " (wrong, flagged)") if wrong else ""
    return f"{verdict[0]}{doubt} / {verdict[1]}{mark}"


def summary(rows: list[Point2]) -> dict[str, Any]:
    """The figures of the set: medians, counts, verdicts, OOMs."""
    planned = [r for r in rows if r.unplannable is None]
    verdicts = [r.verdict for r in planned if r.verdict]
    ooms = [r.verdict for r in planned if r.verdict and "cuda_oom" in r.verdict]
    return {
        "points": len(rows),
        "planned": len(planned),
        "weights": (
            len([r for r in planned if r.weights]),
            _median_abs([_err(r.weights) for r in planned]),
        ),
        "bytes_per_token": (
            len([r for r in planned if r.bytes_per_token]),
            _median_abs([_err(r.bytes_per_token) for r in planned]),
        ),
        "kv_gib": (
            len([r for r in planned if r.kv_gib]),
            _median_abs([_err(r.kv_gib) for r in planned]),
        ),
        "kv_tokens": (
            len([r for r in planned if r.kv_tokens]),
            _median_abs([_err(r.kv_tokens) for r in planned]),  # type: ignore[arg-type]
        ),
        "verdicts": (sum(1 for p, real in verdicts if p == real), len(verdicts)),
        "confidences": confidences([(r.verdict, r.confidence) for r in planned if r.verdict]),
        "oom": (
            sum(1 for p, real in ooms if p == real == "cuda_oom"),
            sum(1 for _p, real in ooms if real == "cuda_oom"),
            sum(1 for p, real in ooms if p == "cuda_oom" and real != "cuda_oom"),
        ),
    }


def report(rows: list[Point2], source: str) -> list[str]:
    """The markdown section for the set."""
    s = summary(rows)
    right, total = s["verdicts"]
    hit, real_ooms, false_ooms = s["oom"]
    lines = [
        f"## Second memory set: {source}",
        "",
        (
            f"{s['points']} startups; {s['planned']} planned, "
            f"{s['points'] - s['planned']} not plannable (named below)."
        ),
        "",
        "| figure | points | median abs error | goal |",
        "|---|---|---|---|",
        f"| weights per GPU | {s['weights'][0]} | {_pct(s['weights'][1])} | 2 % |",
        f"| KV bytes per token | {s['bytes_per_token'][0]} | {_pct(s['bytes_per_token'][1])} | 1 % |",
        f"| KV pool per GPU (GiB) | {s['kv_gib'][0]} | {_pct(s['kv_gib'][1])} | - |",
        f"| KV tokens | {s['kv_tokens'][0]} | {_pct(s['kv_tokens'][1])} | 4 % |",
        f"| verdict right | {total} | {right}/{total} | all |",
        (
            f"| verdicts right (certain only) / uncertain / wrong while certain | {total} | "
            f"{s['confidences'].cell()} ({s['confidences'].right_uncertain} right ones "
            "uncertain) | all / few / 0 |"
        ),
        (
            f"| OOM predicted where vLLM ran out of memory / OOMs / OOM predicted where it did "
            f"not | {real_ooms} | {hit}/{real_ooms}, {false_ooms} false | all, 0 false |"
        ),
        "",
        (
            "| point | vLLM | GPU | weights err | bytes/token err | KV GiB (plan / vLLM) | "
            "KV tokens (plan / vLLM) | KV err | verdict (plan / real) | notes |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.unplannable:
            continue
        kvg = f"{r.kv_gib[0]:.2f} / {r.kv_gib[1]:.2f}" if r.kv_gib else "-"
        tok = f"{r.kv_tokens[0]:,} / {r.kv_tokens[1]:,}" if r.kv_tokens else "-"
        verdict = verdict_cell(r.verdict, r.confidence)
        lines.append(
            f"| {r.id} | {r.version[:14]} | {r.gpu} | {_pct(_err(r.weights))} | "
            f"{_pct(_err(r.bytes_per_token))} | {kvg} | {tok} | "
            f"{_pct(_err(r.kv_tokens))} | {verdict} | {'; '.join(r.notes)[:160]} |"  # type: ignore[arg-type]
        )
    lines += uncertain_lines([(r.id, r.verdict, r.because) for r in rows if r.because])
    lines += ["", "Not plannable:", ""]
    lines += [f"- {r.id}: {r.unplannable}" for r in rows if r.unplannable]
    return lines


def uncertain_lines(points: list[tuple[str, tuple[str, str] | None, list[str]]]) -> list[str]:
    """The uncertain verdicts, each with the plan's reasons (``uncertain_because``)."""
    if not points:
        return []
    lines = ["", "Uncertain verdicts (plan / real) and why:", ""]
    for name, verdict, because in points:
        pair = f"{verdict[0]} / {verdict[1]}" if verdict else "-"
        lines.append(f"- {name} ({pair}): " + " | ".join(because))
    return lines
