"""The shape of a knowledge pack: everything engine-specific, as data.

A pack is tables of compiled patterns. The analyzer walks the tables; it has no
``if engine == ...`` anywhere. Remedy builders are small functions that fill flag values
from the named groups of the matching line and the facts read so far.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from bringup.core.diagnosis import Remedy
from bringup.core.vocab import Engine, FailureClass, Phase


@dataclass(frozen=True)
class TokenizeSpec:
    """The server's own tokenizer endpoint: its path and the request shape it takes
    (``"vllm"``: {"model", "prompt"} → {"count"}; ``"llamacpp"``: {"content"} → {"tokens"};
    ``"llama-cpp-python"``: {"input"} → {"count"})."""

    path: str
    style: str


@dataclass(frozen=True)
class HttpSpec:
    """How the follower tells this engine's HTTP side is ready."""

    default_port: int  # the launcher's default port
    health_path: str  # the endpoint that is 200 only when the model can serve
    refuses_until_ready: bool  # connection refused until ready (vLLM, TGI)
    health_503_while_loading: bool  # port open, /health 503 while loading (llama.cpp, SGLang)
    tokenize: TokenizeSpec | None = None  # None: the server has no tokenizer endpoint bringup uses
    # the server starts without a model and loads one at the first request that names it
    # (Ollama): the smoke request must name the model, and it is what loads it
    model_on_request: bool = False
    host_variable: str | None = None  # the environment variable giving host:port (OLLAMA_HOST)
    missing_model: str | None = None  # the remedy when the smoke's model is not there ({model})


@dataclass(frozen=True)
class EntryPoint:
    """One way the engine's server is started: ``PROGRAM [SUBCOMMAND]`` or ``python -m MODULE``."""

    model_flags: tuple[str, ...]  # the flags that name the model
    program: str | None = None  # the executable's base name
    subcommand: str | None = None  # the word after the program (``vllm serve``)
    module: str | None = None  # ``python -m MODULE``
    positional_model: bool = False  # the model may come first, without a flag


@dataclass(frozen=True)
class EngineFlags:
    """The engine's names for the settings bringup changes, and its defaults.

    A remedy or a retry names only flags of this vocabulary (a test checks every pack).
    """

    memory_share: str | None = None  # the share of each GPU's memory the engine takes
    max_sequences: str | None = None  # how many sequences run at once
    eager: str | None = None  # no CUDA graphs (a flag without a value)
    context_length: str | None = None  # the longest request
    graph_batch: str | None = None  # the largest batch captured as a CUDA graph
    defaults: Mapping[str, str] = field(default_factory=dict)  # flag → the engine's default
    facts: Mapping[str, str] = field(default_factory=dict)  # flag → the log fact that reads it
    retry_safe: frozenset[str] = frozenset()  # flags a retry may change on its own
    boolean: frozenset[str] = frozenset()  # flags that never take a value
    aliases: Mapping[str, str] = field(default_factory=dict)  # short alias → long flag
    others: frozenset[str] = frozenset()  # every other flag this engine's remedies may name
    known: bool = True  # False: the engine is not known (a remedy keeps whatever flag it names)

    def vocabulary(self) -> frozenset[str]:
        """Every flag of this engine bringup knows."""
        named = {
            self.memory_share,
            self.max_sequences,
            self.eager,
            self.context_length,
            self.graph_batch,
        }
        return frozenset(
            {f for f in named if f is not None}
            | set(self.defaults)
            | set(self.facts)
            | self.retry_safe
            | self.boolean
            | set(self.aliases.values())
            | self.others
        )


@dataclass(frozen=True)
class RemedyContext:
    """What a remedy builder may use: the line's named groups, the facts so far, the phase,
    and the engine's flag names."""

    groups: Mapping[str, str]
    facts: Mapping[str, float | int | str]
    phase: Phase
    flags: EngineFlags


RemedyBuilder = Callable[[RemedyContext], tuple[Remedy, ...]]


def no_remedy(_: RemedyContext) -> tuple[Remedy, ...]:
    """A builder for signatures whose cause has no flag to change."""
    return ()


