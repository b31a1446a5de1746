"""The motivating case: MiniMax-M2.5 FP8, TP4 on 4 x RTX PRO 6000 Blackwell (96 GB class).

Following vLLM 0.33's code (V2 model runner), 1024 warmup requests fit at 0.92 and 0.95 and
do not at 0.97 (``bringup.core.plan.peaks``)."""

from __future__ import annotations

from bringup.core.engine_args import set_flag
from plan.helpers import GiB, plan


def test_minimax_predicts_sampler_warmup_oom_and_a_fix() -> None:
    """With 1024 dummy sequences the sampler warmup does not fit; the recommended max_num_seqs does."""
    p = plan("MiniMax-M2.5", "RTX PRO 6000", 4, tensor_parallel_size=4, gpu_memory_utilization=0.97)
    assert p.settings.max_num_seqs == 1024  # vLLM's default on a >= 70 GiB GPU that is not an A100
    assert p.per_gpu.weights_bytes / GiB > 53
    assert p.settings.model_runner == "v2"  # vLLM 0.33
    assert p.per_gpu.sampler_warmup_bytes == 1024 * 200_064 * 12  # beyond the profile run
    assert (p.verdict.fits, p.verdict.failure_class, p.verdict.phase) == (
        False,
        "cuda_oom",
        "warmup",
    )
    seqs = next(r for r in p.recommendations if r.flag == "--max-num-seqs")
    assert 512 <= int(seqs.value or 0) < 1024
    fixed = plan(
        "MiniMax-M2.5",
        "RTX PRO 6000",
        4,
        tensor_parallel_size=4,
        gpu_memory_utilization=0.97,
        max_num_seqs=int(seqs.value or 0),
    )
    assert fixed.verdict.fits
    assert fixed.per_gpu.headroom_bytes >= 256 * 1024**2
    one_more = plan(
        "MiniMax-M2.5",
        "RTX PRO 6000",
        4,
        tensor_parallel_size=4,
        gpu_memory_utilization=0.97,
        max_num_seqs=int(seqs.value or 0) + 64,
    )
    assert one_more.per_gpu.headroom_bytes < 256 * 1024**2  # it is the largest such value


def test_minimax_recommended_utilization_fits() -> None:
    """The recommended --gpu-memory-utilization makes the same startup fit."""
    p = plan("MiniMax-M2.5", "RTX PRO 6000", 4, tensor_parallel_size=4, gpu_memory_utilization=0.97)
    util = next(r for r in p.recommendations if r.flag == "--gpu-memory-utilization")
    assert plan(
        "MiniMax-M2.5",
        "RTX PRO 6000",
        4,
        tensor_parallel_size=4,
        gpu_memory_utilization=float(util.value or 0),
    ).verdict.fits


def test_recommendation_applies_to_the_command() -> None:
    """A recommendation is a flag/value pair that set_flag puts into the server command."""
    p = plan("MiniMax-M2.5", "RTX PRO 6000", 4, tensor_parallel_size=4, gpu_memory_utilization=0.97)
    r = p.recommendations[0]
    argv = set_flag(["vllm", "serve", "MiniMaxAI/MiniMax-M2.5", "-tp", "4"], r.flag, r.value)
    assert argv[-2:] == [r.flag, r.value]


def test_minimax_fits_at_095_under_vllm_033() -> None:
    """At 0.95 the warmup's 2.29 GiB beyond the profile run fits in the 4 GiB outside the budget."""
    p = plan("MiniMax-M2.5", "RTX PRO 6000", 4, tensor_parallel_size=4, gpu_memory_utilization=0.95)
    assert p.verdict.fits
    assert p.per_gpu.headroom_bytes > 1 * GiB
