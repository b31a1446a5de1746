"""`bringup bench` end to end against the engine twin (`bringup twin vllm --token-rate N`)."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from bringup.cli.main import Context, main

RATE = 100.0  # tokens/s per request: one token every 10 ms


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def twin_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A ready twin on a free loopback port, stopped after the module's tests."""
    folder = tmp_path_factory.mktemp("twin")
    port = _free_port()
    log = (folder / "twin.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bringup",
            "twin",
            "vllm",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--time-scale",
            "0.01",
            "--token-rate",
            str(RATE),
            "--gpus-file",
            str(folder / "gpus.json"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc, folder / "twin.log")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    for _ in range(600):
        if proc.poll() is not None:
            pytest.fail(f"the twin exited with {proc.returncode}: {log.read_text()[-500:]}")
        try:
            if httpx2.get(f"{url}/v1/models", timeout=1.0).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        time.sleep(0.1)
    pytest.fail("the twin did not answer /v1/models within 60 s")


def test_bench_figures_follow_from_the_twins_paced_answers(twin_url: str) -> None:
    """Against a twin pacing each answer at 100 tok/s, bench's figures follow from its timings
    and the twin's pace bounds them from below. No timing assertion: on a loaded machine the
    twin only gets slower (the measured rates against known ones are bench/bench_serving.py's
    measurement, not a test)."""
    out, err = io.StringIO(), io.StringIO()
    code = main(
        [
            "bench",
            twin_url,
            "--json",
            "--input-tokens",
            "64",
            "--output-tokens",
            "16",
            "--concurrency",
            "1,4",
            "--requests",
            "4",
            "--duration",
            "60s",
        ],
        Context(stdout=out, stderr=err, environ={"NO_COLOR": "1"}),
    )
    assert code == 0, err.getvalue()
    report = json.loads(out.getvalue())
    assert report["prompt"]["method"] == "tokenize"
    one, four = report["levels"]
    assert report["single_stream_decode_tokens_per_second"] == pytest.approx(
        1000 / one["mean_tpot_ms"]
    )
    paced = 1000 * (16 - 1) / RATE  # ms: the twin sends token i at start + i / RATE, not before
    for level in (one, four):
        assert level["completed"] == 4
        assert level["total_output_tokens"] == 64
        assert level["mean_e2el_ms"] >= paced
        assert level["output_throughput"] == pytest.approx(64 / level["duration"])
    assert one["duration"] * 1000 >= 4 * paced  # concurrency 1: one answer after the other
