"""`bringup bench` against the real llama-cpp-python server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.real_engine import free_port, server_argv

pytestmark = pytest.mark.engine


def bench(url: str) -> tuple[int, dict[str, Any]]:
    argv = [
        sys.executable,
        "-m",
        "bringup",
        "bench",
        url,
        "--input-tokens",
        "32",
        "--output-tokens",
        "16",
        "--concurrency",
        "1,2",
        "--requests",
        "8",
        "--json",
    ]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    return p.returncode, json.loads(p.stdout)


def test_bench_reports_numbers_from_the_real_server(
    models: dict[str, Path], start_server: Any
) -> None:
    """Every request at concurrency 1 and 2 completes, with positive throughput and latencies."""
    port = free_port()
    # llama-cpp-python interrupts a running stream when a new request comes (--interrupt_requests
    # defaults to true), which fails every concurrent request; a server meant for load turns it off.
    server = start_server(
        server_argv(models["tiny"], port, "--n_ctx", "2048", "--interrupt_requests", "false")
    )
    assert server.wait_for("Uvicorn running on"), server.text()[-2000:]
    code, doc = bench(f"http://127.0.0.1:{port}")
    assert code == 0, doc
    assert doc["model"] == str(models["tiny"])
    for level in doc["levels"]:
        assert (level["completed"], level["failed"]) == (8, 0), level
        assert level["output_throughput"] > 0
        assert 0 < level["median_ttft_ms"] < level["median_e2el_ms"]
    assert doc["single_stream_decode_tokens_per_second"] > 0
