"""Calibration: refine the prediction with the numbers a successful startup log reported.

``bringup diagnose`` reads a vLLM log into facts (``weights_gib_per_gpu``,
``available_kv_gib``, ``kv_cache_tokens``, ``cuda_graph_gib`` and the settings it ran with).
The planner predicts the same startup, and the differences become corrections:

- weights: measured / predicted, a factor (repacking, padding the model does that we miss);
- the rest of the budget: ``u x T - weights - KV`` measured is activations + non-torch
  (+ graphs from 0.21); measured minus predicted is added to the activation peak;
- CUDA graphs: the measured pool replaces the estimate;
- KV bytes per token: ``available KV / tokens`` measured over predicted, a factor.

A log of another model is refused (:func:`model_mismatches`) unless forced, the log's vLLM
version is the one whose rules the plan follows, and :func:`report` says what changed
(from → to) and from which log lines.
"""

from __future__ import annotations

from collections.abc import Mapping

from bringup.core.plan import kv as kvmod
from bringup.core.plan.budget import Calibration
from bringup.core.plan.planner import Planner
from bringup.core.plan.result import CalibrationReport, Change
from bringup.core.plan.settings import Settings, parse_version
from bringup.units import GiB, format_bytes

Facts = Mapping[str, float | int | str]


def measured_settings(base: Settings, facts: Facts) -> Settings:
    """The settings the logged startup ran with (``base`` where the log does not say)."""

    def num(name: str, default: float) -> float:
        value = facts.get(name)
        return float(value) if isinstance(value, (int, float)) else default

    return base.with_(
        tensor_parallel_size=int(num("tensor_parallel_size", base.tensor_parallel_size)),
        gpu_memory_utilization=num("gpu_memory_utilization", base.gpu_memory_utilization),
        max_num_seqs=int(num("max_num_seqs", base.max_num_seqs)),
        max_num_batched_tokens=int(num("max_num_batched_tokens", base.max_num_batched_tokens)),
        max_model_len=int(num("max_model_len", base.max_model_len)),
    )


def calibrate(planner: Planner, base: Settings, facts: Facts) -> Calibration:
    """Corrections from a successful startup's facts (an empty Calibration if it says nothing)."""
    s = measured_settings(base, facts)
    predicted = Planner(planner.arch, planner.tensors, planner.gpus).evaluate(s).rank
    weights = _gib(facts, "weights_gib_per_gpu")
    kv = _gib(facts, "available_kv_gib")
    graphs = _gib(facts, "cuda_graph_gib")
    tokens = facts.get("kv_cache_tokens")
    weights_scale = weights / predicted.weights if weights and predicted.weights else 1.0
    delta = 0
    if weights is not None and kv is not None:
        measured_rest = predicted.requested - weights - kv
        graphs_in = (
            (graphs if graphs is not None else predicted.graphs)
            if predicted.graphs_in_budget
            else 0
        )
        delta = round(
            measured_rest - predicted.activation - predicted.non_torch_in_budget - graphs_in
        )
    kv_scale = 1.0
    if kv and isinstance(tokens, (int, float)) and tokens > 0 and predicted.spec.bytes_per_token:
        kv_scale = (kv / float(tokens)) / predicted.spec.bytes_per_token
    return Calibration(
        weights_scale, delta, round(graphs) if graphs is not None else None, kv_scale
    )


def _gib(facts: Facts, name: str) -> float | None:
    value = facts.get(name)
    return float(value) * GiB if isinstance(value, (int, float)) else None


# a log whose numbers differ this much from the plan of the same settings is of another model
WEIGHTS_MISMATCH = 0.25
KV_PER_TOKEN_MISMATCH = 0.10


def _last_part(name: str) -> str:
    return name.rstrip("/").rsplit("/", 1)[-1].lower()


