"""Benchmark arithmetic from recorded timings: no HTTP, no clock.

The metric definitions are those of ``vllm bench serve`` (``vllm.benchmarks.serve``), so the
numbers can be compared with it:

- TTFT: time from sending a request to its first content chunk.
- ITL: time between consecutive content chunks, pooled over all requests.
- TPOT: per request, ``(E2EL - TTFT) / (output_tokens - 1)`` for requests of >1 token.
- E2EL: time from sending a request to its last byte.
- Throughputs: totals over the level's wall-clock duration.

Percentiles interpolate linearly between closest ranks, like ``numpy.percentile``.

>>> percentile([10.0, 20.0, 30.0, 40.0], 50)
25.0
>>> percentile([1.0, 2.0, 3.0, 4.0, 5.0], 90)
4.6
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

MS_PER_SECOND = 1000.0


@dataclass(frozen=True, slots=True)
class RequestTiming:
    """What one request did, in seconds relative to when it was sent."""

    start_seconds: float  # when it was sent, on the runner's monotonic clock
    latency_seconds: float  # E2EL: sent to last byte
    ttft_seconds: float | None  # None when no content arrived
    itl_seconds: tuple[float, ...]  # gaps between consecutive content chunks
    input_tokens: int
    output_tokens: int
    error: str | None = None  # None when the request succeeded

    @property
    def is_success(self) -> bool:
        """A request succeeded when it finished without error and produced content."""
        return self.error is None and self.ttft_seconds is not None

    @property
    def end_seconds(self) -> float:
        """When the request finished, on the runner's clock."""
        return self.start_seconds + self.latency_seconds


@dataclass(frozen=True, slots=True)
class Distribution:
    """Summary of one latency metric in milliseconds; all None when there were no samples."""

    mean_ms: float | None
    median_ms: float | None
    std_ms: float | None
    p90_ms: float | None
    p99_ms: float | None


@dataclass(frozen=True, slots=True)
class ErrorCount:
    """One distinct error message and how many requests ended with it."""

    message: str
    count: int


@dataclass(frozen=True, slots=True)
class LevelStats:
    """One concurrency level, with ``vllm bench serve``'s JSON key names."""

    concurrency: int
    completed: int
    failed: int
    errors: tuple[ErrorCount, ...]
    duration: float  # seconds, first send to last finish ("Benchmark duration (s)")
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float  # req/s
    output_throughput: float  # tok/s
    total_token_throughput: float  # tok/s
    mean_ttft_ms: float | None
    median_ttft_ms: float | None
    std_ttft_ms: float | None
    p90_ttft_ms: float | None
    p99_ttft_ms: float | None
    mean_tpot_ms: float | None
    median_tpot_ms: float | None
    std_tpot_ms: float | None
    p90_tpot_ms: float | None
    p99_tpot_ms: float | None
    mean_itl_ms: float | None
    median_itl_ms: float | None
    std_itl_ms: float | None
    p90_itl_ms: float | None
    p99_itl_ms: float | None
    mean_e2el_ms: float | None
    median_e2el_ms: float | None
    std_e2el_ms: float | None
    p90_e2el_ms: float | None
    p99_e2el_ms: float | None

    @property
    def decode_tokens_per_second(self) -> float | None:
        """Tokens per second one stream decodes at this level: 1000 / mean TPOT."""
        if self.mean_tpot_ms is None or self.mean_tpot_ms <= 0:
            return None
        return MS_PER_SECOND / self.mean_tpot_ms


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation; ``values`` must be non-empty."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside 0..100")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def distribution_ms(values_seconds: Sequence[float]) -> Distribution:
    """Mean, median, population std, p90 and p99 of seconds, in milliseconds."""
    if not values_seconds:
        return Distribution(None, None, None, None, None)
    ms = [v * MS_PER_SECOND for v in values_seconds]
    mean = sum(ms) / len(ms)
    std = math.sqrt(sum((v - mean) ** 2 for v in ms) / len(ms))
    return Distribution(mean, percentile(ms, 50), std, percentile(ms, 90), percentile(ms, 99))


def tpot_seconds(timing: RequestTiming) -> float | None:
    """Time per output token after the first, or None for requests of fewer than 2 tokens."""
    if not timing.is_success or timing.output_tokens < 2 or timing.ttft_seconds is None:
        return None
    return (timing.latency_seconds - timing.ttft_seconds) / (timing.output_tokens - 1)


def count_errors(timings: Sequence[RequestTiming]) -> tuple[ErrorCount, ...]:
    """Distinct error messages of the failed requests, most frequent first."""
    counts = Counter(t.error or "no content in the response" for t in timings if not t.is_success)
    return tuple(ErrorCount(message, n) for message, n in counts.most_common())


def level_duration_seconds(timings: Sequence[RequestTiming]) -> float:
    """Wall-clock span of a level: earliest send to latest finish (0 when empty)."""
    if not timings:
        return 0.0
    return max(t.end_seconds for t in timings) - min(t.start_seconds for t in timings)


def summarize_level(concurrency: int, timings: Sequence[RequestTiming]) -> LevelStats:
    """All of one level's metrics, computed from its requests' timings."""
    ok = [t for t in timings if t.is_success]
    duration = level_duration_seconds(timings)
    input_total = sum(t.input_tokens for t in ok)
    output_total = sum(t.output_tokens for t in ok)
    ttft = distribution_ms([t.ttft_seconds for t in ok if t.ttft_seconds is not None])
    tpot = distribution_ms([v for v in (tpot_seconds(t) for t in ok) if v is not None])
    itl = distribution_ms([gap for t in ok for gap in t.itl_seconds])
    e2el = distribution_ms([t.latency_seconds for t in ok])
    return LevelStats(
        concurrency=concurrency,
        completed=len(ok),
        failed=len(timings) - len(ok),
        errors=count_errors(timings),
        duration=duration,
        total_input_tokens=input_total,
        total_output_tokens=output_total,
        request_throughput=_rate(len(ok), duration),
        output_throughput=_rate(output_total, duration),
        total_token_throughput=_rate(input_total + output_total, duration),
        **_flatten("ttft", ttft),
        **_flatten("tpot", tpot),
        **_flatten("itl", itl),
        **_flatten("e2el", e2el),
    )


def _rate(amount: float, duration_seconds: float) -> float:
    return amount / duration_seconds if duration_seconds > 0 else 0.0


def _flatten(metric: str, d: Distribution) -> dict[str, float | None]:
    return {
        f"mean_{metric}_ms": d.mean_ms,
        f"median_{metric}_ms": d.median_ms,
        f"std_{metric}_ms": d.std_ms,
        f"p90_{metric}_ms": d.p90_ms,
        f"p99_{metric}_ms": d.p99_ms,
    }
