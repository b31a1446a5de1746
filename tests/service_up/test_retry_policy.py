"""The retry policy: which change follows which failure, and when nothing is retried."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bringup.core import retry_policy
from bringup.core.analyzer import LogAnalyzer
from bringup.core.diagnosis import Failure, Remedy
from bringup.core.packs import vllm as vllm_pack
from bringup.core.plan.result import Recommendation, Verdict
from bringup.core.retry_policy import Change, decide
from bringup.core.vocab import FailureClass, Phase
from plan.helpers import plan

P = "(EngineCore_DP0 pid=41) ERROR 11-30 10:00:01 [core.py:700] "
SAMPLER_OOM = [
    "(EngineCore_DP0 pid=41) INFO 11-30 10:00:00 [gpu_model_runner.py:2000] Graph capturing finished in 5 secs, took 0.50 GiB",
    P
    + "RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests. "
    "Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.",
]
KV_SHORT = [
    P
    + "ValueError: To serve at least one request with the models's max seq len (196608), (22.50 GiB KV cache is needed, "
    "which is larger than the available KV cache memory (10.25 GiB). Based on the available memory, the estimated "
    "maximum model length is 89568. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
]
FREE_MEMORY = [
    # the model's size is known (8B in bf16, ~15 GiB): asking for what is free can work
    "(APIServer pid=40) INFO 11-30 10:00:00 [utils.py:200] non-default args: {'model': 'Qwen/Qwen3-8B'}",
    P
    + "ValueError: Free memory on device cuda:0 (20.5/79.19 GiB) on startup is less than desired GPU memory "
    "utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
]
VLLM_PACK = vllm_pack.PACK
VLLM = ["vllm", "serve", "MiniMaxAI/MiniMax-M2.5", "--port", "8000"]


def failure_of(lines: list[str]) -> Failure:
    analyzer = LogAnalyzer(None)
    for line in lines:
        analyzer.feed(line)
    failure = analyzer.finish(1).failure
    assert failure is not None
    return failure


def graph_oom() -> Failure:
    return Failure(
        FailureClass.CUDA_OOM,
        Phase.CUDA_GRAPH_CAPTURE,
        "torch.OutOfMemoryError: CUDA out of memory.",
        9,
        "The GPU ran out of memory.",
        (
            Remedy("Lower it.", "--gpu-memory-utilization", "0.85"),
            Remedy("Skip graphs.", "--enforce-eager"),
        ),
    )


def test_sampler_oom_lowers_max_num_seqs_to_the_pack_value():
    """A sampler warmup OOM sets --max-num-seqs to the pack's remedy value, with a one-line reason."""
    d = decide(failure_of(SAMPLER_OOM), VLLM, pack=VLLM_PACK)
    assert d.change is not None
    assert (d.change.flag, d.change.value) == ("--max-num-seqs", "256")
    assert "from 1024 to 256" in d.reason
    assert "\n" not in d.reason
    assert retry_policy.apply(VLLM, d.change) == [*VLLM, "--max-num-seqs", "256"]


def test_sampler_oom_prefers_the_plan_value():
    """With a plan, --max-num-seqs goes to what the plan says fits, and the reason is the
    plan's arithmetic for its model runner (not the log's guess)."""
    p = plan("MiniMax-M2.5", "RTX PRO 6000", 4, tensor_parallel_size=4, gpu_memory_utilization=0.97)
    value = next(r.value for r in p.recommendations if r.flag == "--max-num-seqs")
    d = decide(failure_of(SAMPLER_OOM), VLLM, plan=p, pack=VLLM_PACK)
    assert d.change is not None
    assert d.change.value == value
    assert f"from 1024 to {value}" in d.reason
    assert "V2 model runner" in d.reason
    assert "1024 dummy requests x 200,064 vocabulary x 12 B" in d.reason
    assert "\n" not in d.reason


def test_sampler_oom_takes_a_plan_value_with_no_warmup_reason():
    """A plan recommending --max-num-seqs for another failure still gives its value."""
    fake = type(
        "FakePlan",
        (),
        {
            "recommendations": (Recommendation("--max-num-seqs", "384", "fits"),),
            "verdict": Verdict(False, FailureClass.CUDA_OOM, Phase.CUDA_GRAPH_CAPTURE, "graphs"),
        },
    )()
    d = decide(failure_of(SAMPLER_OOM), VLLM, plan=fake, pack=VLLM_PACK)  # type: ignore[arg-type]
    assert d.change is not None
    assert d.change.value == "384"
    assert "the plan says this fits" in d.reason


