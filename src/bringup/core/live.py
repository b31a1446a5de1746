"""What a followed startup reports, as values: a small union of frozen events, and how it ended.

Each event is one JSON Lines object (``to_json``): ``{"event": NAME, "t": seconds, ...}``.
Renderers match on the type; ``name`` and ``fields`` give the JSON view.

    PhaseReached  phase      a new phase (from the log); with a prediction, its predicted time
    Progress      progress   n of m shards, graphs, layers; with a prediction, the ETA
    SlowPhase     slow       a phase ran past its predicted high end, and the facts' reason
    GpuSample     gpu        GPU memory moved
    ProbeSeen     probe      an HTTP probe's answer (news only: the same refusal is said once)
    FailureFound  failure    the verdict's root cause (or a stall, a death)
    Ready         ready      the smoke request was answered
    Exited        exited     the server process ended (its status when known)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from bringup.core.diagnosis import Failure, Remedy
from bringup.core.probes import ProbeObservation, probe_fields
from bringup.core.server_exit import ServerExit
from bringup.core.verdict import State
from bringup.core.vocab import Engine, Outcome, Phase


class _Event:
    """The JSON view every event shares."""

    __slots__ = ()
    name: ClassVar[str]
    t: float  # seconds since the start

    @property
    def event(self) -> str:
        """The event's name in JSON Lines (``phase``, ``progress``, ...)."""
        return self.name

    @property
    def fields(self) -> Mapping[str, Any]:
        """The JSON object without ``event`` and ``t``."""
        return self._fields()

    def _fields(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        """The JSON Lines object."""
        return {"event": self.name, "t": round(self.t, 3), **self._fields()}


@dataclass(frozen=True, slots=True)
class PhaseReached(_Event):
    name: ClassVar[str] = "phase"
    t: float
    phase: Phase
    line_number: int
    predicted_seconds: float | None = None  # the prediction's phase this one opens, if any
    predicted_high_seconds: float | None = None

    def _fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"phase": self.phase, "line_number": self.line_number}
        if self.predicted_seconds is not None:
            out["predicted_seconds"] = round(self.predicted_seconds, 2)
            out["predicted_high_seconds"] = round(self.predicted_high_seconds or 0.0, 2)
        return out


@dataclass(frozen=True, slots=True)
class Progress(_Event):
    name: ClassVar[str] = "progress"
    t: float
    phase: Phase
    done: int
    total: int
    unit: str
    eta_seconds: float | None = None  # with a prediction: the weights phase's time left
    bytes_per_second: float | None = None  # the weights read so far, per second
    # a finished phase's last line that came after the next phase began (tqdm writes to
    # stderr, the next phase's line to stdout, read apart): reported, but not the current
    # progress, and not shown to people ("loading weights 126/126" after "weights loaded")
    late: bool = False

    def _fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "phase": self.phase,
            "done": self.done,
            "total": self.total,
            "unit": self.unit,
        }
        if self.late:
            out["late"] = True
        if self.eta_seconds is not None:
            out["eta_seconds"] = round(self.eta_seconds, 1)
        if self.bytes_per_second is not None:
            out["bytes_per_second"] = round(self.bytes_per_second)
        return out


