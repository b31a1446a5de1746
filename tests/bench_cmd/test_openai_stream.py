"""The streaming client's reading of chunks, URLs and interrupted answers."""

from __future__ import annotations

import time
from typing import Any

import pytest

from bringup.adapters.openai_stream import (
    OpenAIStream,
    StreamRequest,
    is_token_chunk,
    normalize_base_url,
)
from bringup.errors import UsageError


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ({"choices": [{"text": " Paris", "finish_reason": None}]}, True),
        ({"choices": [{"text": "", "finish_reason": None}]}, True),  # llama.cpp partial byte
        ({"choices": [{"text": "", "finish_reason": "length"}]}, False),  # closing chunk
        ({"choices": [{"text": ".", "finish_reason": "length"}]}, True),  # vLLM's last token
        ({"choices": [{"delta": {"role": "assistant", "content": ""}}]}, False),  # role only
        ({"choices": [{"delta": {"content": " hi"}, "finish_reason": None}]}, True),
        ({"choices": [{"delta": {"reasoning_content": "think"}}]}, True),
        ({"choices": [], "usage": {"completion_tokens": 5}}, False),  # usage chunk
    ],
)
def test_token_chunks(event: dict[str, Any], expected: bool) -> None:
    """Only chunks that carry a generated token count as tokens and time ITL."""
    assert is_token_chunk(event) is expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://h:8000/v1/", "http://h:8000"),
        ("https://x/api", "https://x/api"),
        (" http://h:1 ", "http://h:1"),
    ],
)
def test_base_url_is_normalised(url: str, expected: str) -> None:
    """A trailing /v1 or slash is dropped, so both spellings of the URL work."""
    assert normalize_base_url(url) == expected


def test_non_http_url_is_a_usage_error() -> None:
    """A URL without http(s) is refused with a hint."""
    with pytest.raises(UsageError):
        normalize_base_url("localhost:8000")


def test_interrupted_answer_is_an_error(sse_server: Any) -> None:
    """An answer that ends with [DONE] but no finish_reason was cut short by the server."""
    sse_server.behaviour.fail_after = 0
    sse_server.behaviour.failure = "interrupt"
    with OpenAIStream(sse_server.url, timeout_seconds=10) as client:
        timing = client.stream(StreamRequest("twin-model", "hello", 8, 2), time.perf_counter() + 10)
    assert not timing.is_success
    assert "without a finish_reason after 2 tokens" in (timing.error or "")


def test_complete_answer_counts_every_token(sse_server: Any) -> None:
    """A full answer counts its tokens by chunk when the server reports no usage."""
    sse_server.behaviour.usage = False
    with OpenAIStream(sse_server.url, timeout_seconds=10) as client:
        timing = client.stream(StreamRequest("twin-model", "hello", 5, 2), time.perf_counter() + 10)
    assert timing.is_success
    assert timing.output_tokens == 5
    assert len(timing.itl_seconds) == 4


@pytest.mark.parametrize("usage", [True, False])
def test_tokens_merged_into_an_empty_closing_chunk(sse_server: Any, usage: bool) -> None:
    """An answer whose tokens all came in one closing chunk with no text (a consumer slower
    than vLLM gets its deltas merged; the tiny model's tokens decode to nothing) counts the
    tokens usage reports, first token at that chunk; without usage nothing says a token came."""
    sse_server.behaviour.merged = True
    sse_server.behaviour.usage = usage
    req = StreamRequest(
        "twin-model", "hello", 4, 2, extras={"stream_options": {"include_usage": True}}
    )
    with OpenAIStream(sse_server.url, timeout_seconds=10) as client:
        timing = client.stream(req, time.perf_counter() + 10)
    if not usage:
        assert timing.error == "the stream had no generated text"
        return
    assert timing.is_success, timing.error
    assert timing.output_tokens == 4
    assert timing.itl_seconds == ()
    assert timing.ttft_seconds is not None
    assert timing.ttft_seconds >= sse_server.behaviour.ttft_seconds + 3 / 50.0 - 0.01
