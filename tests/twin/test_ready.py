"""A ready twin: vLLM's startup lines in order, early bind, HTTP endpoints, memory, SIGTERM cleanup."""

from __future__ import annotations

import errno
import json
import signal
import socket
import struct
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from bringup.twin.memory import GPU_TOTAL_BYTES, MemoryPlan
from twin.helpers import Twin, connect_error, free_port

_PLAN = MemoryPlan(GPU_TOTAL_BYTES, 4, 0.92, 1024, 8192, 196608)
STARTUP_LINES = [
    "version 0.33.0",
    "non-default args: {",
    "Chunked prefill is enabled with max_num_batched_tokens=8192.",
    "Initializing a V1 LLM engine (v0.33.0) with config: model='MiniMaxAI/MiniMax-M2.5'",
    "vLLM is using nccl==",
    "Starting to load model MiniMaxAI/MiniMax-M2.5...",
    f"Model loading took {round(_PLAN.weights_bytes / 2**30, 2)} GiB memory and ",
    f"Available KV cache memory: {round(_PLAN.kv_bytes / 2**30, 2)} GiB",
    (
        f"GPU KV cache size: {_PLAN.kv_tokens:,} tokens, Maximum concurrency for 196,608 tokens per request: "
        f"{_PLAN.max_concurrency:.2f}x"
    ),
    "Graph capturing finished in ",
    "init engine (profile, create kv cache, warmup model) took ",
    "Supported tasks: ['generate']",
    "Starting vLLM server on http://127.0.0.1:",
    "Route: /health, Methods: GET",
]


def request(
    twin: Twin, path: str, body: dict | None = None, key: str | None = None
) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{twin.port}{path}",
        data=data,
        headers={"content-type": "application/json"},
    )
    if key:
        req.add_header("authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.fixture(scope="module")
def ready_twin(tmp_path_factory: pytest.TempPathFactory):
    """One TP4 twin, started once for the endpoint tests."""
    twin = Twin(
        ["--tp", "4", "--token-rate", "200", "--api-key", "sekret"],
        tmp_path_factory.mktemp("ready") / "gpus.json",
        free_port(),
    )
    twin.wait_for("non-default args:")
    twin.refused_while_starting = connect_error(twin.port)  # type: ignore[attr-defined]
    twin.wait_for("Application startup complete.")
    yield twin
    twin.stop()


def test_startup_lines_in_vllm_order(ready_twin: Twin) -> None:
    """The 0.33 lines appear once each, in vLLM's order, with the process prefixes where 0.33 puts them."""
    out = ready_twin.stdout
    positions = [out.index(line) for line in STARTUP_LINES]
    assert positions == sorted(positions)
    assert "(APIServer pid=" in out
    assert "(EngineCore pid=" in out
    assert "(Worker_TP3 pid=" in out
    err = ready_twin.stderr
    assert "Loading safetensors checkpoint shards: 100% Completed | 126/126" in err
    assert "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%" in err
    assert err.index("INFO:     Waiting for application startup.") < err.index(
        "INFO:     Application startup complete."
    )
    assert not any(line.startswith("(") for line in err.splitlines())  # no prefix on stderr


def test_port_refused_until_ready_then_health(ready_twin: Twin) -> None:
    """A connect is refused while the engine starts (port bound, not listening); /health is 200 once ready."""
    assert ready_twin.refused_while_starting == errno.ECONNREFUSED  # type: ignore[attr-defined]
    assert request(ready_twin, "/health") == (200, b"")
    assert json.loads(request(ready_twin, "/version")[1]) == {"version": "0.33.0"}


def test_models_completion_and_api_key(ready_twin: Twin) -> None:
    """/v1 needs the API key; completions honour max_tokens and report usage."""
    assert request(ready_twin, "/v1/models")[0] == 401
    status, body = request(ready_twin, "/v1/models", key="sekret")
    assert status == 200
    assert json.loads(body)["data"][0]["id"] == "MiniMaxAI/MiniMax-M2.5"
    status, body = request(
        ready_twin,
        "/v1/completions",
        {"prompt": "The capital of France is", "max_tokens": 3},
        key="sekret",
    )
    answer = json.loads(body)
    assert status == 200
    assert answer["usage"] == {
        "prompt_tokens": 6,
        "total_tokens": 9,
        "completion_tokens": 3,
        "prompt_tokens_details": None,
    }
    assert answer["choices"][0]["text"] == " Paris. This"
    assert answer["choices"][0]["finish_reason"] == "length"


def test_chat_stream_sse_with_usage(ready_twin: Twin) -> None:
    """A streamed chat sends role, one chunk per token, a usage chunk, then [DONE]."""
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    status, raw = request(ready_twin, "/v1/chat/completions", body, key="sekret")
    events = [
        line[len("data: ") :] for line in raw.decode().split("\n\n") if line.startswith("data: ")
    ]
    assert status == 200
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["choices"][0]["delta"]["content"] for c in chunks[1:5]] == [
        " Par",
        "is. ",
        "This",
        " ans",
    ]
    assert chunks[4]["choices"][0]["finish_reason"] == "length"
    assert chunks[5]["choices"] == []
    assert chunks[5]["usage"]["completion_tokens"] == 4


