"""The sampler-warmup OOM in the plan's numbers, for the model runner the plan followed:
the verdict, the ``--max-num-seqs`` recommendation, the ``sampler_warmup`` object, and the
remedy diagnose's failure gets from the plan (``core.plan.remedy``)."""

from __future__ import annotations

from bringup.core.analyzer import LogAnalyzer
from bringup.core.diagnosis import Failure, Remedy
from bringup.core.plan.remedy import warmup_remedy, with_plan
from bringup.core.plan.result import Plan
from bringup.core.vocab import FailureClass, Phase
from plan.helpers import plan

V = 200_064  # MiniMax-M2.5's vocabulary, a multiple of 64 already
SAMPLER_OOM = (
    (
        "(Worker_TP1 pid=41) INFO 11-30 10:00:00 [gpu_model_runner.py:2000] Graph capturing "
        "finished in 5 secs, took 0.50 GiB"
    ),
    (
        "(Worker_TP1 pid=41) ERROR 11-30 10:00:01 [multiproc_executor.py:871] RuntimeError: CUDA "
        "out of memory occurred when warming up sampler with 1024 dummy requests. Please try "
        "lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine."
    ),
)


def minimax(version: str | None = None, **req: object) -> Plan:
    settings: dict[str, object] = {"gpu_memory_utilization": 0.97, **req}
    if version:
        settings["engine_version"] = version
    return plan("MiniMax-M2.5", "RTX PRO 6000", 4, tensor_parallel_size=4, **settings)


def diagnosed() -> Failure:
    analyzer = LogAnalyzer(None)
    for line in SAMPLER_OOM:
        analyzer.feed(line)
    failure = analyzer.finish(1).failure
    assert failure is not None
    assert (failure.failure_class, failure.phase) == (FailureClass.CUDA_OOM, Phase.WARMUP)
    return failure


def seqs(p: Plan) -> str:
    return next(r.value for r in p.recommendations if r.flag == "--max-num-seqs" and r.value)


def test_v2_runner_numbers_are_the_warmup_beyond_the_profile() -> None:
    """0.33 (V2 runner): 1024 x 200,064 x 12 B beyond the profile, outside the budget."""
    p = minimax()
    w = p.sampler_warmup
    assert w is not None
    assert (w.model_runner, w.requests, w.vocab_size) == ("v2", 1024, V)
    assert (w.extra_bytes_per_element, w.extra_bytes) == (12, 1024 * V * 12)
    assert w.extra_bytes == p.per_gpu.sampler_warmup_bytes
    assert (w.profile_bytes_per_element, w.profile_bytes) == (2, 1024 * V * 2)
    assert w.free_bytes == w.extra_bytes + p.per_gpu.headroom_bytes < w.extra_bytes
    assert "V2 model runner" in p.verdict.reason
    assert "1024 dummy requests x 200,064 vocabulary x 12 B = 2.29 GiB" in p.verdict.reason
    n = int(seqs(p))
    why = next(r.why for r in p.recommendations if r.flag == "--max-num-seqs")
    assert f"{n} dummy requests x 200,064 vocabulary x 12 B" in why


def test_v1_runner_numbers_are_the_profiles_pass_and_the_graphs() -> None:
    """0.20 (V1 runner): the warmup repeats the profile's 28 B pass inside the budget; graphs
    outside the budget are what starve it, and the recommendation says both."""
    p = minimax("0.20")
    w = p.sampler_warmup
    assert w is not None
    assert (w.model_runner, w.requests, w.vocab_size) == ("v1", 1024, V)
    assert (w.extra_bytes_per_element, w.extra_bytes) == (0, 0)
    assert (w.profile_bytes_per_element, w.profile_bytes) == (28, 1024 * V * 28)
    assert w.free_bytes == p.per_gpu.headroom_bytes < 0
    reason = p.verdict.reason
    assert "V1 model runner" in reason
    assert "V2" not in reason
    assert "1024 dummy requests x 200,064 vocabulary x 28 B = 5.34 GiB, inside the budget" in reason
    assert "CUDA graphs (2.18 GiB, captured outside the budget before 0.21)" in reason
    n = int(seqs(p))
    why = next(r.why for r in p.recommendations if r.flag == "--max-num-seqs")
    assert f"{n} dummy requests x 200,064 vocabulary x 28 B" in why
    assert "outside the budget" in why


def test_the_v0_engine_has_no_warmup_after_the_pool() -> None:
    p = minimax("0.8", use_v1=False)
    assert p.settings.model_runner == "v0"
    assert p.sampler_warmup is None


def test_remedy_from_the_plan_on_both_runners() -> None:
    """The remedy names the plan's value and its numbers, per runner; not the log's quarter."""
    for version, runner, per in ((None, "V2 model runner", "12 B"), ("0.20", "V1", "28 B")):
        p = minimax(version)
        remedy = warmup_remedy(p)
        assert remedy is not None
        value = seqs(p)
        assert (remedy.flag, remedy.value) == ("--max-num-seqs", value)
        assert remedy.text.startswith(f"Set --max-num-seqs {value}: ")
        assert runner in remedy.text
        assert f"1024 dummy requests x 200,064 vocabulary x {per}" in remedy.text
        assert f"{value} dummy requests x 200,064 vocabulary x {per}" in remedy.text
        assert "float32 logits" not in remedy.text


def test_no_plan_remedy_where_the_plan_predicts_no_warmup_oom() -> None:
    assert warmup_remedy(minimax(gpu_memory_utilization=0.95)) is None  # fits
    failure = diagnosed()
    assert with_plan(failure, minimax(gpu_memory_utilization=0.95)) == failure.remedy
    assert with_plan(failure, None) == failure.remedy


def test_with_plan_replaces_the_logs_guess_for_the_flag_only() -> None:
    """diagnose's own remedy quarters the log's 1024; with the plan, the plan's value and
    numbers take that place, and the other remedies stay."""
    failure = diagnosed()
    assert [r.value for r in failure.remedy if r.flag == "--max-num-seqs"] == ["256"]
    p = minimax()
    merged = with_plan(failure, p)
    assert merged[0] == warmup_remedy(p)
    assert [r.value for r in merged if r.flag == "--max-num-seqs"] == [seqs(p)]
    others = [r for r in failure.remedy if r.flag != "--max-num-seqs"]
    assert list(merged[1:]) == others
    assert others
    elsewhere = Failure(
        FailureClass.CUDA_OOM,
        Phase.CUDA_GRAPH_CAPTURE,
        "torch.OutOfMemoryError: CUDA out of memory.",
        1,
        "The GPU ran out of memory.",
        (Remedy("Lower it.", "--max-num-seqs", "512"),),
    )
    assert with_plan(elsewhere, p) == elsewhere.remedy