@dataclass(frozen=True)
class RayBackendSpec:
    """How the engine is asked to run its workers on a Ray cluster, and what it asks Ray for
    (``bringup run --nodes -- ... --distributed-executor-backend ray``)."""

    backend_flag: str  # the flag that names the executor backend
    backend_value: str  # its value for Ray
    address_variable: str  # the environment variable the engine reads the cluster's address from
    # the Ray resource each worker asks for, by platform ("" where the engine has no Ray support)
    gpu_device_key: str
    cpu_device_key: str
    placement_wait_seconds: int  # how long the engine waits for its placement group
    placement_wait: re.Pattern[str]  # the engine's line while it waits (group "specs")
    # the environment variable that selects the executor whose driver node needs a device itself
    # ("0": the older executor, which pins the first bundle to the driver's node)
    driver_device_variable: str
    parallel_flags: tuple[tuple[str, int], ...]  # the sizes whose product is the placement group


@dataclass(frozen=True)
class MultiNodeSpec:
    """How the engine's own multi-node runtime is asked for on its command line, and what its
    log says when a node joins or cannot reach the head (``bringup run --nodes``)."""

    nnodes_flag: str  # how many nodes take part
    node_rank_flag: str  # this node's rank, 0 serves
    headless_flag: str  # ranks > 0 run without the API server
    master_addr_flag: str  # node 0's address, where the others connect
    master_port_flag: str
    default_master_port: int
    timeout_flag: str  # bounds the wait for the other nodes (seconds)
    default_timeout_seconds: int  # what bringup passes when the user gave none
    engine_timeout_seconds: int  # what the engine waits when nobody says (torch's default)
    # the parallel sizes whose product is the world size: (flag, default)
    world_flags: tuple[tuple[str, int], ...]
    # a node is about to meet the others (node 0: its store waits); group "method": where it
    # meets them (tcp://ADDR:PORT), which must be the head's
    rendezvous: re.Pattern[str]
    joined: re.Pattern[str]  # a node's first line once it is in the group (group "rank")
    cannot_reach: re.Pattern[str]  # a node retrying the head's address (group "addr")
    # the engine's distribution names, whose version every node must share (first found wins)
    packages: tuple[str, ...]
    ray: RayBackendSpec | None = None  # the engine can also run its workers on Ray


@dataclass(frozen=True)
class PhaseMarker:
    """A line that shows the engine reached ``phase``; counts only once ``requires`` was reached."""

    pattern: re.Pattern[str]
    phase: Phase
    requires: Phase | None = None


@dataclass(frozen=True)
class ProgressRule:
    """A progress line with named groups ``done`` and ``total``."""

    pattern: re.Pattern[str]
    phase: Phase
    unit: str  # "shards", "graphs", "layers"
    done_fact: str | None = None  # fact names to record, e.g. "shards_done"
    total_fact: str | None = None


Converter = Callable[[str], float | int | str]


@dataclass(frozen=True)
class FactRule:
    """A line carrying facts: each named group is a fact, converted by ``convert[fact]``.

    A group named ``fact__2`` also sets ``fact`` (regex groups must be unique).
    """

    pattern: re.Pattern[str]
    convert: Mapping[str, Converter] = field(default_factory=dict)  # default: str