def test_tokenize_and_metrics(ready_twin: Twin) -> None:
    """/tokenize counts one token per 4 characters; /metrics has vllm:* lines that count the tokens."""
    status, body = request(ready_twin, "/tokenize", {"prompt": "abcdefghij"})
    assert status == 200
    tok = json.loads(body)
    assert tok["count"] == 3
    assert len(tok["tokens"]) == 3
    assert tok["max_model_len"] == 196608
    metrics = request(ready_twin, "/metrics")[1].decode()
    assert 'vllm:num_requests_running{engine="0",model_name="MiniMaxAI/MiniMax-M2.5"}' in metrics
    assert "vllm:generation_tokens_total" in metrics
    # the access log, as uvicorn writes it; the test asks /health itself (under xdist the
    # module's other tests, which ask it too, may run on the other worker)
    assert request(ready_twin, "/health")[0] == 200
    ready_twin.wait_for('"GET /health HTTP/1.1" 200 OK')
    assert "INFO:     127.0.0.1:" in ready_twin.stdout


def test_a_client_resetting_its_connection_leaves_no_traceback(ready_twin: Twin) -> None:
    """A client that resets a kept-alive connection (RST, as a benchmark's pool may on exit) is
    not an engine error: uvicorn logs nothing, and neither does the twin."""
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", ready_twin.port), timeout=10) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1 200")
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
    status, _ = request(ready_twin, "/health")  # the server still answers, and has logged it
    assert status == 200
    ready_twin.wait_for('"GET /health HTTP/1.1" 200 OK')
    assert "Traceback" not in ready_twin.stdout + ready_twin.stderr
    assert "ConnectionResetError" not in ready_twin.stdout + ready_twin.stderr


def test_readings_show_workers_holding_memory(ready_twin: Twin) -> None:
    """Each GPU is held by one worker process named VLLM::Worker_TP (comm) with its rank on the command line."""
    gpus = ready_twin.readings()["gpus"]
    assert len(gpus) == 4
    for rank, gpu in enumerate(gpus):
        (proc,) = gpu["processes"]
        assert gpu["memory_used_bytes"] == proc["used_bytes"] > 90 * 2**30
        p = psutil.Process(proc["pid"])
        assert p.name() == "VLLM::Worker_TP"
        assert f"VLLM::Worker_TP{rank}" in p.cmdline()


def test_sigterm_shuts_down_like_uvicorn_and_frees_everything(start_twin, tmp_path: Path) -> None:
    """SIGTERM: uvicorn's shutdown lines, exit 0, memory back to 0, no process left behind."""
    twin = start_twin("--tp", "4")
    twin.wait_for("Application startup complete.")
    children = twin.descendants()
    assert {c.name() for c in children} == {"VLLM::EngineCor", "VLLM::Worker_TP"}
    twin.proc.send_signal(signal.SIGTERM)
    assert twin.finish() == 0
    for line in (
        "INFO:     Shutting down",
        "INFO:     Application shutdown complete.",
        f"INFO:     Finished server process [{twin.proc.pid}]",
    ):
        assert line in twin.stderr
    assert twin.used_bytes() == [0, 0, 0, 0]
    _, alive = psutil.wait_procs(children, timeout=10)
    assert alive == []
