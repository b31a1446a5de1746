"""The bounded load loop behind ``bringup bench`` (and ``run --bench`` / ``up --bench``).

``run_bench(config)`` asks the server which model it serves, builds prompts of the requested
token length (with the server's tokenizer where it has one), checks one streamed request
works, then runs each concurrency level in turn and returns a ``BenchReport``.

Every loop is bounded:

- per level, at most ``requests`` requests (default ``max(8, 4 * concurrency)``);
- the whole run, at most ``duration_seconds``: each level may *start* requests for an
  equal share of the time left, and every request is cut at the run's end;
- a failing server ends the run: ``max(3, concurrency)`` failures in a row with no success
  in between stop it, and later levels are skipped. The errors are in the report.

Workers are daemon threads, so nothing is left running even if a server misbehaves.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bringup import exit_codes
from bringup.adapters.openai_stream import COMPLETIONS, OpenAIStream, StreamRequest
from bringup.core.bench_report import (
    BenchReport,
    DecodeReport,
    Progress,
    PromptInfo,
    ServerLoad,
)
from bringup.core.bench_stats import LevelStats, RequestTiming, summarize_level
from bringup.core.plan.decode import DecodeSpeed
from bringup.core.server_metrics import ServerMetrics, parse_metrics
from bringup.errors import AdapterError, UsageError

if TYPE_CHECKING:
    import httpx2

EXIT_UNREACHABLE = exit_codes.EXIT_INCOMPLETE  # no verdict: the server could not be asked
CHARS_PER_TOKEN = 4.0  # English text, when the server cannot count tokens for us
JOIN_GRACE_SECONDS = 2.0
_TEXT = (
    "the service answers every request with a short story about rivers mountains and the "
    "people who live between them while the engine keeps its caches warm and its queues short"
)
_WORDS = tuple(_TEXT.split(" "))
_EXTRAS: dict[str, Any] = {
    "temperature": 0.0,
    "ignore_eos": True,  # vLLM, SGLang, llama.cpp: generate exactly max_tokens
    "stream_options": {"include_usage": True},  # exact output token counts
}
PROBE_TOKENS = 2


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """What to measure and the bounds to measure it within."""

    url: str
    model: str | None = None  # served model name; None: the first one /v1/models lists
    input_tokens: int = 512
    output_tokens: int = 128
    concurrency: tuple[int, ...] = (1, 2, 4, 8, 16)
    requests: int | None = None  # per level; None: max(8, 4 * concurrency)
    duration_seconds: float = 60.0  # the whole run, calibration included
    api_key: str | None = None
    endpoint: str = COMPLETIONS  # "completions" or "chat"
    predicted: DecodeSpeed | None = None  # the plan's decode prediction (core.plan.decode)
    prompts: tuple[str, ...] = ()  # from --dataset: used in turn instead of made-up prompts
    dataset: str | None = None  # where they came from, for the report
    progress: Callable[[Progress], None] | None = None  # called as requests finish
    no_ceiling_reason: str = "no prediction: give --checkpoint and --gpu (or --device cpu)"


@dataclass
class _LevelState:
    """Shared between one level's workers (guarded by ``lock``)."""

    limit: int
    abort_after: int
    next_index: int = 0
    consecutive_failures: int = 0
    aborted: bool = False  # the server kept failing
    closed: bool = False  # the level is over: no more requests
    expected_seconds: float = 0.0  # longest successful request so far: do not start one
    # that cannot finish before the deadline
    results: list[RequestTiming] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def claim(self, now: float, soft_deadline: float) -> int | None:
        with self.lock:
            if self.aborted or self.closed or self.next_index >= self.limit:
                return None
            if now >= soft_deadline or (
                self.results and now + self.expected_seconds > soft_deadline
            ):
                return None
            self.next_index += 1
            return self.next_index - 1

    def record(self, timing: RequestTiming) -> None:
        with self.lock:
            self.results.append(timing)
            self.consecutive_failures = 0 if timing.is_success else self.consecutive_failures + 1
            if timing.is_success:
                self.expected_seconds = max(self.expected_seconds, timing.latency_seconds)
            if self.consecutive_failures >= self.abort_after:
                self.aborted = True


