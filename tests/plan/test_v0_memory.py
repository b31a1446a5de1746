"""The V0 engine's memory model per release (core/plan/peaks.py and settings.py docstrings):
the profile peak is the larger of the forward and the sampler, with no kernel workspace, and
where the non-torch baseline is read decides whether the CUDA context is in the budget."""

from __future__ import annotations

from typing import Any

import pytest

from bringup.core.plan import peaks
from bringup.core.plan.activation import forward_peak_bytes
from bringup.core.plan.arch import parse_architecture
from bringup.core.plan.budget import RankBudget
from bringup.core.plan.settings import parse_release, rules_version, whole_device_in_budget
from plan.helpers import GiB, planner_for

CONFIG = {  # a small Llama-shaped config, written here
    "architectures": ["LlamaForCausalLM"],
    "num_hidden_layers": 16,
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "intermediate_size": 8192,
    "vocab_size": 64000,
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
}


def _rank(version: str, gpus: int = 1, **req: Any) -> RankBudget:
    planner, s = planner_for(
        CONFIG, "RTX 3090", gpus, engine_version=version, tensor_parallel_size=gpus, **req
    )
    return planner.evaluate(s).rank


@pytest.mark.parametrize(
    ("text", "release", "rules"),
    [
        ("0.6.4.post1", (0, 6, 4), "0.6.4"),
        ("v0.5.5", (0, 5, 5), "0.5.5"),
        ("0.6", (0, 6, 0), "0.6.0"),
        ("0.8.0rc3.dev5+g5eeabc2a", (0, 8, 0), "0.8"),
        ("0.11.1rc3.dev29+g3fa2c1218", (0, 11, 1), "0.11"),
    ],
)
def test_release_and_the_part_the_rules_read(
    text: str, release: tuple[int, int, int], rules: str
) -> None:
    assert parse_release(text) == release
    assert rules_version(text) == rules


def test_only_0_6_4_charges_the_whole_device_among_v0_releases() -> None:
    """0.5.0-0.6.3 (init_gpu_memory) and 0.6.5 on (the baseline snapshot) read the baseline
    after the CUDA context; 0.6.4 counted all non-torch memory; V1 before 0.9 did too."""
    releases = [(0, 5, 0), (0, 6, 3), (0, 6, 4), (0, 6, 5), (0, 9, 2)]
    v0 = {r: whole_device_in_budget(r, v0_engine=True) for r in releases}
    assert v0 == {
        (0, 5, 0): False,
        (0, 6, 3): False,
        (0, 6, 4): True,
        (0, 6, 5): False,
        (0, 9, 2): False,
    }
    assert whole_device_in_budget((0, 8, 5), v0_engine=False)
    assert not whole_device_in_budget((0, 9, 0), v0_engine=False)


def test_v0_sampler_bytes_follow_the_sampler_code_of_each_release() -> None:
    """No fp32 copy before 0.5.5; an inverse-permutation gather until 0.6.1; a scatter after."""
    got = [
        peaks.v0_sampler_bytes_per_element(r)
        for r in [(0, 5, 0), (0, 5, 4), (0, 5, 5), (0, 6, 1), (0, 6, 2), (0, 8, 5)]
    ]
    assert got == [30, 30, 40, 40, 38, 38]


def test_v0_peak_is_the_larger_of_forward_and_sampler_without_workspace() -> None:
    arch = parse_architecture(CONFIG)
    vocab = peaks.padded_vocab(arch)
    release = (0, 6, 4)
    long_prompt = 20_000  # the forward's layer peak is above the sampler's
    forward = forward_peak_bytes(arch, 1, long_prompt)
    assert peaks.activation_peak_bytes(arch, 1, 256, long_prompt, runner="v0", release=release) == (
        forward
    )
    short = 512  # chunked prefill: the sampler over 256 rows is the peak
    sampler = short * 2048 * 2 + 256 * vocab * 38
    assert sampler > forward_peak_bytes(arch, 1, short)
    assert peaks.activation_peak_bytes(arch, 1, 256, short, runner="v0", release=release) == (
        sampler
    )
    # a stage that does not sample holds the forward only
    assert peaks.activation_peak_bytes(
        arch, 1, 256, short, runner="v0", release=release, last_stage=False
    ) == forward_peak_bytes(arch, 1, short)


def test_the_v1_runner_keeps_its_rule() -> None:
    """The V1 runner's peak is unchanged: forward + logits (or the sampler) + workspace."""
    arch = parse_architecture(CONFIG)
    rows = 256 * peaks.padded_vocab(arch)
    t = 8192
    forward = forward_peak_bytes(arch, 1, t)
    assert (
        peaks.activation_peak_bytes(arch, 1, 256, t, runner="v1")
        == max(forward + rows * 6, rows * 28) + peaks.KERNEL_WORKSPACE_BYTES
    )


def test_the_cuda_context_is_in_the_budget_in_0_6_4_only() -> None:
    """Same GPU, same settings: 0.6.3 and 0.6.5 leave the context out of the budget, 0.6.4
    charges it, so 0.6.4 has exactly the context less KV (activations are the same)."""
    kv = {v: _rank(v, max_model_len=8192) for v in ("0.6.3", "0.6.4", "0.6.5")}
    assert kv["0.6.3"].activation == kv["0.6.4"].activation == kv["0.6.5"].activation
    assert kv["0.6.3"].kv == kv["0.6.5"].kv
    assert kv["0.6.3"].kv - kv["0.6.4"].kv == peaks.CUDA_CONTEXT_BYTES
    assert kv["0.6.3"].context == peaks.CUDA_CONTEXT_BYTES
    assert kv["0.6.4"].context == 0


def test_v0_charges_nccl_but_not_the_context_with_tensor_parallelism() -> None:
    """The V0 baseline is read before distributed init: NCCL is inside the budget."""
    out, whole = _rank("0.7", 2, max_model_len=8192), _rank("0.6.4", 2, max_model_len=8192)
    assert out.non_torch_in_budget == whole.non_torch_in_budget - peaks.CUDA_CONTEXT_BYTES
    assert out.non_torch_in_budget >= peaks.nccl_bytes(2) > 0


def test_v0_does_not_check_free_memory_and_leaves_other_processes_out() -> None:
    """Another process holds 1 GiB: V0 0.7 starts with the same KV pool (others are outside
    its budget) and 0.6.4 charges them to the pool. With 3 GiB held (more than the 10 % left
    outside the budget) V1 0.9 refuses at start and V0 0.7 runs out of memory allocating the
    pool."""
    total = planner_for(CONFIG, "RTX 3090", 1)[0].gpus.total_bytes
    v07 = _rank("0.7", max_model_len=8192)
    v07_taken = _rank("0.7", max_model_len=8192, free_bytes=total - GiB)
    assert v07_taken.kv == v07.kv
    assert v07_taken.context == v07.context + GiB
    v064 = _rank("0.6.4", max_model_len=8192)
    v064_taken = _rank("0.6.4", max_model_len=8192, free_bytes=total - GiB)
    assert v064.kv - v064_taken.kv == GiB
    assert _failure("0.7", total - GiB) is None
    refused = _failure("0.9", total - 3 * GiB)
    assert refused is not None
    assert refused.failure_class == "gpu_memory_utilization"
    oom = _failure("0.7", total - 3 * GiB)
    assert oom is not None
    assert (oom.failure_class, oom.phase) == ("cuda_oom", "kv_cache_alloc")


def _failure(version: str, free: int) -> Any:
    planner, s = planner_for(
        CONFIG, "RTX 3090", 1, engine_version=version, max_model_len=8192, free_bytes=free
    )
    return planner.evaluate(s).failure
