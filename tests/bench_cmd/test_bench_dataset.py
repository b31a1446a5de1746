"""bench --dataset (ShareGPT JSON, JSONL), progress on stderr, and the server's /metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench_cmd.test_bench_command import FakeServer, bench, bench_json
from bringup.adapters.datasets import load_prompts
from bringup.core.server_metrics import parse_metrics
from bringup.errors import InputError

SHAREGPT = [
    {
        "id": "a",
        "conversations": [
            {"from": "human", "value": "tell me about rivers"},
            {"from": "gpt", "value": "..."},
        ],
    },
    {"id": "b", "conversations": [{"from": "human", "value": "only one turn"}]},
    {
        "id": "c",
        "conversations": [
            {"role": "user", "content": "and mountains"},
            {"role": "assistant", "content": "."},
        ],
    },
]


def _sharegpt(tmp_path: Path) -> Path:
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(SHAREGPT), encoding="utf-8")
    return path


def test_sharegpt_takes_the_first_turn_of_conversations_with_two_turns(tmp_path: Path) -> None:
    """As vllm bench serve does: a one-turn conversation is skipped; role/content turns count."""
    assert load_prompts(str(_sharegpt(tmp_path)), 10) == ["tell me about rivers", "and mountains"]
    assert load_prompts(str(_sharegpt(tmp_path)), 1) == ["tell me about rivers"]


def test_jsonl_prompts_are_read_only_as_far_as_needed(tmp_path: Path) -> None:
    """A JSONL of {"prompt": ...}: blank lines skipped; a bad line after the ones needed is never read."""
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "one"}\n\n{"prompt": "two"}\nnot json\n', encoding="utf-8")
    assert load_prompts(str(path), 2) == ["one", "two"]
    with pytest.raises(InputError, match="line 4 is not a JSON object"):
        load_prompts(str(path), 3)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("", "no prompts found"),
        ("[1, 2", "not valid JSON"),
        ('{"text": "x"}\n', "no prompts found"),
    ],
)
def test_unusable_datasets_are_one_line(tmp_path: Path, content: str, needle: str) -> None:
    """Empty, broken or prompt-less files are an InputError naming what was expected."""
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=needle):
        load_prompts(str(path), 5)


def test_bench_sends_the_dataset_prompts_in_turn(sse_server: FakeServer, tmp_path: Path) -> None:
    """--dataset: every request's prompt comes from the file, in turn; the report says so."""
    code, report = bench_json(
        sse_server, "--concurrency", "1", "--requests", "3", "--dataset", str(_sharegpt(tmp_path))
    )
    assert code == 0
    sent = [
        p for p in sse_server.behaviour.prompts if p in ("tell me about rivers", "and mountains")
    ]
    assert sent == ["tell me about rivers", "and mountains", "tell me about rivers"]
    assert report["prompt"]["method"] == "dataset"
    assert "2 prompts from" in report["prompt"]["detail"]
    # usage.prompt_tokens (the fake counts words + 1) replaces the estimate
    assert report["levels"][0]["total_input_tokens"] == 5 + 3 + 5


def test_a_bad_dataset_fails_before_anything_is_sent(
    sse_server: FakeServer, tmp_path: Path
) -> None:
    """A dataset without prompts: one line, exit 2, no request sent."""
    path = tmp_path / "empty.jsonl"
    path.write_text("\n", encoding="utf-8")
    code, _, err = bench([sse_server.url, "--dataset", str(path)])
    assert code == 2
    assert "no prompts found" in err
    assert err.count("\n") == 1
    assert sse_server.behaviour.completions == 0


def test_progress_lines_on_a_non_terminal(sse_server: FakeServer) -> None:
    """Without a terminal, progress is plain lines on stderr (at least one per finished level)."""
    code, _, err = bench(
        [
            sse_server.url,
            "--concurrency",
            "1,2",
            "--requests",
            "2",
            "--input-tokens",
            "8",
            "--output-tokens",
            "4",
        ]
    )
    assert code == 0
    assert "bench: concurrency 1 (level 1/2): 2/2 requests, 0 failed" in err
    assert "bench: concurrency 2 (level 2/2): 2/2 requests, 0 failed" in err


