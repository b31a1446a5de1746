"""The twin's OpenAI-compatible endpoints, its tokenizer and its generator.

**Tokenizer** (documented, deterministic, not a real one): text is cut into pieces of four
characters; each piece is one token whose id is ``crc32(piece) % 200064``. A chat request
is first rendered as ``<|role|>content`` per message, then tokenized the same way.

**Generator**: every answer is the same passage (below) cut into four-character tokens,
repeated as needed; ``max_tokens`` tokens are produced (16 by default for
``/v1/completions``; one passage, ``finish_reason: "stop"``, for chat without a limit).
Each request gets its first token after a short prefill (10 ms + 20 µs per prompt token),
then one token every ``1 / token_rate`` seconds, so a benchmark can check its figures.
"""

from __future__ import annotations

import threading
import time
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from bringup.twin.config import VLLM_VERSION
from bringup.twin.memory import VOCAB_SIZE

PASSAGE = (
    " Paris. This answer comes from the bringup engine twin, a stand-in for vLLM that writes"
    " four characters per token at a steady rate."
)
CHARS_PER_TOKEN = 4
COMPLETIONS_DEFAULT_MAX_TOKENS = 16


class ApiError(Exception):
    """An error answer: HTTP status, OpenAI error type, message."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind

    def body(self) -> dict[str, Any]:
        return {
            "error": {"message": str(self), "type": self.kind, "param": None, "code": self.status}
        }


def split_tokens(text: str) -> list[str]:
    return [text[i : i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN)]


def token_ids(text: str) -> list[int]:
    return [zlib.crc32(piece.encode()) % VOCAB_SIZE for piece in split_tokens(text)]


def render_chat(messages: Any) -> str:
    if not isinstance(messages, list):
        raise ApiError(400, "BadRequestError", "'messages' must be a list")
    parts = []
    for m in messages:
        if not isinstance(m, dict):
            raise ApiError(400, "BadRequestError", "each message must be an object")
        content = m.get("content", "")
        if isinstance(content, list):
            content = "".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        parts.append(f"<|{m.get('role', 'user')}|>{content}")
    return "".join(parts)


def passage_tokens(n: int) -> list[str]:
    pieces = split_tokens(PASSAGE)
    return [pieces[i % len(pieces)] for i in range(n)]


@dataclass
class ServerState:
    """What the HTTP side knows: the served model, its limits, counters, engine health."""

    model: str
    max_model_len: int
    token_rate: float
    api_key: str | None
    gpu_memory_utilization: float
    num_gpu_blocks: int = 0
    engine_dead: bool = False
    running: int = 0
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    success_total: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def authorized(self, path: str, header: str | None) -> bool:
        return (
            self.api_key is None or not path.startswith("/v1") or header == f"Bearer {self.api_key}"
        )

    def models(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {
                    "id": self.model,
                    "object": "model",
                    "created": int(time.time()),
                    "owned_by": "vllm",
                    "root": self.model,
                    "parent": None,
                    "max_model_len": self.max_model_len,
                    "permission": [
                        {
                            "id": f"modelperm-{uuid.uuid4().hex}",
                            "object": "model_permission",
                            "created": int(time.time()),
                            "allow_create_engine": False,
                            "allow_sampling": True,
                            "allow_logprobs": True,
                            "allow_search_indices": False,
                            "allow_view": True,
                            "allow_fine_tuning": False,
                            "organization": "*",
                            "group": None,
                            "is_blocking": False,
                        }
                    ],
                }
            ],
        }

    def version(self) -> dict[str, Any]:
        return {"version": VLLM_VERSION}

    def tokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        if "messages" in body:
            text = render_chat(body["messages"])
        elif isinstance(body.get("prompt"), str):
            text = body["prompt"]
        else:
            raise ApiError(400, "BadRequestError", "'prompt' (a string) or 'messages' is required")
        ids = token_ids(text)
        return {
            "count": len(ids),
            "max_model_len": self.max_model_len,
            "tokens": ids,
            "token_strs": None,
        }

    def metrics(self) -> str:
        label = f'engine="0",model_name="{self.model}"'
        lines = [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{label}}} {float(self.running)}",
            "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{{{label}}} 0.0",
            "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f"vllm:kv_cache_usage_perc{{{label}}} {min(1.0, self.running * 0.01)}",
            "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{{{label}}} {float(self.prompt_tokens_total)}",
            "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{{{label}}} {float(self.generation_tokens_total)}",
            "# HELP vllm:request_success_total Count of successfully processed requests.",
            "# TYPE vllm:request_success_total counter",
            *(
                f'vllm:request_success_total{{{label},finished_reason="{r}"}} {float(n)}'
                for r, n in sorted(self.success_total.items())
            ),
            "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
            "# TYPE vllm:cache_config_info gauge",
            (
                f'vllm:cache_config_info{{block_size="16",cache_dtype="auto",engine="0",'
                f'gpu_memory_utilization="{self.gpu_memory_utilization}",num_gpu_blocks="{self.num_gpu_blocks}"}} 1.0'
            ),
        ]
        return "\n".join(lines) + "\n"


@dataclass
class Generation:
    """One accepted completion request, produced token by token at the state's rate."""

    state: ServerState
    chat: bool
    prompt_tokens: int
    n_tokens: int
    finish_reason: str
    stream: bool
    include_usage: bool
    ident: str = field(default_factory=lambda: uuid.uuid4().hex)
    created: int = field(default_factory=lambda: int(time.time()))

    def tokens(self) -> Iterator[str]:
        """The tokens, each yielded when it is due; counts the request as running meanwhile."""
        with self.state.lock:
            self.state.running += 1
            self.state.prompt_tokens_total += self.prompt_tokens
        try:
            start = time.monotonic() + 0.01 + self.prompt_tokens * 20e-6
            for i, piece in enumerate(passage_tokens(self.n_tokens)):
                delay = start + i / self.state.token_rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                if self.state.engine_dead:
                    raise ApiError(
                        500,
                        "InternalServerError",
                        "The server had an error while processing your request.",
                    )
                with self.state.lock:
                    self.state.generation_tokens_total += 1
                yield piece
            with self.state.lock:
                self.state.success_total[self.finish_reason] = (
                    self.state.success_total.get(self.finish_reason, 0) + 1
                )
        finally:
            with self.state.lock:
                self.state.running -= 1

    @property
    def model(self) -> str:
        return self.state.model

    def usage(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "total_tokens": self.prompt_tokens + self.n_tokens,
            "completion_tokens": self.n_tokens,
            "prompt_tokens_details": None,
        }

    def response(self) -> dict[str, Any]:
        text = "".join(self.tokens())
        if self.chat:
            choice: dict[str, Any] = {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": text,
                    "reasoning_content": None,
                    "tool_calls": [],
                },
                "logprobs": None,
                "finish_reason": self.finish_reason,
                "stop_reason": None,
            }
            return {
                "id": f"chatcmpl-{self.ident}",
                "object": "chat.completion",
                "created": self.created,
                "model": self.model,
                "choices": [choice],
                "usage": self.usage(),
                "prompt_logprobs": None,
            }
        choice = {
            "index": 0,
            "text": text,
            "logprobs": None,
            "finish_reason": self.finish_reason,
            "stop_reason": None,
            "prompt_logprobs": None,
        }
        return {
            "id": f"cmpl-{self.ident}",
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": self.usage(),
        }

    def chunks(self) -> Iterator[dict[str, Any]]:
        """The SSE payloads (without ``data: [DONE]``)."""
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        ident = f"chatcmpl-{self.ident}" if self.chat else f"cmpl-{self.ident}"
        head = {"id": ident, "object": kind, "created": self.created, "model": self.model}
        if self.chat:
            yield {
                **head,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "logprobs": None,
                        "finish_reason": None,
                    }
                ],
            }
        for i, piece in enumerate(self.tokens()):
            finish = self.finish_reason if i == self.n_tokens - 1 else None
            if self.chat:
                choice: dict[str, Any] = {
                    "index": 0,
                    "delta": {"content": piece},
                    "logprobs": None,
                    "finish_reason": finish,
                }
            else:
                choice = {
                    "index": 0,
                    "text": piece,
                    "logprobs": None,
                    "finish_reason": finish,
                    "stop_reason": None,
                }
            yield {**head, "choices": [choice]}
        if self.include_usage:
            yield {**head, "choices": [], "usage": self.usage()}