def run_bench(
    config: BenchConfig,
    *,
    clock: Callable[[], float] = time.perf_counter,
    transport: httpx2.BaseTransport | None = None,
) -> BenchReport:
    """Measure the server at ``config.url``; AdapterError (exit 3) when it cannot be asked.

    ``clock`` times every request; ``transport`` replaces HTTP (tests: a server in virtual
    time, whose tokens come when the clock says)."""
    _check(config)
    run_end = clock() + config.duration_seconds
    with OpenAIStream(
        config.url,
        api_key=config.api_key,
        timeout_seconds=config.duration_seconds,
        clock=clock,
        transport=transport,
    ) as client:
        model = _pick_model(client, config.model)
        before = _metrics(client)
        if config.prompts:
            prompt_info = _dataset_info(client, config, model)
            extras = _probe_extras(client, config, model, 8, run_end)
            make = _dataset_factory(config, model, prompt_info.tokens, extras)
        else:
            prompt_info, words = _calibrate(client, config, model)
            extras = _probe_extras(client, config, model, words, run_end)
            make = _request_factory(config, model, words, prompt_info.tokens, extras)
        levels, stop, skipped = _run_levels(client, config, make, run_end, clock)
        load = ServerLoad(before, _metrics(client))
    report = _report(config, client.base_url, model, prompt_info, levels, stop, skipped)
    return dataclasses.replace(report, server_metrics=load)


def _metrics(client: OpenAIStream) -> ServerMetrics | None:
    text = client.get_metrics_text()
    return None if text is None else parse_metrics(text)


def _check(config: BenchConfig) -> None:
    if config.input_tokens < 1 or config.output_tokens < 1:
        raise UsageError("--input-tokens and --output-tokens must be at least 1")
    if not config.concurrency or min(config.concurrency) < 1:
        raise UsageError("--concurrency needs positive integers, e.g. 1,2,4,8")
    if config.requests is not None and config.requests < 1:
        raise UsageError("--requests must be at least 1")
    if config.duration_seconds <= 0:
        raise UsageError("--duration must be positive, e.g. 60s")


def _pick_model(client: OpenAIStream, wanted: str | None) -> str:
    try:
        served = client.list_models()
    except AdapterError as exc:
        raise AdapterError(
            exc.message, hint="is the server up? check the URL and port", exit_code=EXIT_UNREACHABLE
        ) from exc
    if wanted is not None:
        return wanted
    if not served:
        raise AdapterError(
            f"{client.base_url}/v1/models lists no model", exit_code=EXIT_UNREACHABLE
        )
    return served[0]


def prompt_text(words: int, index: int = 0) -> str:
    """A deterministic English prompt of ``words`` words; ``index`` makes its start unique.

    The unique start defeats prefix caching, so every request pays its full prefill.
    """
    body = " ".join(_WORDS[i % len(_WORDS)] for i in range(max(0, words - 1)))
    return f"{index}: {body}".rstrip()


def _calibrate(client: OpenAIStream, config: BenchConfig, model: str) -> tuple[PromptInfo, int]:
    """Find how many words make ``input_tokens`` tokens, and say how it was found."""
    target = config.input_tokens
    counted = client.count_tokens(model, prompt_text(target))
    if counted is not None:
        first = counted[0]
        words, tokens = _fit_words(
            target, lambda w: first if w == target else _must_count(client, model, w)
        )
        return PromptInfo("tokenize", counted[1], tokens), words
    usage = _usage_counter(client, config, model)
    if usage is not None:
        words, tokens = _fit_words(target, usage)
        return PromptInfo(
            "usage", "calibrated from usage.prompt_tokens of probe requests", tokens
        ), words
    words = max(1, round(target * CHARS_PER_TOKEN / _mean_word_chars()))
    return PromptInfo("approximate", f"{CHARS_PER_TOKEN:.0f} characters per token", target), words


def _must_count(client: OpenAIStream, model: str, words: int) -> int:
    counted = client.count_tokens(model, prompt_text(words))
    if counted is None:
        raise AdapterError(
            f"{client.base_url}: the tokenizer stopped answering", exit_code=EXIT_UNREACHABLE
        )
    return counted[0]