def model_mismatches(
    planner: Planner, base: Settings, facts: Facts, model_name: str | None
) -> list[str]:
    """Why the log seems to be of another model than the one planned (empty: the same).

    Compared: the served path's last part with the planned name's (one must contain the
    other: ``Llama-3.1-8B`` matches ``meta-llama/Llama-3.1-8B-Instruct``); the architecture vLLM
    resolved; the weights per GPU (more than 25 % apart means other layers or hidden size);
    the KV bytes per token implied by the pool and its tokens (more than 10 % apart means
    other layers, KV heads or head size)."""
    out: list[str] = []
    served = facts.get("model")
    a, b = (
        (_last_part(served), _last_part(model_name))
        if isinstance(served, str) and model_name
        else ("", "")
    )
    if a and b and a not in b and b not in a:
        out.append(f"the log served {served}, the plan is for {model_name}")
    arch = facts.get("architecture")
    if isinstance(arch, str) and arch != planner.arch.name:
        out.append(f"the log's architecture is {arch}, the plan's {planner.arch.name}")
    s = measured_settings(base, facts)
    predicted = Planner(planner.arch, planner.tensors, planner.gpus).evaluate(s).rank
    weights = _gib(facts, "weights_gib_per_gpu")
    if weights and predicted.weights:
        ratio = weights / predicted.weights
        if abs(ratio - 1) > WEIGHTS_MISMATCH:
            out.append(
                f"the log loaded {weights / GiB:.2f} GiB of weights per GPU, the plan "
                f"{predicted.weights / GiB:.2f} GiB (other layers or hidden size)"
            )
    kv = _gib(facts, "available_kv_gib")
    tokens = facts.get("kv_cache_tokens")
    if kv and isinstance(tokens, (int, float)) and tokens > 0 and predicted.spec.bytes_per_token:
        reported = kvmod.reported_tokens(
            predicted.spec,
            int(kv),
            version=parse_version(s.engine_version),
            max_model_len=s.max_model_len,
            max_num_batched_tokens=s.max_num_batched_tokens,
        )
        if reported and abs(reported / float(tokens) - 1) > KV_PER_TOKEN_MISMATCH:
            out.append(
                f"the log's KV pool holds {int(tokens):,} tokens, the plan's bytes per token "
                f"would make it {reported:,} (other layers, KV heads or head size)"
            )
    return out


_LINE_PHRASES = {
    "weights": ("Model loading took", "Loading model weights took"),
    "overhead": ("Available KV cache memory",),
    "graphs": ("Graph capturing finished",),
    "kv": ("KV cache size",),
    "version": ("version", "LLM engine (v"),
}


# every phrase above: the lines of a log that ``--calibrate`` keeps to cite
SOURCE_PHRASES = tuple(p for phrases in _LINE_PHRASES.values() for p in phrases)


def is_source_line(line: str) -> bool:
    """Whether a log line may be the source of a calibrated figure (see :func:`source_line`)."""
    return any(p in line for p in SOURCE_PHRASES)


def source_line(log_lines: list[str], what: str) -> str | None:
    """The first log line a calibrated figure came from (stripped, at most 200 characters)."""
    for line in log_lines:
        if any(p in line for p in _LINE_PHRASES.get(what, ())):
            return line.strip()[:200]
    return None


def report(
    log: str,
    log_lines: list[str],
    planner: Planner,
    s: Settings,
    calibration: Calibration,
    *,
    engine_version: str | None,
    version_before: str | None,
    mismatches: list[str],
) -> CalibrationReport:
    """What calibrating with this log changes in the plan for ``s`` (from → to)."""
    before = Planner(planner.arch, planner.tensors, planner.gpus).evaluate(s).rank
    after = Planner(planner.arch, planner.tensors, planner.gpus, calibration).evaluate(s).rank
    fb = format_bytes
    changes: list[Change] = []
    if engine_version and version_before and engine_version != version_before:
        changes.append(
            Change(
                "vLLM version", version_before, engine_version, source_line(log_lines, "version")
            )
        )
    pairs = (
        ("weights per GPU", before.weights, after.weights, "weights"),
        (
            "activation peak + non-torch",
            before.activation + before.non_torch_in_budget,
            after.activation + after.non_torch_in_budget,
            "overhead",
        ),
        ("CUDA graphs", before.graphs, after.graphs, "graphs"),
        ("KV cache per GPU", max(0, before.kv), max(0, after.kv), "overhead"),
    )
    for what, b, a, key in pairs:
        if b != a:
            changes.append(Change(what, fb(b), fb(a), source_line(log_lines, key)))
    if before.spec.bytes_per_token != after.spec.bytes_per_token:
        changes.append(
            Change(
                "KV bytes per token",
                f"{before.spec.bytes_per_token:,}",
                f"{after.spec.bytes_per_token:,}",
                source_line(log_lines, "kv"),
            )
        )
    return CalibrationReport(log, engine_version, tuple(changes), tuple(mismatches))
