"""What ``bringup bench`` reports, as values: progress while it runs, and the report at the end."""

from __future__ import annotations

from dataclasses import dataclass

from bringup.core.bench_stats import LevelStats
from bringup.core.plan.decode import DecodeSpeed
from bringup.core.server_metrics import ServerMetrics


@dataclass(frozen=True, slots=True)
class Progress:
    """Where a run stands: the level being run and what has finished so far."""

    concurrency: int
    level: int  # 1-based position of the level
    levels: int
    done: int  # requests finished in this level (succeeded or failed)
    limit: int  # requests this level may send
    failed: int
    output_tokens: int  # generated in this level so far
    elapsed_seconds: float  # since the level started


@dataclass(frozen=True, slots=True)
class PromptInfo:
    """How prompts of the requested length were made."""

    method: str  # "tokenize" (the server's tokenizer), "usage" (calibrated), "approximate"
    detail: str  # e.g. "vllm /tokenize" or "4 characters per token"
    tokens: int  # the measured (or, approximate, estimated) prompt length


@dataclass(frozen=True, slots=True)
class DecodeReport:
    """Measured single-stream decode beside the plan's ceiling and expected speed; ``note``
    says why a ratio is missing."""

    measured_tokens_per_s: float | None
    plan: DecodeSpeed | None  # the ``decode`` object of ``plan --json``
    measured_over_ceiling: float | None
    measured_over_expected: float | None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class ServerLoad:
    """The server's own load figures (``core.server_metrics``) before and after the run;
    None where it has no ``/metrics``."""

    before: ServerMetrics | None
    after: ServerMetrics | None


@dataclass(frozen=True, slots=True)
class BenchReport:
    """Everything ``bringup bench --json`` prints."""

    url: str
    model: str
    endpoint: str
    input_tokens: int
    output_tokens: int
    prompt: PromptInfo
    levels: tuple[LevelStats, ...]
    single_stream_decode_tokens_per_second: float | None
    decode: DecodeReport
    stop_reason: str  # "completed", "errors", or "duration" (a level ran out of its time share)
    failed: int  # failed requests over all levels
    skipped_concurrency: tuple[int, ...] = ()  # levels not run (errors or time)
    server_metrics: ServerLoad | None = None  # the server's /metrics before and after

    @property
    def is_clean(self) -> bool:
        """True when no request failed (levels cut short by --duration are still clean)."""
        return self.failed == 0 and self.stop_reason != "errors"
