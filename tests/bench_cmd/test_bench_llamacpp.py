"""`bringup bench` against the real llama.cpp server (llama-cpp-python) on 127.0.0.1."""

from __future__ import annotations

import importlib.util
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

from builders.gguf import write_tiny_llama_gguf

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None, reason="needs llama-cpp-python[server]"
    ),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def llamacpp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """Start llama_cpp.server on a tiny GGUF; serialise requests rather than interrupt them."""
    folder = tmp_path_factory.mktemp("llamacpp")
    model = write_tiny_llama_gguf(folder / "tiny.gguf")[0]
    port = _free_port()
    log = (folder / "server.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "1024",
            "--interrupt_requests",
            "False",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc)
        yield url, model
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(600):
        if proc.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with {proc.returncode}")
        try:
            if httpx2.get(f"{url}/v1/models", timeout=1.0).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        time.sleep(0.1)
    pytest.fail("llama_cpp.server did not answer /v1/models within 60 s")


def test_bench_measures_the_real_llamacpp_server(llamacpp: tuple[str, Path]) -> None:
    """Every request gets the full answer, prompts are sized by the server's tokenizer."""
    url, model = llamacpp
    out, err = io.StringIO(), io.StringIO()
    argv = [
        "bench",
        url,
        "--json",
        "--input-tokens",
        "64",
        "--output-tokens",
        "16",
        "--concurrency",
        "1,2",
        "--requests",
        "3",
        "--duration",
        "60s",
        "--gpu",
        "L4",
        "--checkpoint",
        str(model),
    ]
    code = main(argv, Context(stdout=out, stderr=err, environ={"NO_COLOR": "1"}))
    assert code == 0, err.getvalue() + out.getvalue()
    report = json.loads(out.getvalue())
    assert report["prompt"]["method"] == "tokenize"
    assert abs(report["prompt"]["tokens"] - 64) <= 8
    for level in report["levels"]:
        assert level["completed"] == 3
        assert level["total_output_tokens"] == 3 * 16  # min_tokens holds the length
        assert level["mean_tpot_ms"] > 0
    assert report["single_stream_decode_tokens_per_second"] > 0
    # the GGUF's own metadata and tensors feed the plan's decode speed (2 layers, width 64, F32)
    assert report["decode"]["plan"]["bytes_per_token_per_gpu"] > 0
    assert report["decode"]["measured_over_ceiling"] > 0


def test_bench_on_the_cpu_puts_the_plan_for_this_machine_beside_it(
    llamacpp: tuple[str, Path],
) -> None:
    """--device cpu: bench measures this machine's read bandwidth with --threads and gives the
    GGUF plan's ceiling and expected speed for it (the big-model check is bench/bench_decode.py)."""
    url, model = llamacpp
    out, err = io.StringIO(), io.StringIO()
    argv = ["bench", url, "--json", "--input-tokens", "16", "--output-tokens", "8"]
    argv += ["--concurrency", "1", "--requests", "2", "--device", "cpu", "--threads", "1"]
    argv += ["--checkpoint", str(model)]
    code = main(argv, Context(stdout=out, stderr=err, environ={"NO_COLOR": "1"}))
    assert code == 0, err.getvalue()
    section = json.loads(out.getvalue())["decode"]
    plan = section["plan"]
    assert 0 < plan["expected_tokens_per_s"] < plan["ceiling_tokens_per_s"]
    assert plan["collectives_per_token"] == 0
    # a 2-layer model of 422 KiB: every weight but the token embedding, read per token
    assert 100_000 < plan["bytes_per_token_per_gpu"] < 432_896
    assert section["measured_over_expected"] == pytest.approx(
        section["measured_tokens_per_s"] / plan["expected_tokens_per_s"]
    )
