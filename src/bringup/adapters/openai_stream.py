"""A streaming client for OpenAI-compatible servers (vLLM, SGLang, TGI, llama.cpp), over httpx2.

It does four things, each bounded by a timeout: list the served models (``GET /v1/models``),
count a prompt's tokens with the server's own tokenizer (each knowledge pack names its
engine's endpoint: vLLM and SGLang ``POST /tokenize``, llama.cpp ``POST /tokenize``,
llama-cpp-python ``POST /extras/tokenize/count``; they are tried in that order), send one short
non-streaming completion (to calibrate prompt length from ``usage``), and stream one
completion while recording when each content chunk arrives (``RequestTiming``).

Command line equivalent of one streamed request::

    curl -N http://HOST:PORT/v1/completions -H 'Content-Type: application/json' \\
      -d '{"model": "M", "prompt": "...", "max_tokens": 128, "stream": true}'

Failures of a single request are data (``RequestTiming.error``); only setting up (an
unreachable server, a bad URL) raises ``AdapterError``.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2

from bringup.core import packs
from bringup.core.bench_stats import RequestTiming
from bringup.core.packs.types import TokenizeSpec
from bringup.errors import AdapterError, UsageError

Clock = Callable[[], float]
COMPLETIONS = "completions"
CHAT = "chat"
_PATHS = {COMPLETIONS: "/v1/completions", CHAT: "/v1/chat/completions"}


def tokenize_tries() -> tuple[TokenizeSpec, ...]:
    """Every tokenizer endpoint the packs name, in pack order, each once."""
    specs: list[TokenizeSpec] = []
    for pack in packs.declared():
        for http in (pack.http, *pack.http_variants.values()):
            if http.tokenize is not None and http.tokenize not in specs:
                specs.append(http.tokenize)
    return tuple(specs)


_TOKENIZE_TRIES = tokenize_tries()


@dataclass(frozen=True, slots=True)
class StreamRequest:
    """One streamed generation to time."""

    model: str
    prompt: str
    max_tokens: int
    input_tokens: int  # what the prompt was built to be; usage.prompt_tokens overrides it
    endpoint: str = COMPLETIONS  # "completions" or "chat"
    extras: dict[str, Any] = field(default_factory=dict)  # ignore_eos, stream_options, ...


def normalize_base_url(url: str) -> str:
    """``http://h:8000/v1/`` → ``http://h:8000``; rejects anything that is not http(s)."""
    text = url.strip().rstrip("/")
    if not text.startswith(("http://", "https://")):
        raise UsageError(f"not an http(s) URL: {url!r}", hint="use e.g. http://127.0.0.1:8000")
    return text[: -len("/v1")] if text.endswith("/v1") else text


def request_body(req: StreamRequest, *, stream: bool = True) -> dict[str, Any]:
    """The JSON body of a completion or chat completion request."""
    body: dict[str, Any] = {"model": req.model, "max_tokens": req.max_tokens, "stream": stream}
    if req.endpoint == CHAT:
        body["messages"] = [{"role": "user", "content": req.prompt}]
    else:
        body["prompt"] = req.prompt
    body.update(req.extras)
    if not stream:
        body.pop("stream_options", None)
    return body


def is_token_chunk(event: dict[str, Any]) -> bool:
    """Whether a streamed chunk carries one generated token.

    A chunk with text counts. So does a chunk with empty text that does not end the stream:
    llama.cpp streams tokens whose text is empty (a partial UTF-8 byte), and closes with an
    empty chunk that only carries ``finish_reason``. A chat chunk that only announces the
    assistant role does not count.
    """
    choices = event.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return False
    choice = choices[0]
    if isinstance(choice.get("text"), str):
        text: Any = choice["text"]
    else:
        delta = choice.get("delta")
        if not isinstance(delta, dict) or "role" in delta:
            return bool(
                isinstance(delta, dict) and (delta.get("content") or delta.get("reasoning_content"))
            )
        text = delta.get("content") or delta.get("reasoning_content")
    if not isinstance(text, str):
        return False
    return bool(text) or not choice.get("finish_reason")


