"""A real streaming OpenAI-style server on 127.0.0.1 with a known TTFT and token rate.

Tokens are sent on an absolute schedule (first at ``ttft_seconds``, then one every
``1 / token_rate`` seconds), so a late wake-up delays one token, not all that follow.
Its "tokenizer" counts whitespace-separated words plus one (a BOS token).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Behaviour:
    """How the fake server answers."""

    ttft_seconds: float = 0.05
    token_rate: float = 50.0
    tokenize: bool = True  # serve vLLM's /tokenize
    usage: bool = True  # honour stream_options.include_usage and report usage
    fail_after: int | None = None  # completions after this many answer with `failure`
    failure: str = "500"  # "500", "drop" (close mid-stream), "hang" (never answer) or
    # "interrupt" (end with [DONE] after 2 tokens and no finish_reason, as llama-cpp-python does)
    merged: bool = False  # the whole answer in one closing chunk with empty text (vLLM's
    # output collector merges the deltas of a slow consumer; its tokens decode to nothing)
    reject_extras: bool = False  # 400 when ignore_eos is sent (a strict server)
    models_hang: bool = False  # /v1/models never answers
    metrics: str | None = None  # Prometheus text served at /metrics (404 when None)
    completions: int = 0  # how many completion requests arrived
    prompts: list[str] = field(default_factory=list)
    authorization: list[str] = field(default_factory=list)  # Authorization headers seen
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)


def count_tokens(text: str) -> int:
    """The fake tokenizer: words plus a BOS token."""
    return len(text.split()) + 1


class _Handler(BaseHTTPRequestHandler):
    behaviour: Behaviour

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the access log."""

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            if self.behaviour.models_hang:
                self.behaviour.stop.wait()
                return
            self._json(200, {"object": "list", "data": [{"id": "twin-model", "object": "model"}]})
        elif self.path == "/metrics" and self.behaviour.metrics is not None:
            data = self.behaviour.metrics.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:
            self._json(404, {"error": "not found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        if self.path == "/tokenize" and self.behaviour.tokenize and "prompt" in body:
            self._json(200, {"count": count_tokens(body["prompt"]), "max_model_len": 4096})
        elif self.path in ("/v1/completions", "/v1/chat/completions"):
            self._complete(body)
        else:
            self._json(404, {"error": {"message": "Not Found"}})

    def _complete(self, body: dict[str, Any]) -> None:
        b = self.behaviour
        with b.lock:
            b.authorization.append(self.headers.get("Authorization", ""))
            b.completions += 1
            number = b.completions
            prompt = body.get("prompt") or body["messages"][0]["content"]
            b.prompts.append(prompt)
        if b.reject_extras and "ignore_eos" in body:
            self._json(400, {"error": {"message": "extra fields not permitted: ignore_eos"}})
            return
        failing = b.fail_after is not None and number > b.fail_after
        if failing and b.failure == "500":
            self._json(500, {"error": {"message": "engine dead"}})
            return
        if failing and b.failure == "hang":
            b.stop.wait()
            return
        if not body.get("stream"):
            usage = {"prompt_tokens": count_tokens(prompt), "completion_tokens": 1}
            self._json(
                200,
                {
                    "choices": [{"text": "x", "finish_reason": "length"}],
                    **({"usage": usage} if b.usage else {}),
                },
            )
            return
        self._stream(
            body,
            prompt,
            drop=failing and b.failure == "drop",
            interrupt=failing and b.failure == "interrupt",
        )

    def _stream(self, body: dict[str, Any], prompt: str, *, drop: bool, interrupt: bool) -> None:
        b = self.behaviour
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        start = time.perf_counter()
        n = int(body["max_tokens"])
        chat = "messages" in body
        for i in range(n):
            _sleep_until(start + b.ttft_seconds + i / b.token_rate)
            if b.merged:
                if i == n - 1:
                    self._event(_chunk(chat, "", "length"))
                continue
            if drop and i == 2:
                self.wfile.flush()
                self.close_connection = True
                return
            if interrupt and i == 2:
                break
            self._event(_chunk(chat, f" t{i}", "length" if i == n - 1 else None))
        if b.usage and (body.get("stream_options") or {}).get("include_usage"):
            self._event(
                {
                    "choices": [],
                    "usage": {"prompt_tokens": count_tokens(prompt), "completion_tokens": n},
                }
            )
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _event(self, data: dict[str, Any]) -> None:
        self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def _json(self, status: int, data: Any) -> None:
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


def _chunk(chat: bool, text: str, finish: str | None) -> dict[str, Any]:
    if chat:
        return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}
    return {"choices": [{"index": 0, "text": text, "finish_reason": finish}]}


def _sleep_until(when: float) -> None:
    delay = when - time.perf_counter()
    if delay > 0:
        time.sleep(delay)


@dataclass
class FakeServer:
    """A running fake server: its URL and the behaviour it follows (mutable)."""

    url: str
    behaviour: Behaviour


@pytest.fixture
def sse_server() -> Iterator[FakeServer]:
    """Start the fake streaming server on a free 127.0.0.1 port; stop it after the test."""
    behaviour = Behaviour()
    handler = type("Handler", (_Handler,), {"behaviour": behaviour})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield FakeServer(f"http://127.0.0.1:{server.server_address[1]}", behaviour)
    finally:
        behaviour.stop.set()
        server.shutdown()
        server.server_close()
