"""Time to ready, predicted phase by phase, from what the machine and the command say.

The phases follow a vLLM startup in order (``core.vocab.Phase``):

- ``start``: imports, config, device and distributed init (a fixed band, ``constants``);
- ``weights_loading``: the shard reads, from the storage for the bytes not in the page cache
  and from the page cache for the rest, plus building the model's modules, plus (vLLM's CPU
  build) the copies into fresh memory: the parameters' first touch
  (:func:`param_fill_seconds`) and the weights' repacking (:func:`cpu_prepack_seconds`). vLLM's default
  loader (safetensors through mmap, one reader per rank) reads every shard on every rank; the
  ranks share the page cache, so the storage delivers the checkpoint once and every rank reads
  it from there. ``fastsafetensors`` and the Run:ai streamer split the files over the ranks and
  read with several threads, which only a network file system rewards (the band's low end);
- ``torch_compile``: absent with ``--enforce-eager`` or ``-O0``; cold or warm from the
  engine's compile cache; a warm one per layer (Dynamo traces each), a cold one a constant
  (Inductor compiles the distinct pieces) never below the warm one; each Inductor compile
  beyond the first (a compile range or size, ``core.vllm_compile``) adds the logs' median
  Inductor compile when cold, their median load of compiled graphs when warm;
- ``memory_profiling``: the profile run, the KV cache allocation and the sampler warmup;
- ``cuda_graph_capture``: the sizes the plan counts x the model's layers x the seconds per
  size and layer (each size runs its warmup forwards and the capture through every layer);
  per size alone when the layers are unknown (GPUs only);
- ``api_server_starting``: the API server's start.

Pure: every measurement comes in through :class:`StartupSetup`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from bringup.core.startup_time import constants as c
from bringup.core.startup_time.constants import Band
from bringup.core.startup_time.service import ServiceTimeout, service_timeout
from bringup.core.vocab import Phase


class CompileCache(StrEnum):
    """What the engine's compile cache holds for this model and config."""

    WARM = "warm"
    COLD = "cold"
    UNKNOWN = "unknown"  # entries exist that cannot be told apart from this model's


@dataclass(frozen=True, slots=True)
class Storage:
    """Where the shards are and how fast they read (``adapters.storage`` measures it)."""

    kind: str  # "local", "nfs", "network", "overlay", "tmpfs"
    fs_type: str  # the mount's type, as /proc/self/mountinfo names it ("ext4", "nfs4", ...)
    read_bytes_per_s: float | None  # from the storage (cold pages); None: not measured
    cached_read_bytes_per_s: float | None  # from the page cache; None: not measured
    cached_bytes: int  # of the shards, already in the page cache (mincore)
    total_bytes: int  # of the shards
    measured_bytes: int = 0  # how many bytes the measurement read
    note: str = ""  # why a rate is missing, or what was assumed
    # a memory copy into anonymous memory nothing has touched yet (its first-touch page
    # faults included), and the same copy again into the now-touched memory; None: not
    # measured (``adapters.storage.measure_fill``)
    fill_bytes_per_s: float | None = None
    refill_bytes_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class StartupSetup:
    """What the startup depends on."""

    weights_bytes_per_rank: int
    checkpoint_bytes: int  # all shards (every rank reads them all with vLLM's default loader)
    world_size: int
    storage: Storage | None  # None: no shard on this machine
    load_format: str = "auto"
    compile: bool = True  # False with --enforce-eager or -O0
    compile_cache: CompileCache = CompileCache.COLD
    compile_cache_note: str = ""
    graphs: int = 0  # CUDA-graph sizes captured (0 on a CPU or with --enforce-eager)
    layers: int = 0  # decoder layers (0: unknown; the compile and capture fall back to constants)
    device: str = "cuda"
    # Inductor compiles of every piecewise subgraph: the compile ranges (one before 0.13)
    # plus each extra compile size (``vllm_compile.resolve``); a warm start loads as many
    inductor_compiles: int = 1
    # "standalone", "legacy" (the AOTAutograd cache off) or None: unknown
    # (``vllm_compile.inductor_adaptor``)
    adaptor: str | None = None
    compile_note: str = ""  # what the flags change in the compile (for the basis)
    capture_note: str = ""  # what they change in the capture (for the basis)
    # vLLM's CPU build: oneDNN's reorder of a layer-sized weight into its blocked layout,
    # bytes per second, measured in the engine's python (``adapters.repack``); None: not measured
    repack_bytes_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class PhaseEstimate:
    """One phase: the typical seconds, the band around it, and why."""

    phase: Phase
    seconds: float
    low: float
    high: float
    basis: str
    # why this phase may run long, from the facts (live says it when the phase passes
    # ``high``); for people and the live follower only, not in JSON
    slow_reason: str = field(default="", metadata={"json": None})
    # of ``seconds``, the part after the phase's last progress line (the CPU build's repack
    # after the last shard): the live ETA adds it to what the observed pace leaves
    tail_seconds: float = field(default=0.0, metadata={"json": None})