def accept(state: ServerState, body: dict[str, Any], chat: bool) -> Generation:
    """Validate a completion request and return its generation (raises ApiError)."""
    if state.engine_dead:
        raise ApiError(
            500, "InternalServerError", "The server had an error while processing your request."
        )
    model = body.get("model")
    if model is not None and model != state.model:
        raise ApiError(404, "NotFoundError", f"The model `{model}` does not exist.")
    if chat:
        prompt_text = render_chat(body.get("messages"))
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            prompt = "".join(str(p) for p in prompt)
        if not isinstance(prompt, str):
            raise ApiError(400, "BadRequestError", "'prompt' is required")
        prompt_text = prompt
        limit = body.get("max_tokens", COMPLETIONS_DEFAULT_MAX_TOKENS)
    prompt_tokens = len(split_tokens(prompt_text))
    if limit is None:
        n_tokens, finish = len(split_tokens(PASSAGE)), "stop"
    elif not isinstance(limit, int) or limit < 1:
        raise ApiError(400, "BadRequestError", f"max_tokens must be at least 1, got {limit}.")
    else:
        n_tokens, finish = limit, "length"
    if prompt_tokens + n_tokens > state.max_model_len:
        raise ApiError(
            400,
            "BadRequestError",
            f"This model's maximum context length is {state.max_model_len} tokens. However, you requested "
            f"{prompt_tokens + n_tokens} tokens ({prompt_tokens} in the messages, {n_tokens} in the completion). "
            "Please reduce the length of the messages or completion.",
        )
    options = body.get("stream_options") or {}
    return Generation(
        state,
        chat,
        prompt_tokens,
        n_tokens,
        finish,
        bool(body.get("stream")),
        bool(isinstance(options, dict) and options.get("include_usage")),
    )