@dataclass(frozen=True, slots=True)
class SlowPhase(_Event):
    """A phase ran past its prediction's high end (said once per phase)."""

    name: ClassVar[str] = "slow"
    t: float
    phase: Phase  # the prediction's phase (``weights_loading``, ``torch_compile``, ...)
    elapsed_seconds: float
    predicted_high_seconds: float
    reason: str

    def _fields(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "elapsed_seconds": round(self.elapsed_seconds, 1),
            "predicted_high_seconds": round(self.predicted_high_seconds, 1),
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class GpuUse:
    """One GPU's memory in a sample."""

    index: int
    used_bytes: int
    total_bytes: int


@dataclass(frozen=True, slots=True)
class GpuSample(_Event):
    name: ClassVar[str] = "gpu"
    t: float
    gpus: tuple[GpuUse, ...]

    def _fields(self) -> dict[str, Any]:
        return {
            "gpus": [
                {"index": g.index, "used_bytes": g.used_bytes, "total_bytes": g.total_bytes}
                for g in self.gpus
            ]
        }


@dataclass(frozen=True, slots=True)
class ProbeSeen(_Event):
    name: ClassVar[str] = "probe"
    t: float
    obs: ProbeObservation

    def _fields(self) -> dict[str, Any]:
        return probe_fields(self.obs)


@dataclass(frozen=True, slots=True)
class FailureFound(_Event):
    name: ClassVar[str] = "failure"
    t: float
    failure: Failure
    stalled: bool = False  # no progress for --stall, or --deadline passed: not a root cause

    def _fields(self) -> dict[str, Any]:
        return {
            **failure_fields(self.failure),
            "line_number": self.failure.line_number,
            "summary": self.failure.summary,
            "outcome": "stalled" if self.stalled else "failed",
        }


@dataclass(frozen=True, slots=True)
class Ready(_Event):
    name: ClassVar[str] = "ready"
    t: float
    time_to_ready_seconds: float
    model: str | None
    url: str

    def _fields(self) -> dict[str, Any]:
        return {
            "time_to_ready_seconds": round(self.time_to_ready_seconds, 3),
            "model": self.model,
            "url": self.url,
        }


@dataclass(frozen=True, slots=True)
class Exited(_Event):
    name: ClassVar[str] = "exited"
    t: float
    code: int | None  # the server's exit status; negative: killed by that signal; None: unknown

    def _fields(self) -> dict[str, Any]:
        return {"code": self.code}


LiveEvent = (
    PhaseReached | Progress | SlowPhase | GpuSample | ProbeSeen | FailureFound | Ready | Exited
)


@dataclass(frozen=True, slots=True)
class Joined(_Event):
    """A node of a multi-node startup joined the group (``run --nodes``)."""

    name: ClassVar[str] = "joined"
    t: float
    seconds: float
    runtime: str | None = None  # "ray": the node's Ray runtime joined the Ray cluster

    def _fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"seconds": round(self.seconds, 3)}
        if self.runtime is not None:
            out["runtime"] = self.runtime
        return out


@dataclass(frozen=True, slots=True)
class NodeEvent:
    """An event of one node of a multi-node startup: its address and rank join the JSON."""

    inner: LiveEvent | Joined
    node: str
    rank: int

    @property
    def t(self) -> float:
        return self.inner.t

    @property
    def event(self) -> str:
        return self.inner.name

    @property
    def fields(self) -> Mapping[str, Any]:
        return {"node": self.node, "rank": self.rank, **self.inner.fields}

    def to_json(self) -> dict[str, Any]:
        return {"event": self.inner.name, "t": round(self.t, 3), **self.fields}


ClusterEvent = LiveEvent | Joined | NodeEvent  # what a multi-node startup reports


def failure_fields(failure: Failure) -> dict[str, Any]:
    """The ``failure`` object of the JSON: class, phase, line, remedy."""
    return {
        "class": failure.failure_class.value,
        "phase": failure.phase.value,
        "line": failure.line,
        "remedy": [_remedy_json(r) for r in failure.remedy],
    }


def _remedy_json(remedy: Remedy) -> dict[str, Any]:
    return {"text": remedy.text, "flag": remedy.flag, "value": remedy.value, "env": remedy.env}


@dataclass
class StartupResult:
    """How a followed startup ended."""

    outcome: Outcome  # ready | failed | stalled (incomplete when interrupted before a verdict)
    exit_code: (
        int  # bringup's: 0 ready, 1 failed, 4 stalled/deadline, 128+N interrupted by signal N
    )
    failure: Failure | None  # the verdict's root cause: the one place it is kept
    argv: tuple[str, ...]  # the server command as run
    time_to_ready_seconds: float | None
    summary: dict[str, Any]  # the JSON summary line
    url: str
    model: str | None = None
    server_exit_code: int | None = None  # the raw return code (negative: killed by that signal)
    server_exit: ServerExit | None = (
        None  # the server's own status, kept apart from bringup's signals
    )
    left_running_pid: int | None = None  # --keep: the server still running
    detached_log: str | None = None  # --keep: where its output now goes
    interrupted: bool = False
    engine: Engine | None = None  # from the command, --engine or the log; None: not known
    facts: Mapping[str, float | int | str] = field(default_factory=dict)  # what the log stated


@dataclass
class NodesResult:
    """How a startup over several nodes ended (``run --nodes``)."""

    state: State
    exit_code: int
    failure: Failure | None
    failed_rank: int | None
    time_to_ready_seconds: float | None
    summary: dict[str, Any]
    interrupted: bool = False
    facts: Mapping[str, float | int | str] = field(default_factory=dict)  # the failing node's
