"""`bringup bench` end to end against a real streaming server on 127.0.0.1 with known rates."""

from __future__ import annotations

import io
import json
import socket
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from bench_cmd.conftest import Behaviour
from bench_cmd.virtual_time import VirtualClock, transport
from bringup.bench_runner import BenchConfig, run_bench
from bringup.cli.main import Context, main
from bringup.render.json_out import to_jsonable
from plan.helpers import DECODE_KEYS

from builders.gguf import write_tiny_llama_gguf
from builders.safetensors import write_checkpoint

FakeServer = Any  # the `sse_server` fixture (tests/bench_cmd/conftest.py)

# The fake server: TTFT 50 ms, then one token every 20 ms (50 tok/s). Tolerances are wide
# enough for a loaded 2-core machine; they check the arithmetic, not bringup's speed.
TTFT_MS, ITL_MS, RATE = 50.0, 20.0, 50.0
REL = 0.3


def bench(argv: list[str], environ: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["bench", *argv], Context(stdout=out, stderr=err, environ=environ or {"NO_COLOR": "1"})
    )
    return code, out.getvalue(), err.getvalue()


def bench_json(server: FakeServer, *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, err = bench(
        [
            server.url,
            "--json",
            "--input-tokens",
            "32",
            "--output-tokens",
            "12",
            "--duration",
            "30s",
            *extra,
        ]
    )
    assert out, err
    return code, json.loads(out)


def test_known_rate_gives_known_metrics() -> None:
    """TTFT, TPOT, ITL, E2EL and throughputs match the server's known TTFT and token rate.

    The server runs in virtual time (tests/bench_cmd/virtual_time.py): its tokens come when
    the bench's clock says, so the figures are the server's on any machine, however loaded."""
    clock = VirtualClock()
    config = BenchConfig(
        url="http://virtual.test",
        input_tokens=32,
        output_tokens=12,
        concurrency=(1, 3),
        requests=3,
        duration_seconds=30.0,
    )
    done = run_bench(config, clock=clock, transport=transport(Behaviour(), clock))
    code, report = (0 if done.is_clean else 1), to_jsonable(done)
    assert code == 0
    one, three = report["levels"]
    assert (one["completed"], three["completed"], one["failed"]) == (3, 3, 0)
    for level in (one, three):
        assert level["mean_tpot_ms"] == pytest.approx(ITL_MS, rel=REL)
        assert level["median_itl_ms"] == pytest.approx(ITL_MS, rel=REL)
        assert TTFT_MS * 0.9 <= level["median_ttft_ms"] <= TTFT_MS * 3
        assert level["total_output_tokens"] == 36
        assert level["total_input_tokens"] == 3 * 32
    e2el_ms = TTFT_MS + 11 * ITL_MS
    assert one["mean_e2el_ms"] == pytest.approx(e2el_ms, rel=REL)
    # three streams in parallel deliver about three times one stream's tokens per second
    assert three["output_throughput"] == pytest.approx(3 * 12 / (e2el_ms / 1000), rel=REL)
    assert one["request_throughput"] == pytest.approx(1000 / e2el_ms, rel=REL)
    assert report["single_stream_decode_tokens_per_second"] == pytest.approx(RATE, rel=REL)
    assert report["prompt"] == {"method": "tokenize", "detail": "vllm /tokenize", "tokens": 32}
    assert report["stop_reason"] == "completed"


def test_json_has_vllm_key_names_and_the_decode_section(sse_server: FakeServer) -> None:
    """The JSON report uses vLLM's snake_case keys and always carries a decode section."""
    _, report = bench_json(sse_server, "--concurrency", "1", "--requests", "1")
    level = report["levels"][0]
    for key in (
        "completed",
        "errors",
        "duration",
        "request_throughput",
        "output_throughput",
        "total_token_throughput",
        "mean_ttft_ms",
        "median_ttft_ms",
        "p99_ttft_ms",
        "mean_tpot_ms",
        "mean_itl_ms",
        "mean_e2el_ms",
        "p90_e2el_ms",
    ):
        assert key in level
    assert report["decode"]["plan"] is None
    assert report["decode"]["measured_over_ceiling"] is None
    assert (
        report["decode"]["measured_tokens_per_s"]
        == report["single_stream_decode_tokens_per_second"]
    )
    assert "no prediction: give --checkpoint" in report["decode"]["note"]


def test_every_prompt_is_unique(sse_server: FakeServer) -> None:
    """Each request starts differently, so a prefix cache cannot skip the prefill."""
    bench_json(sse_server, "--concurrency", "1,2", "--requests", "2")
    streamed = sse_server.behaviour.prompts[1:]  # after the probe
    assert len(streamed) == 4
    assert len(set(streamed)) == 4


def test_usage_calibrates_prompts_without_a_tokenize_endpoint(sse_server: FakeServer) -> None:
    """With no /tokenize, prompt length is calibrated from usage.prompt_tokens, and says so."""
    sse_server.behaviour.tokenize = False
    code, report = bench_json(sse_server, "--concurrency", "1", "--requests", "2")
    assert code == 0
    assert report["prompt"]["method"] == "usage"
    assert report["prompt"]["tokens"] == 32
    assert report["levels"][0]["total_input_tokens"] == 64


def test_approximation_and_chunk_counting_without_usage(sse_server: FakeServer) -> None:
    """No tokenizer and no usage: prompts use 4 characters per token, tokens are counted by chunk."""
    sse_server.behaviour.tokenize = False
    sse_server.behaviour.usage = False
    code, report = bench_json(sse_server, "--concurrency", "1", "--requests", "2")
    assert code == 0
    assert report["prompt"]["method"] == "approximate"
    assert report["levels"][0]["total_output_tokens"] == 24


def test_strict_server_gets_requests_without_optional_fields(sse_server: FakeServer) -> None:
    """A server that rejects ignore_eos is benchmarked with a plain request body instead."""
    sse_server.behaviour.reject_extras = True
    code, report = bench_json(sse_server, "--concurrency", "1", "--requests", "2")
    assert code == 0
    assert report["levels"][0]["completed"] == 2


def test_chat_endpoint(sse_server: FakeServer) -> None:
    """--endpoint chat streams /v1/chat/completions deltas with the same arithmetic."""
    code, report = bench_json(
        sse_server, "--concurrency", "1", "--requests", "2", "--endpoint", "chat"
    )
    assert code == 0
    assert report["endpoint"] == "chat"
    assert report["levels"][0]["mean_tpot_ms"] == pytest.approx(ITL_MS, rel=REL)


def test_api_key_from_the_environment_is_sent(sse_server: FakeServer) -> None:
    """Without --api-key, OPENAI_API_KEY from the environment is sent as a bearer token."""
    code, _, _ = bench(
        [
            sse_server.url,
            "--json",
            "--concurrency",
            "1",
            "--requests",
            "1",
            "--input-tokens",
            "8",
            "--output-tokens",
            "2",
        ],
        {"NO_COLOR": "1", "OPENAI_API_KEY": "sk-test"},
    )
    assert code == 0
    assert set(sse_server.behaviour.authorization) == {"Bearer sk-test"}


def test_server_errors_end_the_run_with_the_errors(sse_server: FakeServer) -> None:
    """A server that starts answering 500 stops the run early, and the report says why."""
    sse_server.behaviour.fail_after = 3  # the probe and two measured requests succeed
    code, report = bench_json(sse_server, "--concurrency", "1,2", "--requests", "20")
    assert code == 1
    level = report["levels"][0]
    assert level["completed"] == 2
    assert level["failed"] == 3
    assert level["errors"][0]["message"].startswith("HTTP 500")
    assert report["stop_reason"] == "errors"
    assert report["skipped_concurrency"] == [2]


def test_dropped_connections_are_errors(sse_server: FakeServer) -> None:
    """A stream cut before [DONE] counts as a failed request, not a short success."""
    sse_server.behaviour.fail_after = 2
    sse_server.behaviour.failure = "drop"
    code, report = bench_json(sse_server, "--concurrency", "1", "--requests", "4")
    assert code == 1
    assert report["levels"][0]["completed"] == 1
    assert "before [DONE]" in report["levels"][0]["errors"][0]["message"]


def test_a_server_that_stops_answering_is_bounded_by_duration(sse_server: FakeServer) -> None:
    """Requests to a server that goes silent are cut at --duration and reported."""
    sse_server.behaviour.fail_after = 2
    sse_server.behaviour.failure = "hang"
    code, out, _ = bench(
        [
            sse_server.url,
            "--json",
            "--concurrency",
            "1,2",
            "--requests",
            "3",
            "--input-tokens",
            "8",
            "--output-tokens",
            "4",
            "--duration",
            "2s",
        ]
    )
    report = json.loads(out)
    assert code == 1
    errors = [e["message"] for lv in report["levels"] for e in lv["errors"]]
    assert errors
    assert all("timeout" in m or "time bound" in m for m in errors)


def test_a_server_that_never_answers_fails_fast_with_one_line(sse_server: FakeServer) -> None:
    """If /v1/models never answers, bench gives up at --duration with exit 3 and one line."""
    sse_server.behaviour.models_hang = True
    code, out, err = bench([sse_server.url, "--duration", "1s"])
    assert code == 3
    assert out == ""
    assert err.count("\n") == 1
    assert "read timeout" in err


def test_a_server_that_always_fails_is_exit_3(sse_server: FakeServer) -> None:
    """When even the first streamed request fails, bench stops before measuring and says why."""
    sse_server.behaviour.fail_after = 0
    code, _, err = bench([sse_server.url, "--duration", "10s"])
    assert code == 3
    assert "HTTP 500" in err


def test_nothing_listening_is_exit_3() -> None:
    """A closed port is reported as unreachable, not a traceback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, _, err = bench([f"http://127.0.0.1:{port}", "--duration", "5s"])
    assert code == 3
    assert "connection refused" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--concurrency", "1,x"], "--concurrency"),
        (["--concurrency", "0"], "--concurrency"),
        (["--duration", "soon"], "duration"),
        (["--plot", "out.png"], "SVG"),
        (["--gpu", "Z9000", "--checkpoint", "."], "unknown GPU"),
        (["--gpu", "H100", "--checkpoint", "Llama-3.1-8B", "-q", "int3"], "unknown quantization"),
        (["--gpu", "H100", "--checkpoint", "Llama-3.1-8B", "--gpus", "8", "-tp", "4"], "-pp"),
        (["--gpu", "H100", "--checkpoint", "Llama-3.1-8B", "-pp", "0"], "-pp"),
    ],
)
def test_bad_flags_are_one_line_exit_2(argv: list[str], needle: str) -> None:
    """Bad flags are one clear line on stderr and exit 2, before anything is sent."""
    code, _out, err = bench(["http://127.0.0.1:9", *argv])
    assert code == 2
    assert needle in err
    assert err.count("\n") == 1


def test_human_output_and_plot_with_the_plans_decode_speed(
    sse_server: FakeServer, tmp_path: Path
) -> None:
    """The table has vLLM's labels, the plan's lines show measured/ceiling and /expected, the SVG parses."""
    model = write_checkpoint(tmp_path / "model", n_shards=1)
    plot = tmp_path / "bench.svg"
    code, out, _ = bench(
        [
            sse_server.url,
            "--concurrency",
            "1,2",
            "--requests",
            "2",
            "--input-tokens",
            "16",
            "--output-tokens",
            "6",
            "--gpu",
            "L4",
            "--checkpoint",
            str(model),
            "--plot",
            str(plot),
        ]
    )
    assert code == 0, out
    for label in (
        "Successful requests:",
        "Benchmark duration (s):",
        "Request throughput (req/s):",
        "Output token throughput (tok/s):",
        "Total Token throughput (tok/s):",
        "Median TTFT (ms):",
        "P99 TPOT (ms):",
        "Mean ITL (ms):",
        "P90 E2EL (ms):",
    ):
        assert label in out
    assert "Plan: decode ceiling:" in out
    assert "Plan: decode expected:" in out
    assert "Measured / ceiling:" in out
    assert "measured / expected:" in out
    root = ET.parse(plot).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "planned batch-1 decode ceiling" in texts
    assert len(list(root.iter("{http://www.w3.org/2000/svg}polyline"))) == 5


def test_decode_in_json_is_the_plans_with_the_ratios(
    sse_server: FakeServer, tmp_path: Path
) -> None:
    """With --gpu and a checkpoint, the JSON has plan's decode object and measured over each."""
    model = write_checkpoint(tmp_path / "model", n_shards=1)
    _, report = bench_json(
        sse_server,
        "--concurrency",
        "1",
        "--requests",
        "2",
        "--gpu",
        "H100",
        "--checkpoint",
        str(model),
        "-tp",
        "2",
    )
    section = report["decode"]
    plan = section["plan"]
    assert set(plan) == DECODE_KEYS
    assert plan["collectives_per_token"] > 0  # tp 2: all-reduces over NVLink
    assert plan["collective_latency_seconds"] == pytest.approx(8e-6)
    measured = report["single_stream_decode_tokens_per_second"]
    assert section["measured_over_ceiling"] == pytest.approx(
        measured / plan["ceiling_tokens_per_s"]
    )
    assert section["measured_over_expected"] == pytest.approx(
        measured / plan["expected_tokens_per_s"]
    )


def test_duration_cuts_a_level_short_and_says_so(sse_server: FakeServer) -> None:
    """When --duration ends a level early, the report says 'duration' and no request failed."""
    code, report = bench_json(
        sse_server, "--concurrency", "1", "--requests", "100", "--duration", "1.5s"
    )
    level = report["levels"][0]
    assert 1 <= level["completed"] < 100
    assert report["stop_reason"] == "duration"
    assert code == 0


@pytest.mark.parametrize("how", ["bundled", "any-json", "hf-cache", "folder"])
def test_checkpoint_takes_what_plan_takes(sse_server: FakeServer, tmp_path: Path, how: str) -> None:
    """--checkpoint: a bundled name, any config JSON file, an HF cache org/name, a folder."""
    from builders.safetensors import write_hf_cache

    environ = {"NO_COLOR": "1", "HF_HUB_CACHE": str(tmp_path / "hub")}
    if how == "bundled":
        checkpoint = "Llama-3.1-8B"
    elif how == "any-json":
        checkpoint = str(tmp_path / "llama8b.json")
        plan_json = Path(__file__).parents[2] / "src/bringup/data/models/Llama-3.1-8B.json"
        Path(checkpoint).write_text(plan_json.read_text())
    else:
        folder = write_checkpoint(tmp_path / "model", n_shards=1)
        checkpoint = str(folder)
        if how == "hf-cache":
            write_hf_cache(tmp_path / "hub", "acme/tiny-llama", folder)
            checkpoint = "acme/tiny-llama"
    code, out, err = bench(
        [
            sse_server.url,
            "--json",
            "--concurrency",
            "1",
            "--requests",
            "1",
            "--input-tokens",
            "8",
            "--output-tokens",
            "4",
            "--gpu",
            "H100",
            "--checkpoint",
            checkpoint,
        ],
        environ,
    )
    assert code == 0, err
    plan = json.loads(out)["decode"]["plan"]
    assert plan is not None
    assert plan["ceiling_tokens_per_s"] > 0


@pytest.mark.parametrize(
    ("layout", "plan_layout"),
    [
        (["-tp", "4", "--enable-expert-parallel"], ["-tp", "4", "--enable-expert-parallel"]),
        (["-tp", "2", "-pp", "2"], ["-tp", "2", "-pp", "2"]),
        # DCP on this GQA model (4 KV heads) needs -tp above 4 and -dcp at most -tp / 4
        (["--gpus", "8", "-dcp", "2"], ["-tp", "8", "-dcp", "2"]),
    ],
)
def test_the_servers_layout_gives_the_plans_prediction(
    sse_server: FakeServer, layout: list[str], plan_layout: list[str]
) -> None:
    """bench's expected and ceiling are plan's for the same model, quantization and layout."""
    machine = ["--gpu", "RTX PRO 6000", "--interconnect", "pcie-numa"]
    _, report = bench_json(
        sse_server,
        "--concurrency",
        "1",
        "--requests",
        "1",
        "--input-tokens",
        "64",
        "--output-tokens",
        "4",
        "--checkpoint",
        "Qwen3-30B-A3B",
        "-q",
        "fp8",
        *machine,
        *layout,
    )
    out, err = io.StringIO(), io.StringIO()
    argv = ["plan", "Qwen3-30B-A3B", "-q", "fp8", "--context-tokens", "64", *machine]
    code = main(
        [*argv, *plan_layout, "--json"],
        Context(stdout=out, stderr=err, environ={"NO_COLOR": "1"}),
    )
    assert code in (0, 1), err.getvalue()
    assert report["decode"]["plan"] == json.loads(out.getvalue())["decode"]


@pytest.mark.parametrize(
    ("layout", "named"),
    [
        (["-tp", "2"], "-tp 2"),
        (["-pp", "2"], "-pp 2"),
        (["--enable-expert-parallel"], "--enable-expert-parallel"),
        (["-dcp", "2"], "-dcp 2"),
        (["-q", "fp8"], "-q fp8"),
        (["-tp", "2", "-q", "awq"], "-tp 2, -q awq"),
        (["--gpus", "2"], "--gpus 2"),
    ],
)
def test_vllm_layout_flags_are_refused_for_a_gguf(
    tmp_path: Path, layout: list[str], named: str
) -> None:
    """A GGUF --checkpoint is predicted as llama.cpp's decode on one device: vLLM's layout
    flags would be ignored, so they are one line and exit 2, before anything is sent."""
    gguf = tmp_path / "tiny.gguf"
    write_tiny_llama_gguf(gguf)
    code, out, err = bench(
        ["http://127.0.0.1:9", "--gpu", "L4", "--checkpoint", str(gguf), *layout]
    )
    assert code == 2, err
    assert named in err
    assert err.count("\n") == 1
    assert not out


def test_a_gguf_without_layout_flags_gets_the_plans_speed(
    sse_server: FakeServer, tmp_path: Path
) -> None:
    """The same GGUF with no vLLM layout flag (or the default ones spelled out) is predicted."""
    gguf = tmp_path / "tiny.gguf"
    write_tiny_llama_gguf(gguf)
    code, report = bench_json(
        sse_server, "--requests", "2", "--gpu", "L4", "--checkpoint", str(gguf), "-tp", "1"
    )
    assert code == 0
    assert report["decode"]["plan"]["bytes_per_token_per_gpu"] > 0


def test_engine_python_measures_the_cpu_with_the_engines_kernel(
    sse_server: FakeServer, tmp_path: Path
) -> None:
    """--engine-python: the CPU's bandwidth is what PyTorch's linear streams in that interpreter
    (here a stand-in printing 10 GB/s), not float32 dot products."""
    import stat
    import sys

    python = tmp_path / "python"
    python.write_text(f"#!{sys.executable}\nprint(10e9)\n", encoding="utf-8")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    common = ["--concurrency", "1", "--requests", "1", "--checkpoint", "Qwen3-0.6B"]
    _, report = bench_json(
        sse_server, *common, "--device", "cpu", "--threads", "1", "--engine-python", str(python)
    )
    _, given = bench_json(sse_server, *common, "--device", "cpu", "--memory-bandwidth", "10GB/s")
    plan = report["decode"]["plan"]
    assert plan["ceiling_tokens_per_s"] == given["decode"]["plan"]["ceiling_tokens_per_s"]
