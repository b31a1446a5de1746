"""What a report holds, as plain values: made by ``render.report`` from a diagnosis, a followed
startup or a plan, and turned into text by ``core.report.markdown`` (no I/O here)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class GpuLine:
    """One GPU as NVML names it."""

    index: int
    name: str
    memory_total_bytes: int
    memory_used_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Gpus:
    """The machine's GPUs, the driver, and how they are linked (when more than one is used)."""

    gpus: tuple[GpuLine, ...] = ()
    driver: str | None = None
    cuda_driver: str | None = None  # the CUDA version the driver supports, e.g. "12.8"
    topology: tuple[tuple[str, ...], ...] = ()  # a matrix: header row first, as nvidia-smi topo -m
    note: str | None = None  # why none are listed (no NVML here, ...)


@dataclass(frozen=True, slots=True)
class PlanRow:
    """One line of the plan's per-GPU table."""

    part: str
    value: str
    share: str
    what: str


@dataclass(frozen=True, slots=True)
class PlanSection:
    """The plan's per-GPU lines and its verdict, or why there is no plan."""

    headline: str = ""
    rows: tuple[PlanRow, ...] = ()
    lines: tuple[str, ...] = ()  # KV cache, decode, ...: one sentence each
    verdict: str = ""
    flags: tuple[str, ...] = ()  # flags the plan recommends appending
    note: str | None = None  # "not planned: ..." when there is no plan


@dataclass(frozen=True, slots=True)
class TimelineRow:
    """A phase: where in the log it began, when (seconds from the start or the engine's
    timestamp), and how long it took."""

    phase: str
    line_number: int | None = None
    at: str | None = None
    took: str | None = None


@dataclass(frozen=True, slots=True)
class Remedy:
    """One remedy: its sentence and the flag or variable it sets ("" when none)."""

    text: str
    setting: str = ""


@dataclass(frozen=True, slots=True)
class RootCause:
    """The failure: its class and phase, the line that states it and the lines around it."""

    failure_class: str
    phase: str
    summary: str
    line: str
    line_number: int
    context: tuple[tuple[int, str], ...] = ()  # (line number, text), the cause's line among them
    remedies: tuple[Remedy, ...] = ()
    after_ready: bool = False  # the server died after a good start


@dataclass(frozen=True, slots=True)
class ReportData:
    """Everything one report says, in order."""

    title: str  # "bringup run", "bringup diagnose server.log", ...
    outcome: str  # ready | failed | stalled | hung | incomplete | fits | does not fit
    phase: str | None = None  # the furthest phase reached
    engine: str | None = None
    time_to_ready_seconds: float | None = None
    exit_code: int | None = None  # bringup's
    server_exit: str | None = None  # how the server ended, in words
    versions: tuple[tuple[str, str], ...] = ()  # (name, version) in order: bringup, engine, ...
    gpus: Gpus | None = None
    command: tuple[str, ...] = ()
    plan: PlanSection | None = None
    timeline: tuple[TimelineRow, ...] = ()
    facts: tuple[tuple[str, str], ...] = ()
    cause: RootCause | None = None
    log_tail: tuple[str, ...] = ()
    log_lines: int = 0  # how many lines the log had in all
    log_source: str = ""  # where the log came from
    notes: tuple[str, ...] = field(default_factory=tuple)
