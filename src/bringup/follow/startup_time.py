"""The startup prediction for a model and a server command: the facts measured here (the
shards' storage and page cache, the compile cache), then ``core.startup_time.predict``.

``plan`` adds it to its plan (``startup`` in ``--json``); ``run``, ``up`` and ``watch`` use it
for the progress bar, the ETA and the stall judge.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bringup.core import engine_args, vllm_compile, vllm_graphs
from bringup.core.startup_time import (
    CompileCache,
    StartupPrediction,
    StartupSetup,
    Storage,
    predict,
)
from bringup.core.startup_time import flags as startup_flags
from bringup.errors import BringupError

if TYPE_CHECKING:
    from bringup.adapters.repack import RepackMeter
    from bringup.core.plan.result import Plan

SHARD_SUFFIXES = (".safetensors", ".bin", ".pt")


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """What the prediction needs of the model: its shards on disk and its shape."""

    shards: tuple[str, ...]
    checkpoint_bytes: int
    hidden_size: int
    layers: int
    architecture: Any  # core.plan's Architecture (for the capture ceiling)


def model_facts(model: str, environ: Mapping[str, str]) -> ModelFacts | None:
    """The shards and shape of ``model`` (a folder, an HF cache name); None when unknown."""
    from bringup.adapters.model_source import load_model, locate_model
    from bringup.core.plan import parse_architecture

    try:
        loaded = load_model(locate_model(model, environ))
        arch = parse_architecture(loaded.config)
    except (BringupError, OSError, ValueError, KeyError, TypeError):
        return None
    folder = loaded.source.path
    shards: list[str] = []
    if folder is not None and folder.is_dir():
        shards = _shards(folder)
    size = sum(Path(s).stat().st_size for s in shards)
    return ModelFacts(tuple(shards), size, arch.hidden_size, arch.num_layers, arch)


def _shards(folder: Path) -> list[str]:
    for suffix in SHARD_SUFFIXES:
        found = sorted(str(p) for p in folder.glob(f"*{suffix}") if p.is_file())
        if found:
            return found
    return []


def measure_storage(shards: Sequence[str]) -> Storage | None:
    """The shards' storage, measured (None when there is none, or it cannot be read)."""
    if not shards:
        return None
    from bringup.adapters import storage

    with contextlib.suppress(OSError, ValueError):
        return storage.measure(shards)
    return None