def _usage_counter(
    client: OpenAIStream, config: BenchConfig, model: str
) -> Callable[[int], int] | None:
    """A token counter built on ``usage.prompt_tokens``, or None when the server reports none."""

    def count(words: int) -> int:
        req = StreamRequest(model, prompt_text(words), 1, 0, config.endpoint)
        usage = client.complete(req).get("usage") or {}
        tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if not isinstance(tokens, int) or tokens <= 0:
            raise _NoUsage
        return tokens

    try:
        count(8)
    except _NoUsage:
        return None
    except AdapterError as exc:
        raise AdapterError(
            f"the server does not answer a completion: {exc.message}", exit_code=EXIT_UNREACHABLE
        ) from exc
    return count


class _NoUsage(Exception):
    """The server's completion carried no usage.prompt_tokens."""


def _fit_words(target: int, count: Callable[[int], int], rounds: int = 4) -> tuple[int, int]:
    """Adjust a word count until ``count(words)`` is ``target`` tokens (or rounds run out)."""
    words = max(1, target)
    tokens = count(words)
    for _ in range(rounds):
        if tokens == target:
            break
        per_word = max(tokens, 1) / words
        words = max(1, words + round((target - tokens) / per_word))
        tokens = count(words)
    return words, tokens


def _mean_word_chars() -> float:
    return sum(len(w) + 1 for w in _WORDS) / len(_WORDS)


def _probe_extras(
    client: OpenAIStream, config: BenchConfig, model: str, words: int, run_end: float
) -> dict[str, Any]:
    """Stream one short request; drop the optional fields if the server rejects them.

    ``min_tokens`` (vLLM, llama-cpp-python) joins ``ignore_eos`` so that every answer has
    the requested length even on servers that ignore one of them.
    """
    last = ""
    for extras in (_EXTRAS, {}):
        probe = {**extras, "min_tokens": PROBE_TOKENS} if extras else {}
        req = StreamRequest(model, prompt_text(words, -1), PROBE_TOKENS, 0, config.endpoint, probe)
        timing = client.stream(req, run_end)
        if timing.is_success:
            return {**extras, "min_tokens": config.output_tokens} if extras else {}
        last = timing.error or "no generated text"
        if not last.startswith(("HTTP 400", "HTTP 422")):
            break
    raise AdapterError(
        f"{client.base_url}: a streamed completion failed: {last}",
        hint="check --model and the server log",
        exit_code=EXIT_UNREACHABLE,
    )


def _dataset_info(client: OpenAIStream, config: BenchConfig, model: str) -> PromptInfo:
    """How long the dataset's prompts are: by the server's tokenizer when it has one (the
    mean over the first few), else 4 characters per token; usage.prompt_tokens corrects each
    request's count in the results."""
    sample = config.prompts[:8]
    counts = [client.count_tokens(model, p) for p in sample]
    source = f"{len(config.prompts)} prompts from {config.dataset or 'the dataset'}"
    if all(c is not None for c in counts):
        mean = sum(c[0] for c in counts if c is not None) / len(counts)
        return PromptInfo("dataset", source, round(mean))
    mean_chars = sum(len(p) for p in sample) / len(sample)
    return PromptInfo("dataset", source, max(1, round(mean_chars / CHARS_PER_TOKEN)))


def _dataset_factory(
    config: BenchConfig, model: str, tokens: int, extras: dict[str, Any]
) -> Callable[[int], StreamRequest]:
    prompts = config.prompts

    def make(index: int) -> StreamRequest:
        text = prompts[index % len(prompts)]
        estimate = max(1, round(len(text) / CHARS_PER_TOKEN)) if tokens else 1
        return StreamRequest(model, text, config.output_tokens, estimate, config.endpoint, extras)

    return make


def _request_factory(
    config: BenchConfig, model: str, words: int, tokens: int, extras: dict[str, Any]
) -> Callable[[int], StreamRequest]:
    def make(index: int) -> StreamRequest:
        return StreamRequest(
            model, prompt_text(words, index), config.output_tokens, tokens, config.endpoint, extras
        )

    return make