@dataclass(frozen=True)
class Signature:
    """A line that states why a startup failed (or, ``is_wrapper``, points at a cause above)."""

    name: str
    pattern: re.Pattern[str]
    failure_class: FailureClass
    summary: str  # str.format template over the named groups
    remedy: RemedyBuilder = no_remedy
    phase: Phase | None = None  # fixed phase; None: from traceback frames, else the current phase
    is_wrapper: bool = False  # consequence only: a later specific line replaces it
    # a wrapper (or an echoed line) is replaced by a later line of higher priority
    priority: int = 1
    owner: Engine | None = None  # set in the generic pack: the engine whose message this is
    until: Phase | None = None  # applies only while the startup has not gone past this phase
    # the signatures (by name: this engine's or the common ones) whose failure this line
    # explains when it comes shortly after them, in the same class: the sampler-warmup line
    # after the torch OOM it wraps. Only a failure something may refine is held live for the
    # follower's grace; every other final failure is the verdict at its line.
    refines: tuple[str, ...] = ()
    # strings one of which every line the pattern matches contains, when known without reading
    # the pattern (the message tables know their literal text): the index takes them as given
    required: frozenset[str] | None = None
    # the line states a cause only when it is not logged at DEBUG/INFO/WARNING (an engine's
    # raise or error-log text: the same words in a warning are advice, not the failure)
    loud_only: bool = False
    # a catch-all whose line may carry a more specific message of the engine's own tables
    # (llama.cpp's "error loading model: <what the loader threw>"): tried after the tables
    fallback: bool = False


@dataclass(frozen=True)
class FrameRule:
    """Traceback frames naming any of ``functions`` put an error in ``phase`` (first rule wins)."""

    functions: frozenset[str]
    phase: Phase


@dataclass(frozen=True)
class Pack:
    """Everything bringup knows about one engine's startup log."""

    engine: Engine | None  # None only for the generic pack (engine not known yet)
    detect: tuple[str, ...]  # substrings; the earliest in the log names the engine
    version: tuple[re.Pattern[str], ...]  # group "version"
    phases: tuple[PhaseMarker, ...]
    progress: tuple[ProgressRule, ...]
    facts: tuple[FactRule, ...]
    signatures: tuple[Signature, ...]  # ordered: first match wins for a line
    exclusions: tuple[re.Pattern[str], ...]  # look like causes, are not
    frames: tuple[FrameRule, ...]
    http: HttpSpec
    screen: tuple[str, ...] | None = None  # substrings every interesting line has; None: all lines
    heartbeats: tuple[re.Pattern[str], ...] = ()  # "still waiting" lines that show no progress
    stall_heartbeats: int = 30  # this many heartbeats in a row with no progress: hung
    hang_classes: Mapping[Phase, FailureClass] = field(default_factory=dict)
    phase_after: Mapping[Phase, Phase] = field(default_factory=dict)  # milestone -> phase it starts
    restart: tuple[re.Pattern[str], ...] = ()  # a new attempt begins (log of several starts)
    # other servers of the same engine, keyed by a word of their command line (llama_cpp.server)
    http_variants: Mapping[str, HttpSpec] = field(default_factory=dict)
    # lines that repeat another process's error (vLLM's EngineCore: "Worker failed with error '...'"):
    # their cause is taken, but not as final, so the emitting process's own line replaces it
    echoes: tuple[re.Pattern[str], ...] = ()
    exit_summary: str = "The engine process exited before it was ready, without printing why."
    multinode: MultiNodeSpec | None = None  # None: bringup cannot spread this engine over nodes
    # steps known to hang without an error (NCCL communicator init, the P2P probe): a whole log
    # that ends at one of them, with no later progress, is a hang there
    hang_points: tuple[re.Pattern[str], ...] = ()
    entry_points: tuple[EntryPoint, ...] = ()  # how its server is started (command recognition)
    flags: EngineFlags = field(default_factory=lambda: EngineFlags())
    # the shape of a line only this engine's logger writes (its header, its process prefix):
    # a fragment without any ``detect`` substring is this engine's when one of its lines has it
    detect_lines: tuple[re.Pattern[str], ...] = ()


def rx(pattern: str) -> re.Pattern[str]:
    """Compile a pack pattern (case-sensitive, searched anywhere in the message)."""
    return re.compile(pattern)


def to_int(text: str) -> int:
    """'1,234,560' -> 1234560."""
    return int(text.replace(",", "").replace("_", ""))


def to_float(text: str) -> float:
    """'57.50' -> 57.5."""
    return float(text.replace(",", ""))


def mib_to_gib(text: str) -> float:
    """'4096.00' (MiB) -> 4.0 (GiB), rounded to 3 places."""
    return round(float(text.replace(",", "")) / 1024.0, 3)