def predict_startup(
    facts: ModelFacts | None,
    flags: Sequence[str],
    environ: Mapping[str, str],
    *,
    weights_bytes_per_rank: int,
    world_size: int,
    graphs: int,
    device: str,
    enforce_eager: bool = False,
    storage: Storage | None = None,
    checkpoint_bytes: int = 0,
    pipeline_stages: int = 1,
    engine_version: str | None = None,
    max_num_batched_tokens: int | None = None,
    repack_bytes_per_s: float | None = None,
    max_num_seqs: int = 256,
) -> StartupPrediction:
    """The prediction for this model and command (``storage`` given, or measured now;
    ``checkpoint_bytes``: the whole checkpoint when its shards are not here). With
    ``pipeline_stages`` > 1 each rank compiles and captures only its own stage's layers
    (vLLM's ``get_pp_indices`` splits them about evenly): the largest stage's share.
    The compilation config in ``flags`` (``core.vllm_compile``) sets what is
    compiled and captured, read with ``engine_version``'s rules (None: the newest)."""
    from bringup.adapters import compile_cache
    from bringup.core.plan.settings import DEFAULT_ENGINE_VERSION

    version = vllm_compile.version_parts(engine_version)
    rules = version[:2] if version else _version(DEFAULT_ENGINE_VERSION)
    config = vllm_compile.resolve(
        vllm_compile.parse(flags),
        (rules[0], rules[1]),
        max_num_batched_tokens=max_num_batched_tokens,
        default_capture_sizes=graphs,
        max_num_seqs=max_num_seqs,
    )
    off = startup_flags.compile_off(flags, enforce_eager)
    if off is None and not config.compiles:
        off = "compilation mode 0"
    cache, note = CompileCache.COLD, ""
    if off is None and not config.piecewise:
        cache, note = CompileCache.UNKNOWN, "vLLM's compile cache unused"
    elif off is None and facts is not None:
        cache, note = compile_cache.find(
            environ, hidden_size=facts.hidden_size, layers=facts.layers
        )
    elif off is not None:
        note = f"off: {off}"
    if off is not None or not config.captures:
        graphs = 0
    elif config.capture_sizes is not None:
        graphs = config.capture_sizes
    if storage is None and facts is not None:
        storage = measure_storage(facts.shards)
    return predict(
        StartupSetup(
            weights_bytes_per_rank=weights_bytes_per_rank,
            checkpoint_bytes=facts.checkpoint_bytes if facts and facts.shards else checkpoint_bytes,
            world_size=world_size,
            storage=storage,
            load_format=startup_flags.load_format(flags),
            compile=off is None,
            compile_cache=cache,
            compile_cache_note=note,
            graphs=graphs,
            layers=-(-facts.layers // max(1, pipeline_stages)) if facts is not None else 0,
            device=device,
            inductor_compiles=config.inductor_compiles,
            adaptor=vllm_compile.inductor_adaptor(version or rules, environ)
            if config.piecewise
            else None,
            compile_note=config.note,
            capture_note=config.capture_note,
            repack_bytes_per_s=repack_bytes_per_s if device == "cpu" else None,
        )
    )


def measure_cpu_repack(
    argv: Sequence[str],
    environ: Mapping[str, str],
    facts: ModelFacts,
    meter: RepackMeter | None = None,
) -> float | None:
    """vLLM's CPU build: the repack rate of one of this model's layer weights, measured in the
    interpreter the command runs in (``adapters.repack``); None when it cannot be measured.
    An instrument for now (``bench/bench_startup_time.py --real`` scores the prediction with
    it): the reorder alone ran 2.5-6 x faster than the engine's own post-processing after the
    reads, so ``run`` keeps the corpus's band and the fresh-copy rate (bench/RESULTS.md,
    fourth round)."""
    from bringup.adapters import membw, repack
    from bringup.adapters.report_env import engine_interpreter

    python = engine_interpreter(argv, environ)
    if python is None:
        return None
    cache = membw.last_level_cache_bytes()
    rows, cols = repack.probe_shape(
        facts.hidden_size, int(getattr(facts.architecture, "intermediate_size", 0) or 0), cache
    )
    try:
        measure = meter or repack.measure_repack
        return measure(python, rows, cols, repack.omp_threads(environ), cache_bytes=cache)
    except OSError:
        return None


def for_plan(
    plan: Plan, model: str, flags: Sequence[str], environ: Mapping[str, str]
) -> StartupPrediction:
    """The startup of a planned vLLM server: the plan's weights per rank and graph count."""
    from bringup.core.plan import peaks

    s = plan.settings
    facts = model_facts(model, environ)
    graphs = 0
    if s.device != "cpu" and not s.enforce_eager:
        version = _version(s.engine_version)
        graphs = vllm_graphs.capture_sizes(
            s.max_num_seqs,
            version,
            v0_engine=s.v0_engine,
            max_num_batched_tokens=s.max_num_batched_tokens,
            ceiling=peaks.capture_ceiling(facts.architecture) if facts else None,
        )
    return predict_startup(
        facts,
        flags,
        environ,
        weights_bytes_per_rank=plan.per_gpu.weights_bytes,
        world_size=s.world_size,
        graphs=graphs,
        device=s.device,
        enforce_eager=s.enforce_eager,
        checkpoint_bytes=plan.model.weights_bytes_total,
        pipeline_stages=s.pipeline_parallel_size,
        engine_version=s.engine_version,
        max_num_batched_tokens=s.max_num_batched_tokens,
        max_num_seqs=s.max_num_seqs,
    )


def live_prediction(
    argv: Sequence[str], environ: Mapping[str, str]
) -> tuple[StartupPrediction, int] | None:
    """``for_command`` for the follower: (the prediction, the shards' bytes), or None when
    there is none; a model that cannot be read here gives none (the start goes on)."""
    try:
        found = _for_command(argv, environ)
    except (BringupError, OSError, ValueError):
        return None
    return None if found is None else (found[0], found[1].checkpoint_bytes)


def for_command(argv: Sequence[str], environ: Mapping[str, str]) -> StartupPrediction | None:
    """The startup of a vLLM server command (``run``, ``up``): None for another engine or
    a model not found here. Weights per rank are the checkpoint over tp x pp. The CPU
    build's repack is not measured here (:func:`measure_cpu_repack`: bench/RESULTS.md,
    fourth round: its rate predicted the phase worse than the fresh-copy rate)."""
    found = _for_command(argv, environ)
    return None if found is None else found[0]


def _for_command(
    argv: Sequence[str], environ: Mapping[str, str]
) -> tuple[StartupPrediction, ModelFacts] | None:
    from bringup.core.vocab import Engine

    command = engine_args.parse_server_command(argv)
    if command.engine is not Engine.VLLM or not command.model:
        return None
    facts = model_facts(command.model, environ)
    if facts is None or not facts.shards:
        # a bundled config or a folder without weights: the weights the server will load are
        # not here, so what loading them takes (a download first, perhaps) is not known
        return None
    tp = _int(engine_args.get_flag(command.flags, "--tensor-parallel-size", "-tp"), 1)
    pp = _int(engine_args.get_flag(command.flags, "--pipeline-parallel-size", "-pp"), 1)
    device = (engine_args.get_flag(command.flags, "--device") or "").lower()
    if device != "cuda" and _cpu_build(environ):
        device = "cpu"
    from bringup.core.plan import peaks
    from bringup.core.plan.flags import int_flag

    # read as vLLM reads them (``32k`` batched tokens is 32,000); the default list is cut at
    # max_num_batched_tokens as the plan's is (``vllm_graphs.default_capture_sizes``)
    seqs = int_flag(command.flags, "--max-num-seqs") or 256
    batched = int_flag(command.flags, "--max-num-batched-tokens")
    graphs = vllm_graphs.capture_sizes(
        seqs, max_num_batched_tokens=batched, ceiling=peaks.capture_ceiling(facts.architecture)
    )
    prediction = predict_startup(
        facts,
        command.flags,
        environ,
        weights_bytes_per_rank=facts.checkpoint_bytes // max(1, tp * pp),
        world_size=max(1, tp * pp),
        graphs=0 if device == "cpu" else graphs,
        device=device or "cuda",
        pipeline_stages=max(1, pp),
        max_num_batched_tokens=batched,
        max_num_seqs=seqs,
    )
    return prediction, facts


def _cpu_build(environ: Mapping[str, str]) -> bool:
    """vLLM's CPU build is what runs: its environment says so (``VLLM_TARGET_DEVICE=cpu``, or
    the CPU build's own KV space variable), or no NVIDIA device exists here."""
    if environ.get("VLLM_TARGET_DEVICE") == "cpu" or "VLLM_CPU_KVCACHE_SPACE" in environ:
        return True
    return not Path("/dev/nvidiactl").exists()


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text else default
    except ValueError:
        return default


def _version(text: str) -> tuple[int, int]:
    from bringup.core.plan.settings import parse_version

    return parse_version(text)
