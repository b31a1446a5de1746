"""bench --dataset (ShareGPT JSON, JSONL), progress on stderr, and the server's /metrics."""

from __future__ import annotations

import json
import re
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


def _reference(data: bytes, limit: int) -> list[str]:
    """What a whole-file parse gives (the reader must give the same, streaming)."""
    from bringup.adapters.datasets import prompt_of

    items = json.loads(data)
    return [p for p in map(prompt_of, items) if p][:limit]


TRICKY = [
    {"conversations": [{"from": "human", "value": "caf\u00e9 \U0001f600 \\u0041"}, {"v": 1}]},
    {"conversations": [{"from": "human", "value": 'quote " and \\ slash'}, {"v": 12345.5e-3}]},
    12345678901234567890,
    True,
    None,
    "a bare string entry",
    {"prompt": "plain prompt", "n": [1, [2, [3, {"x": -0.5}]]]},
    {"conversations": [{"role": "user", "content": "\u0000 control"}, {}]},
]


@pytest.mark.parametrize("block", [1, 2, 3, 7, 64, 1 << 20])
@pytest.mark.parametrize("indent", [None, 2])
def test_array_streams_to_the_same_prompts_at_any_block_size(
    tmp_path: Path, block: int, indent: int | None
) -> None:
    """Entries cut anywhere by the block boundary (inside numbers, literals, escapes, UTF-8
    sequences) decode as a whole-file parse does."""
    data = json.dumps(TRICKY, indent=indent, ensure_ascii=indent is None).encode()
    path = tmp_path / "d.json"
    path.write_bytes(b"\xef\xbb\xbf \n" + data + b"\n")
    assert load_prompts(str(path), 100, block_bytes=block) == _reference(data, 100)
    assert load_prompts(str(path), 2, block_bytes=block) == _reference(data, 2)


@pytest.mark.parametrize("block", [1, 5, 4096])
def test_every_cut_of_a_dataset_is_one_input_error(tmp_path: Path, block: int) -> None:
    """A dataset cut short anywhere (a download that stopped) is an InputError, never
    another exception or a silently shorter list."""
    data = json.dumps(SHAREGPT + TRICKY).encode()
    path = tmp_path / "cut.json"
    for n in range(1, len(data)):
        path.write_bytes(data[:n])
        with pytest.raises(InputError, match=r"not valid JSON|no prompts found"):
            load_prompts(str(path), 1000, block_bytes=block)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ('[{"prompt": "a"} {"prompt": "b"}]', "expected ',' or ']' after entry 1, found '{'"),
        ('[{"prompt": "a"}, ]', "entry 2: Expecting value, at character 18"),
        ('[{"prompt": "a"}] []', "extra data after the list"),
        ('[{"prompt": "a"},', "the file ends after entry 1 and a comma"),
        ('[{"prompt": "a"}', "the file ends inside the list, after entry 1"),
        ('[{"prompt": "a\nb"}]', "entry 1: Invalid control character"),
        ("[" * 100_000, "nested too deeply"),
    ],
)
def test_malformed_arrays_say_where(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(needle)):
        load_prompts(str(path), 10, block_bytes=4)


def test_a_malformed_entry_is_found_without_reading_on(tmp_path: Path) -> None:
    """A broken entry early in a large file fails at once (the reader does not take it for an
    entry cut by the block end and read to the size limit)."""
    path = tmp_path / "bad.json"
    path.write_bytes(b'[{"prompt": 1 2}, ' + b'{"prompt": "x"}, ' * 200_000 + b"{}]")
    with pytest.raises(InputError, match="entry 1: Expecting ',' delimiter, at character 14"):
        load_prompts(str(path), 10**9, block_bytes=1024, max_entry_bytes=4096)


def test_entries_and_lines_past_the_bound_are_refused(tmp_path: Path) -> None:
    """The buffer holds one entry (or line) and a block: a larger one is one line, not memory."""
    big = json.dumps([{"prompt": "x" * 50_000}]).encode()
    (tmp_path / "big.json").write_bytes(big)
    (tmp_path / "big.jsonl").write_bytes(b'{"prompt": "ok"}\n' + big[1:-1] + b"\n")
    with pytest.raises(InputError, match="entry 1 is larger than"):
        load_prompts(str(tmp_path / "big.json"), 5, block_bytes=1024, max_entry_bytes=10_000)
    with pytest.raises(InputError, match="line 2 is longer than"):
        load_prompts(str(tmp_path / "big.jsonl"), 5, block_bytes=1024, max_entry_bytes=10_000)
    assert load_prompts(str(tmp_path / "big.json"), 5) == ["x" * 50_000]


def test_reading_a_large_dataset_holds_one_block_not_the_file(tmp_path: Path) -> None:
    """A 24 MB ShareGPT array whose only prompt is at the very end (every other conversation
    has one turn, so the whole file is read): Python's allocations stay a few blocks."""
    import tracemalloc

    one_turn = json.dumps({"conversations": [{"from": "human", "value": "y" * 1000}]})
    last = json.dumps(SHAREGPT[0])
    path = tmp_path / "large.json"
    with path.open("w", encoding="utf-8") as f:
        f.write("[" + ",\n".join([one_turn] * 24_000) + ",\n" + last + "]")
    assert path.stat().st_size > 24_000_000
    tracemalloc.start()
    try:
        prompts = load_prompts(str(path), 10, block_bytes=256 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert prompts == ["tell me about rivers"]
    assert peak < 4 * 1024 * 1024, f"peak {peak:,} bytes"


def test_jsonl_lines_cut_by_blocks(tmp_path: Path) -> None:
    """JSONL with CRLF endings, blank lines, no final newline and a BOM, at tiny blocks."""
    rows = [{"prompt": "é one"}, SHAREGPT[0], {"text": "skipped"}, {"prompt": "three"}]
    data = b"\xef\xbb\xbf" + b"\r\n\r\n".join(json.dumps(r).encode() for r in rows)
    path = tmp_path / "d.jsonl"
    path.write_bytes(data)
    for block in (1, 3, 1 << 20):
        assert load_prompts(str(path), 10, block_bytes=block) == [
            "é one",
            "tell me about rivers",
            "three",
        ]


def test_a_dataset_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes('{"prompt": "caf\u00e9"}\n'.encode("latin-1"))
    with pytest.raises(InputError, match="not UTF-8 text"):
        load_prompts(str(path), 5)


def test_bench_on_a_malformed_dataset_is_one_line_exit_2(
    sse_server: FakeServer, tmp_path: Path
) -> None:
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(SHAREGPT)[:-30], encoding="utf-8")
    code, _, err = bench([sse_server.url, "--dataset", str(path)])
    assert code == 2
    assert "not valid JSON" in err
    assert err.count("\n") == 1
    assert sse_server.behaviour.completions == 0