def test_sampler_oom_again_halves_instead_of_repeating():
    """The same change is never made twice: a second sampler OOM at 256 halves to 128."""
    first = decide(failure_of(SAMPLER_OOM), VLLM, pack=VLLM_PACK).change
    assert first is not None
    argv = retry_policy.apply(VLLM, first)
    second = decide(failure_of(SAMPLER_OOM), argv, history=[first], pack=VLLM_PACK).change
    assert second is not None
    assert (second.flag, second.value) == ("--max-num-seqs", "128")


def test_graph_capture_oom_lowers_utilization_then_enforce_eager_last():
    """Graph-capture OOM: 0.9 -> 0.85 -> 0.8, then --enforce-eager, then nothing more."""
    argv, history, seen = list(VLLM), [], []
    while (d := decide(graph_oom(), argv, history=history, pack=VLLM_PACK)).change is not None:
        history.append(d.change)
        argv = retry_policy.apply(argv, d.change)
        seen.append((d.change.flag, d.change.value))
    assert seen == [
        ("--gpu-memory-utilization", "0.85"),
        ("--gpu-memory-utilization", "0.8"),
        ("--enforce-eager", None),
    ]
    assert argv[-1] == "--enforce-eager"
    assert "already tried" in d.reason


def test_kv_insufficient_sets_max_model_len_from_the_estimate():
    """kv_cache_insufficient sets --max-model-len to the estimate the log gives."""
    d = decide(failure_of(KV_SHORT), [*VLLM, "--max-model-len", "196608"], pack=VLLM_PACK)
    assert d.change is not None
    assert (d.change.flag, d.change.value) == ("--max-model-len", "89568")
    assert retry_policy.apply([*VLLM, "--max-model-len", "196608"], d.change)[-1] == "89568"


def test_memory_taken_waits_first_then_lowers_utilization():
    """gpu_memory_utilization: wait for the GPUs first; without a way to wait, lower the utilization."""
    failure = failure_of(FREE_MEMORY)
    wait = decide(failure, VLLM, pack=VLLM_PACK).change
    assert wait is not None
    assert wait.wait_for_gpus
    assert wait.flag is None
    assert retry_policy.apply(VLLM, wait) == VLLM
    lower = decide(failure, VLLM, history=[wait], pack=VLLM_PACK).change
    assert lower is not None
    assert lower.flag == "--gpu-memory-utilization"
    assert float(lower.value or 0) < 0.26
    no_wait = decide(failure, VLLM, can_wait=False, pack=VLLM_PACK).change
    assert no_wait is not None
    assert no_wait.flag == "--gpu-memory-utilization"


@pytest.mark.parametrize(
    "cls",
    [
        FailureClass.CONFIG_ERROR,
        FailureClass.MISSING_OR_CORRUPT_WEIGHTS,
        FailureClass.UNSUPPORTED_HARDWARE,
    ],
)
def test_not_retryable_classes_are_never_retried(cls):
    """config_error, missing_or_corrupt_weights and unsupported_hardware are never retried, even with a flag remedy."""
    failure = Failure(
        cls,
        Phase.CONFIG,
        "error: argument --foo",
        3,
        "bad",
        (Remedy("Set it.", "--max-model-len", "4096"),),
    )
    d = decide(failure, VLLM, pack=VLLM_PACK)
    assert d.change is None
    assert str(cls) in d.reason


def test_unsafe_remedies_are_not_applied():
    """A port clash is not moved to another port, and NCCL env remedies are not applied on their own."""
    port = Failure(
        FailureClass.PORT_IN_USE,
        Phase.START,
        "[Errno 98] Address already in use",
        2,
        "taken",
        (Remedy("Or serve on another port.", "--port", "8001"),),
    )
    assert decide(port, VLLM, pack=VLLM_PACK).change is None
    nccl = Failure(
        FailureClass.NCCL_ERROR,
        Phase.DISTRIBUTED_INIT,
        "NCCL error",
        2,
        "nccl",
        (Remedy("Debug.", env="NCCL_DEBUG=INFO"),),
    )
    assert "no automatic change" in decide(nccl, VLLM, pack=VLLM_PACK).reason


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["graph", "sampler", "kv"]), min_size=1, max_size=8))
def test_never_the_same_change_twice(kinds):
    """Whatever sequence of failures arrives, no change is ever made twice."""
    failures = {
        "graph": graph_oom(),
        "sampler": failure_of(SAMPLER_OOM),
        "kv": failure_of(KV_SHORT),
    }
    argv, history = list(VLLM), []
    for kind in kinds:
        change = decide(failures[kind], argv, history=history, pack=VLLM_PACK).change
        if change is None:
            continue
        assert not any(change.same_as(h) for h in history)
        history.append(change)
        argv = retry_policy.apply(argv, change)


def test_change_identity_ignores_the_reason():
    """Two changes with the same flag and value are the same change."""
    assert Change("--x", "1", "a").same_as(Change("--x", "1", "b"))
    assert not Change("--x", "1", "a").same_as(Change("--x", "2", "a"))
