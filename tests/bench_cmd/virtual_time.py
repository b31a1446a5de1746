"""The fake streaming server of ``conftest.py`` in virtual time: an httpx transport whose
tokens come when a virtual clock says, so the measured TTFT and token rate are exact on any
machine, however loaded (no sleeps; what wall time a step takes changes nothing).

Each thread has its own time. The bench's coordinator (the thread that made the clock) sees
the latest time of all (it waits for its workers). A worker (a ``bench-N`` thread of
``bench_runner``) starts at the coordinator's time, and a stream moves the time of the
thread that reads it (the transport's body is read in the caller's thread) to each token's
due time. Workers go in lockstep: a worker reads the clock only when no live worker is
behind it, so it cannot claim a request "later" before another claims one "earlier" - the
order of a real run, where a busy worker cannot claim.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx2

from bench_cmd.conftest import Behaviour, count_tokens

WORKER_PREFIX = "bench-"  # bench_runner's worker threads


class VirtualClock:
    """Seconds per thread; ``advance_to`` moves the calling thread's time on."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._coordinator = threading.current_thread()
        self._now = 0.0  # the coordinator's time
        self._times: dict[threading.Thread, float] = {}  # each worker's
        self._seen: set[threading.Thread] = set()  # workers alive when the coordinator looked

    def __call__(self) -> float:
        me = threading.current_thread()
        with self._cond:
            if me is self._coordinator or not me.name.startswith(WORKER_PREFIX):
                self._now = max([self._now, *self._times.values()])
                self._seen |= {t for t in threading.enumerate() if _worker(t)}
                self._cond.notify_all()
                return self._now
            self._times.setdefault(me, self._now)
            while not self._may_go(me):
                self._cond.wait(0.005)  # a worker's end is not announced: look again
            return self._times[me]

    def _may_go(self, me: threading.Thread) -> bool:
        """Every worker started so far is known, and none that is alive is behind ``me``."""
        if me not in self._seen:
            return False  # the coordinator has not finished starting this level's workers
        mine = self._times[me]
        return all(
            self._times.get(t, self._now) >= mine
            for t in self._seen
            if t is not me and t.is_alive()
        )

    def advance_to(self, t: float) -> None:
        me = threading.current_thread()
        with self._cond:
            self._times[me] = max(self._times.get(me, self._now), t)
            self._cond.notify_all()


def _worker(thread: threading.Thread) -> bool:
    return thread.name.startswith(WORKER_PREFIX) and thread.is_alive()


def transport(behaviour: Behaviour, clock: VirtualClock) -> httpx2.MockTransport:
    """The conftest server's answers (models, tokenize, completions, streams) in ``clock``'s time."""

    def handle(request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        if request.method == "GET" and path == "/v1/models":
            return httpx2.Response(
                200, json={"object": "list", "data": [{"id": "twin-model", "object": "model"}]}
            )
        body = json.loads(request.content or b"{}") if request.method == "POST" else {}
        if path == "/tokenize" and behaviour.tokenize and "prompt" in body:
            return httpx2.Response(
                200, json={"count": count_tokens(body["prompt"]), "max_model_len": 4096}
            )
        if path in ("/v1/completions", "/v1/chat/completions"):
            with behaviour.lock:
                behaviour.completions += 1
            prompt = body.get("prompt") or body["messages"][0]["content"]
            if not body.get("stream"):
                usage = {"prompt_tokens": count_tokens(prompt), "completion_tokens": 1}
                return httpx2.Response(
                    200,
                    json={"choices": [{"text": "x", "finish_reason": "length"}], "usage": usage},
                )
            return httpx2.Response(
                200,
                headers={"content-type": "text/event-stream"},
                content=_stream(behaviour, clock, body, prompt, clock()),
            )
        return httpx2.Response(404, json={"error": {"message": "Not Found"}})

    return httpx2.MockTransport(handle)


def _stream(
    b: Behaviour, clock: VirtualClock, body: dict[str, Any], prompt: str, start: float
) -> Iterator[bytes]:
    n = int(body["max_tokens"])
    for i in range(n):
        clock.advance_to(start + b.ttft_seconds + i / b.token_rate)
        finish = "length" if i == n - 1 else None
        yield _event({"choices": [{"index": 0, "text": f" t{i}", "finish_reason": finish}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = {"prompt_tokens": count_tokens(prompt), "completion_tokens": n}
        yield _event({"choices": [], "usage": usage})
    yield b"data: [DONE]\n\n"


def _event(data: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(data)}\n\n".encode()
