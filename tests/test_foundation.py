"""The foundation: vocabulary, units, CLI dispatch."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from bringup.cli.main import Context, main
from bringup.core.vocab import FailureClass, Phase
from bringup.errors import UsageError
from bringup.units import format_bytes, parse_duration, parse_size


def test_phase_vocabulary_is_exact_and_ordered() -> None:
    """The phase names and order are the published vocabulary."""
    assert [p.value for p in Phase] == [
        "start",
        "config",
        "distributed_init",
        "weights_loading",
        "weights_loaded",
        "torch_compile",
        "memory_profiling",
        "kv_cache_alloc",
        "cuda_graph_capture",
        "warmup",
        "api_server_starting",
        "ready",
    ]
    assert Phase.WARMUP.order > Phase.KV_CACHE_ALLOC.order


def test_failure_vocabulary_is_exact() -> None:
    """The failure classes are the published vocabulary."""
    assert {c.value for c in FailureClass} == {
        "cuda_oom",
        "kv_cache_insufficient",
        "gpu_memory_utilization",
        "nccl_error",
        "unsupported_hardware",
        "missing_or_corrupt_weights",
        "config_error",
        "port_in_use",
        "engine_core_died",
        "host_oom",
        "timeouts",
    }
    assert not FailureClass.CONFIG_ERROR.is_retryable
    assert FailureClass.CUDA_OOM.is_retryable


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1000MiB", 1000 * 1024**2), ("96GB", 96 * 10**9), ("80GiB", 80 * 1024**3), ("512", 512)],
)
def test_parse_size(text: str, expected: int) -> None:
    """Sizes accept binary and decimal units."""
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"), [("300s", 300.0), ("2h", 7200.0), ("1h30m", 5400.0), ("45", 45.0)]
)
def test_parse_duration(text: str, expected: float) -> None:
    """Durations accept s, m, h and combinations."""
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "10 parsecs", "5x"])
def test_bad_units_are_usage_errors(text: str) -> None:
    """Bad sizes and durations raise UsageError, not ValueError."""
    with pytest.raises(UsageError):
        parse_duration(text)


def test_format_bytes() -> None:
    """Bytes format in binary units."""
    assert format_bytes(57.5 * 1024**3) == "57.50 GiB"
    assert format_bytes(12) == "12 B"


def test_unknown_command_is_one_line_exit_2() -> None:
    """An unknown command gets one clear line and exit 2."""
    err = io.StringIO()
    code = main(["frobnicate"], Context(stdout=io.StringIO(), stderr=err, environ={}))
    assert code == 2
    assert err.getvalue().count("\n") == 1
    assert "unknown command 'frobnicate'" in err.getvalue()


def test_python_dash_m_works() -> None:
    """`python -m bringup --version` runs the same entry point."""
    out = subprocess.run(
        [sys.executable, "-m", "bringup", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("bringup ")