@dataclass(frozen=True, slots=True)
class StartupPrediction:
    """The ``startup`` object of ``plan --json``."""

    phases: tuple[PhaseEstimate, ...]
    total_seconds: float
    bound_by: Phase  # the longest phase
    # the start timeout a service manager, a container or Kubernetes should allow (from the
    # phases' high ends: ``service.service_timeout``, the one rule ``bringup unit`` writes)
    service: ServiceTimeout = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "service", service_timeout(self.high_seconds))

    @property
    def low_seconds(self) -> float:
        """The sum of the phases' low ends."""
        return sum(p.low for p in self.phases)

    @property
    def high_seconds(self) -> float:
        """The sum of the phases' high ends."""
        return sum(p.high for p in self.phases)

    def phase(self, phase: Phase) -> PhaseEstimate | None:
        """The estimate of ``phase``, if it is predicted."""
        return next((p for p in self.phases if p.phase is phase), None)


STREAMING_FORMATS = ("runai_streamer", "runai_streamer_sharded", "fastsafetensors")
STREAM_READERS = 16  # RUNAI_STREAMER_CONCURRENCY's default in vLLM's runai loader


def predict(setup: StartupSetup) -> StartupPrediction:
    """The startup's phases, in order, and the total."""
    phases = [
        _band(Phase.START, c.START),
        weights(setup),
        *_compile(setup),
        _band(Phase.MEMORY_PROFILING, c.PROFILE),
        *_capture(setup),
        _band(Phase.API_SERVER_STARTING, c.API),
    ]
    phases = [_rounded(p) for p in phases]
    longest = max(phases, key=lambda p: p.seconds)
    return StartupPrediction(tuple(phases), round(sum(p.seconds for p in phases), 2), longest.phase)


def _rounded(p: PhaseEstimate) -> PhaseEstimate:
    return PhaseEstimate(
        p.phase,
        round(p.seconds, 2),
        round(p.low, 2),
        round(p.high, 2),
        p.basis,
        p.slow_reason,
        round(p.tail_seconds, 2),
    )


def _band(phase: Phase, band: Band, basis: str | None = None, why: str = "") -> PhaseEstimate:
    return PhaseEstimate(phase, band.seconds, band.low, band.high, basis or band.source, why)


def weights(setup: StartupSetup) -> PhaseEstimate:
    """The weights phase: model init + cold bytes from storage + cached bytes from the cache."""
    init = _model_init(setup)
    read_bytes = _bytes_read_per_rank(setup)
    st = setup.storage
    if st is None or (st.read_bytes_per_s is None and st.cached_bytes < st.total_bytes):
        return _assumed(setup, init, read_bytes, st)
    cached_share = st.cached_bytes / st.total_bytes if st.total_bytes else 1.0
    cold = read_bytes * (1 - cached_share)
    warm = read_bytes - cold
    cache_rate = st.cached_read_bytes_per_s or st.read_bytes_per_s or 0.0
    storage_s = cold / st.read_bytes_per_s if cold and st.read_bytes_per_s else 0.0
    cache_s = warm / cache_rate if warm and cache_rate else 0.0
    fill = param_fill_seconds(setup) + cpu_prepack_seconds(setup)
    io = storage_s + cache_s + fill
    # the measurement is a few hundred MB: the band is a third either way around the reads
    low_io = (storage_s + cache_s) / _streaming_gain(setup) * (2 / 3) + fill * (2 / 3)
    basis = _weights_basis(setup, st, read_bytes, cold)
    if fill and setup.device == "cpu" and setup.repack_bytes_per_s:
        basis += (
            f"; {_gb(setup.weights_bytes_per_rank)} copied into fresh parameters (first touch "
            f"at {_fill_rate(st) / 1e9:.2f} GB/s), then repacked for the CPU GEMM at "
            f"{setup.repack_bytes_per_s / 1e9:.2f} GB/s (oneDNN's reorder, measured in the "
            f"engine's python); model init: {init.source}"
        )
    elif fill and st.fill_bytes_per_s:
        basis += (
            f"; {_gb(setup.weights_bytes_per_rank)} copied twice into fresh memory (the "
            f"parameters, then the CPU GEMM's packed weights), measured at "
            f"{st.fill_bytes_per_s / 1e9:.2f} GB/s into fresh pages, "
            f"{_fill_rate(st) / 1e9:.2f} GB/s for their first touch alone"
        )
    return PhaseEstimate(
        Phase.WEIGHTS_LOADING,
        init.seconds + io,
        init.low + low_io,
        init.high + io * 4 / 3,
        basis,
        _weights_slow_reason(st, cold / read_bytes if read_bytes else 0.0),
        cpu_prepack_seconds(setup),
    )


