"""Which failures a later line may refine, and what that means live.

A pack names, per signature, the failures its line explains when it comes shortly after them
(``Signature.refines``: the sampler-warmup line after the torch OOM). Only a failure something
may refine is offered as tentative (the live follower holds it for its grace); every other
final failure is the verdict at its line. Live and whole-log reading must still agree: checked
on every recorded fixture and, when it is there, on the real-log corpus.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bringup.core import logline, packs
from bringup.core.analyzer import LogAnalyzer, diagnose_bytes
from bringup.core.diagnosis import Failure, FailureEvent
from bringup.core.packs.types import Pack
from bringup.core.vocab import Engine, FailureClass

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
CORPUS = Path(os.environ.get("BRINGUP_CORPUS", "/work/shared/corpus/logs"))
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")

H = "(APIServer pid=1) INFO 05-01 10:00:00 [api_server.py:1] vLLM API server version 0.11.0"
E = "(EngineCore_DP0 pid=20) ERROR 05-01 10:00:03 [core.py:7] "
W = "(Worker_TP0 pid=30) ERROR 05-01 10:00:05 [multiproc_executor.py:8] "
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.29 GiB. GPU 0 has a "
    "total capacity of 95.00 GiB of which 1.00 GiB is free."
)


def _failure_events(lines: list[str]) -> list[tuple[int, bool, FailureClass]]:
    analyzer = LogAnalyzer()
    seen = []
    for line in lines:
        seen += [
            (e.failure.line_number, e.tentative, e.failure.failure_class)
            for e in analyzer.feed(line)
            if isinstance(e, FailureEvent)
        ]
    return seen


@pytest.mark.parametrize(
    "line",
    [
        (
            "ValueError: User-specified max_model_len (999999) is greater than the derived "
            "max_model_len (max_position_embeddings=2048 or model_max_length=None in model's "
            "config.json)."
        ),
        "RuntimeError: Not enough allowed NUMA nodes to bind threads of 2 local CPUWorkers",
        "ValueError: Model architectures ['FooForCausalLM'] are not supported for now.",
        "api_server.py: error: argument --max-num-seqs: invalid int value: 'x'",
    ],
)
def test_a_config_error_nothing_refines_is_the_verdict_at_its_line(line: str) -> None:
    """The broad rule held every vLLM config error for the grace, because one config_error
    signature (CPU thread binding) had a higher priority; none of them refines another."""
    assert _failure_events([H, E + line]) == [(2, False, FailureClass.CONFIG_ERROR)]


def test_a_torch_oom_the_sampler_line_may_refine_is_tentative_then_refined() -> None:
    lines = [
        H,
        W + OOM,
        W + "RuntimeError: CUDA out of memory occurred when warming up sampler "
        "with 1024 dummy requests. Please try lowering `max_num_seqs`.",
    ]
    assert _failure_events(lines) == [
        (2, True, FailureClass.CUDA_OOM),
        (3, False, FailureClass.CUDA_OOM),
    ]
    assert _failure_events(lines[:2]) == [(2, True, FailureClass.CUDA_OOM)]
    d = diagnose_bytes("\n".join(lines).encode())
    assert d.failure is not None
    assert "warming up sampler" in d.failure.line


def test_a_higher_priority_line_the_pack_does_not_name_refines_nothing() -> None:
    """Profiling saw memory change, then a free-memory line of the same class and a higher
    priority: not a refinement the pack names, so the first cause stands, live and whole."""
    lines = [
        H,
        E + "ValueError: Error in memory profiling. Initial free memory 70.0 GiB, current free "
        "memory 60.0 GiB. This happens when other processes sharing the same container release "
        "GPU memory while vLLM is profiling during initialization.",
        E + "ValueError: Free memory on device cuda:0 (1.0/95.0 GiB) on startup is less than "
        "desired GPU memory utilization (0.9, 85.5 GiB).",
    ]
    assert _failure_events(lines) == [(2, False, FailureClass.GPU_MEMORY_UTILIZATION)]
    d = diagnose_bytes("\n".join(lines).encode())
    assert d.failure is not None
    assert d.failure.line_number == 2


def test_llamacpp_kv_line_refines_the_cuda_malloc_before_it() -> None:
    lines = [
        "build: 4000 (abcdef) with cc for x86_64-linux-gnu",
        (
            "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 0: "
            "cudaMalloc failed: out of memory"
        ),
        "llama_kv_cache_init: failed to allocate buffer for kv cache",
    ]
    assert _failure_events(lines) == [
        (2, True, FailureClass.CUDA_OOM),
        (3, False, FailureClass.CUDA_OOM),
    ]


def _resolve(pack: Pack, refiner_owner: Engine | None, name: str) -> list:
    return [
        s
        for s in pack.signatures
        if s.name == name and (s.owner is None or s.owner is refiner_owner)
    ]


@pytest.mark.parametrize(
    "pack",
    [*packs.all_packs(), packs.generic()],
    ids=lambda p: p.engine.value if p.engine else "generic",
)
def test_every_named_refinement_is_one_signature_of_the_same_class(pack: Pack) -> None:
    """A name in ``refines`` means one signature where the refiner is read (an engine's own
    pack, or the generic one), of the refiner's class; a wrapper never refines (it is no
    final cause), and nothing refines itself."""
    declared = 0
    for sig in pack.signatures:
        for name in sig.refines:
            found = _resolve(pack, sig.owner, name)
            if pack.engine is None and not found:
                continue  # another engine's name: that engine's pack checks it
            assert len(found) == 1, (pack.engine, sig.name, name, found)
            (target,) = found
            assert target.failure_class is sig.failure_class, (sig.name, name)
            assert not sig.is_wrapper
            assert target is not sig
            declared += 1
    if pack.engine in (Engine.VLLM, Engine.SGLANG, Engine.TGI, Engine.LLAMACPP, None):
        assert declared, pack.engine  # each Python engine's OOM line explains a torch OOM


def _logs() -> list[Path]:
    found = sorted(LOGS.rglob("*.log"))
    if CORPUS.is_dir():
        found += sorted(CORPUS.rglob("*.log"))
    return found


def _live_agrees(data: bytes) -> list[str]:
    """Where a final, not tentative startup failure (what a live follower stops at) is later
    replaced in the same attempt. A chained traceback (``During handling of the above
    exception``) is the one known case: the exception raised last replaces the one before
    it, of the same class; a live follower names the first."""
    analyzer = LogAnalyzer()
    live: dict[int, Failure] = {}
    chained_after: dict[int, bool] = {}
    problems = []
    for number, line in enumerate(logline.iter_lines(data), start=1):
        events = analyzer.feed_numbered(number, line)
        attempt = analyzer.attempt
        if attempt in live and any(c in line for c in _CHAINED):
            chained_after[attempt] = True
        for e in events:
            if not isinstance(e, FailureEvent) or e.failure is analyzer.runtime_failure:
                continue
            first = live.get(attempt)
            if first is None:
                if e.failure.is_final and not e.tentative:
                    live[attempt] = e.failure
            elif e.failure.line_number != first.line_number:  # a replay names the same line
                same_class = e.failure.failure_class is first.failure_class
                if not (chained_after.get(attempt) and same_class):
                    problems.append(f"line {first.line_number} replaced by {e.failure.line_number}")
    return problems


def test_a_failure_given_as_final_is_never_replaced_later() -> None:
    """Every fixture log and every real corpus log (read in place when it is there): a live
    follower stops at the first final, not tentative failure; the whole log must not name
    another line for that start."""
    logs = _logs()
    assert len(logs) > 50
    bad = {p.name: got for p in logs if (got := _live_agrees(p.read_bytes()))}
    assert bad == {}