class OpenAIStream:
    """An OpenAI-compatible server at ``base_url``; close it (or use ``with``) when done."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_seconds: float = 30.0,
        transport: httpx2.BaseTransport | None = None,
        clock: Clock = time.perf_counter,
    ) -> None:
        self.base_url = normalize_base_url(base_url)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout_seconds = timeout_seconds
        self._clock = clock
        self._client = httpx2.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout_seconds,
            transport=transport,
            limits=httpx2.Limits(max_connections=None, max_keepalive_connections=64),
            trust_env=False,
        )

    def __enter__(self) -> OpenAIStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close all connections."""
        self._client.close()

    def list_models(self) -> list[str]:
        """The model ids the server serves; AdapterError when it cannot be asked."""
        data = self._get_json("/v1/models")
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise AdapterError(f"{self.base_url}/v1/models did not return a model list")
        return [str(m["id"]) for m in items if isinstance(m, dict) and "id" in m]

    def count_tokens(self, model: str, text: str) -> tuple[int, str] | None:
        """``(tokens, which endpoint)`` from the server's tokenizer, or None when it has none."""
        for spec in _TOKENIZE_TRIES:
            path, flavour = spec.path, spec.style
            body = _tokenize_body(flavour, model, text)
            try:
                response = self._client.post(path, json=body)
            except httpx2.HTTPError:
                return None
            count = _token_count(response) if response.status_code == 200 else None
            if count is not None:
                return count, f"{flavour} {path}"
        return None

    def complete(self, req: StreamRequest) -> dict[str, Any]:
        """One non-streaming completion; returns the JSON; AdapterError with the reason."""
        try:
            response = self._client.post(_PATHS[req.endpoint], json=request_body(req, stream=False))
        except httpx2.HTTPError as exc:
            raise AdapterError(f"{self.base_url}: {describe_error(exc)}") from exc
        if response.status_code != 200:
            raise AdapterError(f"{self.base_url}{_PATHS[req.endpoint]}: {_status_text(response)}")
        data = _json_object(response)
        if not isinstance(data, dict):
            raise AdapterError(f"{self.base_url}{_PATHS[req.endpoint]} did not return an object")
        return data

    def stream(self, req: StreamRequest, deadline_seconds: float) -> RequestTiming:
        """Stream one generation, stopping at ``deadline_seconds`` on this client's clock."""
        recorder = _Recorder(self._clock(), req.input_tokens)
        remaining = deadline_seconds - recorder.start
        if remaining <= 0:
            return recorder.fail("not sent: the time bound was reached", self._clock())
        timeout = httpx2.Timeout(min(self.timeout_seconds, remaining))
        try:
            with self._client.stream(
                "POST", _PATHS[req.endpoint], json=request_body(req), timeout=timeout
            ) as response:
                if response.status_code != 200:
                    response.read()
                    return recorder.fail(_status_text(response), self._clock())
                return self._read_events(response, recorder, deadline_seconds)
        except httpx2.HTTPError as exc:
            return recorder.fail(describe_error(exc), self._clock())

    def _read_events(
        self, response: httpx2.Response, recorder: _Recorder, deadline_seconds: float
    ) -> RequestTiming:
        for event in _sse_data(response.iter_text()):
            now = self._clock()
            if event == "[DONE]":
                return recorder.done(now)
            verdict = recorder.on_event(event, now)
            if verdict is not None:
                return verdict
            if now > deadline_seconds:
                return recorder.fail("stopped mid-stream: the time bound was reached", now)
        return recorder.end_without_done(self._clock())

    def get_metrics_text(self) -> str | None:
        """The server's Prometheus ``/metrics`` text, or None when it has none (or fails)."""
        try:
            response = self._client.get("/metrics", timeout=5.0)
        except httpx2.HTTPError:
            return None
        if response.status_code != 200:
            return None
        return response.text[:4_000_000]

    def _get_json(self, path: str) -> Any:
        try:
            response = self._client.get(path)
        except httpx2.HTTPError as exc:
            raise AdapterError(f"cannot reach {self.base_url}: {describe_error(exc)}") from exc
        if response.status_code != 200:
            raise AdapterError(f"{self.base_url}{path}: {_status_text(response)}")
        return _json_object(response)