def _model_init(setup: StartupSetup) -> Band:
    """Building the modules and post-processing the weights, outside the reads.

    On a GPU (and on the CPU build when the repack was not measured): the corpus's band,
    "Model loading took" less "Loading weights took", which holds ``create_model`` and
    ``process_weights_after_loading``. On the CPU build with the repack measured, that
    post-processing is :func:`cpu_prepack_seconds` itself, and ``create_model`` only makes
    modules whose parameters ``torch.empty`` left untouched (their first touch is
    :func:`param_fill_seconds`): nothing is added for it, so the post-processing is not
    counted twice."""
    if setup.device == "cpu" and setup.repack_bytes_per_s:
        return CPU_MODULES
    return c.MODEL_INIT


CPU_MODULES = Band(
    0.0,
    0.0,
    0.0,
    "the CPU build's modules (torch.empty: untouched memory, its first touch counted with the "
    "copies)",
)


def _fill_rate(st: Storage) -> float:
    """The bytes per second of the first touch alone: a copy into fresh memory less the
    same copy into touched memory (1/fill - 1/refill), the part a plain read lacks."""
    fill, refill = st.fill_bytes_per_s, st.refill_bytes_per_s
    if not fill:
        return 0.0
    extra = 1 / fill - (1 / refill if refill and refill > fill else 0.0)
    return 1 / extra if extra > 0 else 0.0


def param_fill_seconds(setup: StartupSetup) -> float:
    """vLLM's CPU build: the seconds its loader spends copying each tensor into the model's
    parameters beyond the read itself.

    vLLM 0.32's ``DefaultModelLoader.load_weights`` hands ``model.load_weights`` the tensors of
    ``safetensors_weights_iterator``: ``safe_open(..., framework="pt").get_tensor(name)``, a
    view of the shard's mapping, not a copy. Each model's ``load_weights`` then calls the
    parameter's ``weight_loader`` (``default_weight_loader``: ``param.data.copy_(loaded)``;
    the stacked ``qkv_proj``/``gate_up_proj`` loaders copy into a ``narrow`` of the
    parameter). The parameters were made by ``create_model`` under ``torch.device("cpu")``
    with ``torch.empty``: memory nothing has touched, so that copy takes every page's
    first-touch fault (the kernel zeroes each page before the copy writes it) on top of the
    copy out of the mapping, which the storage measurement already times. The first touch is
    measured here as a copy into fresh anonymous memory less the same copy into touched
    memory (``adapters.storage.measure_fill``), for each rank's own parameters. On a GPU the
    parameters are device memory allocated up front and the copy is the host-to-device
    transfer out of the mapping, staged through pinned buffers: nothing is added for it.
    """
    st = setup.storage
    if setup.device != "cpu" or st is None:
        return 0.0
    rate = _fill_rate(st)
    return setup.weights_bytes_per_rank / rate if rate else 0.0


def cpu_prepack_seconds(setup: StartupSetup) -> float:
    """vLLM's CPU build: the seconds ``process_weights_after_loading`` spends repacking every
    weight for the CPU GEMM, a whole copy into fresh memory.

    In vLLM 0.32 both ``UnquantizedLinearMethod`` (``layers/linear.py``) and
    ``UnquantizedEmbeddingMethod`` (``layers/vocab_parallel_embedding.py``) call
    ``dispatch_cpu_unquantized_gemm`` after loading on a CPU: a 2-D weight becomes a oneDNN
    matmul handler built from it (``create_onednn_mm``, which reorders the weight into
    oneDNN's blocked layout; a linear layer's own weight is then dropped), or an sgl-kernel
    packed copy (``convert_weight_packed``) for small bf16 GEMMs. Either way every weight is
    read once more and written into memory nothing touched. The reorder's own rate, measured
    in the engine's python on layer-sized weights (``StartupSetup.repack_bytes_per_s``,
    ``adapters.repack``), when given; otherwise the copy rate into fresh pages
    (``Storage.fill_bytes_per_s``). For each rank's own weights. Not on a GPU.
    """
    st = setup.storage
    if setup.device != "cpu" or st is None:
        return 0.0
    rate = setup.repack_bytes_per_s or st.fill_bytes_per_s
    return setup.weights_bytes_per_rank / rate if rate else 0.0