VLLM_METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 0.0
vllm:num_requests_waiting{engine="0",model_name="m"} 0.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.125
vllm:prompt_tokens_total{engine="0",model_name="m"} 1234.0
"""


def test_server_metrics_before_and_after(sse_server: FakeServer) -> None:
    """vLLM's /metrics is read before and after: KV cache usage, running, waiting."""
    sse_server.behaviour.metrics = VLLM_METRICS
    code, report = bench_json(sse_server, "--concurrency", "1", "--requests", "1")
    assert code == 0
    before = report["server_metrics"]["before"]
    assert before == {
        "kv_cache_usage_perc": 0.125,
        "num_requests_running": 0,
        "num_requests_waiting": 0,
    }
    assert report["server_metrics"]["after"] == before
    code, out, _ = bench([sse_server.url, "--concurrency", "1", "--requests", "1"])
    assert "Server /metrics: before KV cache 12.5%, running 0, waiting 0" in out


def test_no_metrics_endpoint_is_null(sse_server: FakeServer) -> None:
    """A server without /metrics (404): both sides null, no line."""
    code, report = bench_json(sse_server, "--concurrency", "1", "--requests", "1")
    assert code == 0
    assert report["server_metrics"] == {"before": None, "after": None}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('vllm:gpu_cache_usage_perc{m="x"} 0.5\nvllm:num_requests_waiting 3\n', (0.5, None, 3)),
        (
            "sglang:token_usage 0.2\nsglang:num_running_reqs 4\nsglang:num_queue_reqs 1\n",
            (0.2, 4, 1),
        ),
        ("llamacpp:kv_cache_usage_ratio 0.75\nllamacpp:requests_processing 1\n", (0.75, 1, None)),
        (
            (
                'vllm:num_requests_running{engine="0"} 2\nvllm:num_requests_running{engine="1"} 3\n'
                'vllm:kv_cache_usage_perc{engine="0"} 0.2\nvllm:kv_cache_usage_perc{engine="1"} 0.4\n'
            ),
            (pytest.approx(0.3), 5, None),
        ),
        ("garbage {{ \nvllm:num_requests_running NaN\n", (None, None, None)),
    ],
)
def test_metrics_names_of_each_engine(text: str, expected: tuple[object, ...]) -> None:
    """vLLM (both names), SGLang and llama.cpp map to the same three figures; ranks add up."""
    m = parse_metrics(text)
    assert (m.kv_cache_usage_perc, m.num_requests_running, m.num_requests_waiting) == expected


def test_progress_bar_on_a_terminal(sse_server: FakeServer) -> None:
    """On a terminal (FORCE_COLOR here) the progress is a rich bar that clears itself; the
    report is unchanged and no plain progress line is printed."""
    code, out, err = bench(
        [
            sse_server.url,
            "--concurrency",
            "1",
            "--requests",
            "2",
            "--input-tokens",
            "8",
            "--output-tokens",
            "4",
        ],
        {"FORCE_COLOR": "1"},
    )
    assert code == 0
    assert "Single-stream decode" in out
    assert "bench: concurrency 1 (level 1/1)" not in err


def test_plain_progress_repeats_only_when_something_changed() -> None:
    """The ticker prints the latest state every few seconds, and nothing when it is unchanged."""
    import io
    import time

    from bringup.bench_runner import Progress
    from bringup.render.bench_progress import BenchProgress

    stream = io.StringIO()
    state = Progress(4, 1, 2, 1, 16, 0, 128, 1.5)
    with BenchProgress(stream, {}, every_seconds=0.05) as progress:
        progress.update(state)
        time.sleep(0.3)
    lines = stream.getvalue().splitlines()
    assert lines == ["bench: concurrency 4 (level 1/2): 1/16 requests, 0 failed, 128 tokens, 1.5 s"]
