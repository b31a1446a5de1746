"""Benchmark arithmetic on fixed timings: percentiles and vLLM's metric definitions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bringup.core.bench_stats import (
    RequestTiming,
    distribution_ms,
    percentile,
    summarize_level,
    tpot_seconds,
)


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([10.0, 20.0, 30.0, 40.0], 50, 25.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0], 90, 4.6),
        ([1.0, 2.0, 3.0, 4.0, 5.0], 99, 4.96),
        ([5.0, 1.0, 3.0], 0, 1.0),
        ([5.0, 1.0, 3.0], 100, 5.0),
        ([7.0], 99, 7.0),
    ],
)
def test_percentile_interpolates_like_numpy(values: list[float], q: float, expected: float) -> None:
    """Percentiles interpolate linearly between closest ranks, as numpy.percentile does."""
    assert percentile(values, q) == pytest.approx(expected)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=30), st.floats(0, 100))
def test_percentile_matches_numpy(values: list[float], q: float) -> None:
    """For any sample, the percentile equals numpy's linear percentile."""
    import numpy as np

    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), abs=1e-6)


def test_percentile_of_nothing_is_an_error() -> None:
    """An empty sample has no percentile."""
    with pytest.raises(ValueError):
        percentile([], 50)


def test_distribution_is_in_milliseconds_and_empty_is_none() -> None:
    """Seconds in, milliseconds out; no samples gives no numbers rather than zeros."""
    d = distribution_ms([0.010, 0.020, 0.030])
    assert (d.mean_ms, d.median_ms) == (pytest.approx(20.0), pytest.approx(20.0))
    assert d.std_ms == pytest.approx((200 / 3) ** 0.5)
    assert distribution_ms([]).mean_ms is None


def _ok(start: float, ttft: float, gap: float, tokens: int) -> RequestTiming:
    latency = ttft + gap * (tokens - 1)
    return RequestTiming(start, latency, ttft, (gap,) * (tokens - 1), 100, tokens)


def test_summarize_level_on_known_timings() -> None:
    """Two requests of 11 tokens, TTFT 100 ms and 10 ms per token, give the known metrics."""
    timings = [_ok(0.0, 0.1, 0.01, 11), _ok(0.1, 0.1, 0.01, 11)]
    level = summarize_level(2, timings)
    assert (level.completed, level.failed, level.errors) == (2, 0, ())
    assert level.duration == pytest.approx(0.3)  # first send 0.0, last finish 0.1 + 0.2
    assert level.mean_ttft_ms == pytest.approx(100.0)
    assert level.mean_tpot_ms == pytest.approx(10.0)
    assert level.p99_itl_ms == pytest.approx(10.0)
    assert level.mean_e2el_ms == pytest.approx(200.0)
    assert level.output_throughput == pytest.approx(22 / 0.3)
    assert level.total_token_throughput == pytest.approx(222 / 0.3)
    assert level.request_throughput == pytest.approx(2 / 0.3)
    assert level.decode_tokens_per_second == pytest.approx(100.0)


def test_failures_are_counted_and_kept_out_of_latencies() -> None:
    """Failed requests are counted by message and do not enter the latency statistics."""
    bad = RequestTiming(0.0, 5.0, None, (), 100, 0, "HTTP 500: engine dead")
    timings = [_ok(0.0, 0.1, 0.01, 11), bad, bad]
    level = summarize_level(1, timings)
    assert (level.completed, level.failed) == (1, 2)
    assert [(e.message, e.count) for e in level.errors] == [("HTTP 500: engine dead", 2)]
    assert level.mean_e2el_ms == pytest.approx(200.0)
    assert level.duration == pytest.approx(5.0)


def test_tpot_needs_two_tokens() -> None:
    """TPOT is undefined for a one-token answer, as in vLLM."""
    assert tpot_seconds(_ok(0.0, 0.1, 0.01, 1)) is None
    assert tpot_seconds(_ok(0.0, 0.1, 0.02, 3)) == pytest.approx(0.02)


def test_level_with_no_success_has_no_latencies() -> None:
    """A level where everything failed reports zero throughput and no latency numbers."""
    level = summarize_level(4, [RequestTiming(0.0, 1.0, None, (), 10, 0, "connection refused")])
    assert level.completed == 0
    assert level.output_throughput == 0.0
    assert level.mean_ttft_ms is None
    assert level.decode_tokens_per_second is None