SLOW_STORAGE_BYTES_PER_S = 0.5e9  # below a SATA SSD's sequential read


def _weights_slow_reason(st: Storage, cold_share: float) -> str:
    """What the facts say about a slow weights phase."""
    if st.kind in ("nfs", "network"):
        return f"the shards are on a network file system ({st.fs_type})"
    rate = st.read_bytes_per_s
    if cold_share >= 0.5 and rate is not None and rate < SLOW_STORAGE_BYTES_PER_S:
        return (
            f"a cold page cache on slow storage: {100 * cold_share:.0f}% of the shards were not "
            f"in the page cache, and {_storage_name(st)} reads {rate / 1e9:.2f} GB/s"
        )
    if cold_share >= 0.5:
        return f"a cold page cache: {100 * cold_share:.0f}% of the shards were read from storage"
    return "the storage or the CPU is busier than when it was measured"


def _bytes_read_per_rank(setup: StartupSetup) -> int:
    """vLLM's default loader reads every shard on every rank; the streaming loaders split
    the files over the ranks."""
    if setup.load_format in STREAMING_FORMATS:
        return setup.weights_bytes_per_rank
    return max(setup.checkpoint_bytes, setup.weights_bytes_per_rank)


def _streaming_gain(setup: StartupSetup) -> float:
    """How much faster several reader threads may go: only a network file system serves
    parallel streams faster than one (a local disk's readahead already keeps it busy)."""
    st = setup.storage
    network = st is not None and st.kind in ("nfs", "network")
    if setup.load_format.startswith("runai_streamer") and network:
        return float(STREAM_READERS)
    return 1.0


def _assumed(setup: StartupSetup, init: Band, read_bytes: int, st: Storage | None) -> PhaseEstimate:
    rate = c.ASSUMED_STORAGE_BYTES_PER_S
    slow, fast = c.ASSUMED_STORAGE_SPREAD
    why = "no shard on this machine to measure" if st is None else (st.note or "not measured")
    return PhaseEstimate(
        Phase.WEIGHTS_LOADING,
        init.seconds + read_bytes / rate,
        init.low + read_bytes / fast,
        init.high + read_bytes / slow,
        f"{_reads(setup, read_bytes)} at an assumed {rate / 1e9:.1f} GB/s (a local NVMe SSD; "
        f"{why}); model init: {init.source}",
        "the storage is slower than the local SSD assumed (it was not measured)",
    )


def _weights_basis(setup: StartupSetup, st: Storage, read_bytes: int, cold: float) -> str:
    parts = [_reads(setup, read_bytes)]
    if cold and st.read_bytes_per_s:
        parts.append(
            f"{_gb(int(cold))} from {_storage_name(st)} at {st.read_bytes_per_s / 1e9:.2f} GB/s "
            f"(measured on {_gb(st.measured_bytes)} of the shards)"
        )
    if st.cached_bytes:
        rate = st.cached_read_bytes_per_s
        at = f" at {rate / 1e9:.2f} GB/s" if rate else ""
        share = 100 * st.cached_bytes / max(1, st.total_bytes)
        parts.append(f"{share:.0f}% already in the page cache{at}")
    if setup.load_format != "auto":
        parts.append(f"--load-format {setup.load_format}")
    return "; ".join(parts)


def _reads(setup: StartupSetup, read_bytes: int) -> str:
    text = f"{_gb(read_bytes)} read per rank"
    if setup.load_format not in STREAMING_FORMATS and setup.world_size > 1:
        text += " (every rank reads every shard; the page cache shares them)"
    return text


def _storage_name(st: Storage) -> str:
    names = {
        "nfs": f"a network file system ({st.fs_type})",
        "network": f"a network file system ({st.fs_type})",
        "overlay": "an overlay file system (a container layer)",
        "tmpfs": "tmpfs (memory)",
    }
    return names.get(st.kind, f"local storage ({st.fs_type})")