class _Recorder:
    """Accumulates one request's chunk arrival times and usage."""

    def __init__(self, start: float, input_tokens: int) -> None:
        self.start = start
        self.input_tokens = input_tokens
        self.chunk_times: list[float] = []
        self.usage_output: int | None = None
        self.finished = False
        self.finish_time: float | None = None  # the chunk that carried the finish_reason

    def on_event(self, data: str, now: float) -> RequestTiming | None:
        try:
            event = json.loads(data)
        except json.JSONDecodeError:
            return self.fail(f"not JSON in the stream: {data[:80]!r}", now)
        if not isinstance(event, dict):
            return self.fail(f"unexpected event in the stream: {data[:80]!r}", now)
        if "error" in event:
            return self.fail(f"error in the stream: {_error_message(event['error'])}", now)
        self._take_usage(event.get("usage"))
        if is_token_chunk(event):
            self.chunk_times.append(now)
        choices = event.get("choices") or []
        if choices and isinstance(choices[0], dict) and choices[0].get("finish_reason"):
            self.finished = True
            self.finish_time = now
        return None

    def _take_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            if isinstance(usage.get("completion_tokens"), int):
                self.usage_output = usage["completion_tokens"]
            if isinstance(usage.get("prompt_tokens"), int) and usage["prompt_tokens"] > 0:
                self.input_tokens = usage["prompt_tokens"]

    def done(self, now: float) -> RequestTiming:
        if self.finished:
            return self.finish(now)
        return self.fail(
            f"the answer ended without a finish_reason after {_tokens(len(self.chunk_times))}"
            " (interrupted by the server?)",
            now,
        )

    def end_without_done(self, now: float) -> RequestTiming:
        if self.finished:
            return self.finish(now)
        return self.fail("the stream ended before [DONE] (connection dropped?)", now)

    def finish(self, now: float) -> RequestTiming:
        times = self.chunk_times
        if not times and self.usage_output and self.finish_time is not None:
            # The server counted tokens but streamed them in one closing chunk with no text: a
            # consumer slower than the engine gets its deltas merged (vLLM's output collector
            # joins the outputs it has not handed out yet), and tokens that decode to nothing
            # (skipped special tokens, a partial UTF-8 byte) leave its text empty. They arrived
            # with that chunk.
            times = [self.finish_time]
        if not times:
            return self.fail("the stream had no generated text", now)
        return RequestTiming(
            start_seconds=self.start,
            latency_seconds=now - self.start,
            ttft_seconds=times[0] - self.start,
            itl_seconds=tuple(b - a for a, b in itertools.pairwise(times)),
            input_tokens=self.input_tokens,
            output_tokens=self.usage_output if self.usage_output is not None else len(times),
        )

    def fail(self, message: str, now: float) -> RequestTiming:
        ttft = self.chunk_times[0] - self.start if self.chunk_times else None
        return RequestTiming(self.start, now - self.start, ttft, (), self.input_tokens, 0, message)


def _sse_data(chunks: Iterator[str]) -> Iterator[str]:
    """The payloads of ``data:`` lines of a server-sent-event stream, as they arrive."""
    buffer = ""
    for chunk in chunks:
        buffer += chunk
        *lines, buffer = buffer.split("\n")
        for line in lines:
            stripped = line.rstrip("\r")
            if stripped.startswith("data:"):
                yield stripped[5:].strip()
    if buffer.startswith("data:"):
        yield buffer[5:].strip()


def describe_error(exc: httpx2.HTTPError) -> str:
    """One short phrase for a transport error."""
    kinds: list[tuple[type[httpx2.HTTPError], str]] = [
        (httpx2.ConnectTimeout, "connect timed out"),
        (httpx2.ConnectError, "connection refused or host unreachable"),
        (httpx2.ReadTimeout, "no data before the read timeout"),
        (httpx2.WriteTimeout, "write timed out"),
        (httpx2.PoolTimeout, "no free connection"),
        (httpx2.RemoteProtocolError, "the server closed the connection mid-response"),
        (httpx2.ReadError, "the connection was reset"),
    ]
    for kind, phrase in kinds:
        if isinstance(exc, kind):
            return phrase
    return f"{type(exc).__name__}: {exc}"


def _status_text(response: httpx2.Response) -> str:
    text = " ".join(response.text.split())[:160] if response.content else ""
    return f"HTTP {response.status_code}" + (f": {text}" if text else "")


def _json_object(response: httpx2.Response) -> Any:
    try:
        return response.json()
    except ValueError as exc:
        raise AdapterError(f"{response.request.url} did not return JSON") from exc


def _error_message(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error)[:160]
    return str(error)[:160]


def _tokenize_body(flavour: str, model: str, text: str) -> dict[str, Any]:
    """The request body of a tokenizer endpoint of ``TokenizeSpec.style`` ``flavour``."""
    if flavour == "vllm":
        return {"model": model, "prompt": text}
    if flavour == "llamacpp":
        return {"content": text}
    return {"input": text}


def _token_count(response: httpx2.Response) -> int | None:
    try:
        data = response.json()
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    count = data.get("count")
    tokens = data.get("tokens")
    if not isinstance(count, int):
        count = len(tokens) if isinstance(tokens, list) else None
    return count if count else None  # 0 tokens for a non-empty text: not a real tokenizer


def _tokens(n: int) -> str:
    return f"{n} token" if n == 1 else f"{n} tokens"