def _run_levels(
    client: OpenAIStream,
    config: BenchConfig,
    make: Callable[[int], StreamRequest],
    run_end: float,
    clock: Callable[[], float],
) -> tuple[list[LevelStats], str, tuple[int, ...]]:
    levels: list[LevelStats] = []
    sent = 0
    cut_by_time = False
    for position, concurrency in enumerate(config.concurrency):
        now = clock()
        if now >= run_end:
            return levels, "duration", tuple(config.concurrency[position:])
        soft_deadline = now + (run_end - now) / (len(config.concurrency) - position)
        limit = config.requests or max(8, 4 * concurrency)
        state = _LevelState(limit=limit, abort_after=max(3, concurrency))
        notify = _notifier(config, position, concurrency, state, clock)
        notify()
        _drive(
            client, state, concurrency, _offset(make, sent), soft_deadline, run_end, clock, notify
        )
        sent += state.next_index
        levels.append(summarize_level(concurrency, state.results))
        if state.aborted or not any(t.is_success for t in state.results):
            return levels, "errors", tuple(config.concurrency[position + 1 :])
        cut_by_time = cut_by_time or state.next_index < limit
    return levels, "duration" if cut_by_time else "completed", ()


def _notifier(
    config: BenchConfig,
    position: int,
    concurrency: int,
    state: _LevelState,
    clock: Callable[[], float],
) -> Callable[[], None]:
    """A function that tells ``config.progress`` where this level stands (no-op without one)."""
    started = clock()
    callback = config.progress

    def notify() -> None:
        if callback is None:
            return
        with state.lock:
            results = list(state.results)
        callback(
            Progress(
                concurrency=concurrency,
                level=position + 1,
                levels=len(config.concurrency),
                done=len(results),
                limit=state.limit,
                failed=sum(1 for t in results if not t.is_success),
                output_tokens=sum(t.output_tokens for t in results if t.is_success),
                elapsed_seconds=clock() - started,
            )
        )

    return notify


def _offset(make: Callable[[int], StreamRequest], base: int) -> Callable[[int], StreamRequest]:
    """Number requests across levels, so no two requests of a run share a prompt."""
    return lambda index: make(base + index)


def _drive(
    client: OpenAIStream,
    state: _LevelState,
    concurrency: int,
    make: Callable[[int], StreamRequest],
    soft_deadline: float,
    run_end: float,
    clock: Callable[[], float],
    notify: Callable[[], None] = lambda: None,
) -> None:
    """Run one level: ``concurrency`` workers, each sending requests back to back."""

    def worker() -> None:
        while (index := state.claim(clock(), soft_deadline)) is not None:
            state.record(client.stream(make(index), run_end))
            notify()

    threads = [
        threading.Thread(target=worker, daemon=True, name=f"bench-{i}") for i in range(concurrency)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=max(0.0, run_end - clock()) + JOIN_GRACE_SECONDS)
    with state.lock:
        state.closed = True  # a worker still stuck past the bound sends nothing more


def _report(
    config: BenchConfig,
    base_url: str,
    model: str,
    prompt: PromptInfo,
    levels: Sequence[LevelStats],
    stop: str,
    skipped: tuple[int, ...],
) -> BenchReport:
    single = next((lv.decode_tokens_per_second for lv in levels if lv.concurrency == 1), None)
    return BenchReport(
        url=base_url,
        model=model,
        endpoint=config.endpoint,
        input_tokens=config.input_tokens,
        output_tokens=config.output_tokens,
        prompt=prompt,
        levels=tuple(levels),
        single_stream_decode_tokens_per_second=single,
        decode=decode_report(config.predicted, single, config.no_ceiling_reason),
        stop_reason=stop,
        failed=sum(lv.failed for lv in levels),
        skipped_concurrency=skipped,
    )


def decode_report(
    predicted: DecodeSpeed | None, measured: float | None, reason: str
) -> DecodeReport:
    """The decode section: measured over the plan's ceiling and expected, or why not."""
    if predicted is None:
        return DecodeReport(measured, None, None, None, reason)
    if measured is None:
        note = "no single-stream measurement (concurrency 1 was not run or failed)"
        return DecodeReport(None, predicted, None, None, note)
    return DecodeReport(
        measured,
        predicted,
        measured / predicted.ceiling_tokens_per_s,
        measured / predicted.expected_tokens_per_s,
    )