def _compile(setup: StartupSetup) -> list[PhaseEstimate]:
    if not setup.compile:
        return []
    warm = setup.compile_cache is CompileCache.WARM
    band = c.COMPILE_WARM if warm else c.COMPILE_COLD
    if setup.layers:
        band = _per_layer_compile(setup.layers, band, warm)
    band = _more_compiles(band, setup.inductor_compiles, warm)
    why = (
        "a warm compile cache, yet slow: the cached graphs may be another config's"
        if warm
        else "a cold compile cache: torch.compile builds every graph"
    )
    if not warm and setup.adaptor == "legacy":
        why += (
            "; Inductor runs through vLLM's legacy InductorAdaptor, which turns torch's "
            "AOTAutograd cache off, so every piece is traced again"
        )
    basis = f"{setup.compile_cache} compile cache"
    if setup.compile_cache_note:
        basis += f" ({setup.compile_cache_note})"
    if setup.compile_note:
        basis += f"; {setup.compile_note}"
    if setup.adaptor == "legacy":  # the default adaptor (standalone_compile) goes unsaid
        basis += "; Inductor through vLLM's legacy InductorAdaptor (AOTAutograd cache off)"
    if setup.compile_cache is CompileCache.UNKNOWN:
        low = c.COMPILE_WARM.low
        return [
            PhaseEstimate(
                Phase.TORCH_COMPILE, band.seconds, low, band.high, f"{basis}; {band.source}", why
            )
        ]
    return [_band(Phase.TORCH_COMPILE, band, f"{basis}; {band.source}", why)]


def _more_compiles(band: Band, compiles: int, warm: bool) -> Band:
    """Each Inductor compile beyond the first (a compile range or size): cold, Inductor
    compiles every piece again (``PiecewiseBackend``); warm, vLLM loads that compile's
    graphs from its cache (``CompilerManager.load``, one per range or size)."""
    extra = max(0, compiles - 1)
    if not extra:
        return band
    per = c.LOAD_PER_COMPILE if warm else c.INDUCTOR_PER_COMPILE
    more = per.scaled(extra)
    source = f"{band.source}; + {extra} x {per.seconds:.1f} s ({per.source})"
    return Band(band.seconds + more.seconds, band.low + more.low, band.high + more.high, source)


def _per_layer_compile(layers: int, band: Band, warm: bool) -> Band:
    """A warm compile: Dynamo's trace and the cached pieces' load, per decoder layer. A cold
    one does all of that too and Inductor's compile of each distinct piece on top, which
    identical layers share (vLLM's piecewise backend, the FX graph cache): the cold constant,
    never less than the warm compile of the same model."""
    per = c.COMPILE_WARM_PER_LAYER
    traced = per.scaled(layers)
    source = f"{layers} layers x {per.seconds:.2f} s; {per.source}"
    if warm:
        return Band(traced.seconds, traced.low, traced.high, source)
    if traced.seconds <= band.seconds:
        return band
    lows, highs = max(band.low, traced.low), max(band.high, traced.high)
    return Band(traced.seconds, lows, highs, f"at least the warm compile's {source}")


def _capture(setup: StartupSetup) -> list[PhaseEstimate]:
    if setup.device == "cpu" or not setup.graphs:
        return []
    why = f"{setup.graphs} graph sizes to capture; fewer with a smaller --max-num-seqs"
    if setup.layers:
        per = c.GRAPH_PER_LAYER
        band = per.scaled(setup.graphs * setup.layers)
        basis = f"{setup.graphs} graph sizes x {setup.layers} layers x {1000 * per.seconds:.1f} ms"
        return [_band(Phase.CUDA_GRAPH_CAPTURE, band, _noted(basis, setup, per), why)]
    per = c.GRAPH_MANY_GPUS if setup.world_size > 1 else c.GRAPH_ONE_GPU
    band = per.scaled(setup.graphs)
    basis = f"{setup.graphs} graph sizes x {per.seconds:.2f} s each"
    return [_band(Phase.CUDA_GRAPH_CAPTURE, band, _noted(basis, setup, per), why)]


def _noted(basis: str, setup: StartupSetup, per: Band) -> str:
    note = f" ({setup.capture_note})" if setup.capture_note else ""
    return f"{basis}{note}; {per.source}"


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB"
