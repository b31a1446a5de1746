"""Table-driven planning over real architectures (configs written from public facts)."""

from __future__ import annotations

import pytest

from bringup.core.plan import parse_architecture
from bringup.core.plan.kv import kv_spec, request_bytes, tokens_in
from bringup.core.plan.peaks import activation_peak_bytes, sampler_warmup_bytes
from bringup.core.plan.quant import format_from_config
from bringup.core.plan.synth import synthesize
from bringup.core.plan.weights import Parallel, weights_per_stage
from plan.helpers import GiB, bundled_config, plan, planner_for

# model, tp, expected KV bytes per token per rank (from the public architecture numbers)
KV_BYTES = [
    ("Llama-3.1-8B", 1, 2 * 32 * 8 * 128 * 2),  # 131,072: the 128 KiB/token of engines.md 1.6
    ("Llama-3.1-8B", 2, 2 * 32 * 4 * 128 * 2),
    ("Llama-3.1-70B", 8, 2 * 80 * 1 * 128 * 2),
    (
        "Llama-3.1-70B",
        16,
        2 * 80 * 1 * 128 * 2,
    ),  # tp > kv heads: heads replicated, no further split
    ("Qwen3-8B", 1, 2 * 36 * 8 * 128 * 2),
    ("Qwen3-32B", 2, 2 * 64 * 4 * 128 * 2),
    ("Mixtral-8x7B", 2, 2 * 32 * 4 * 128 * 2),
    ("Qwen3-30B-A3B", 4, 2 * 48 * 1 * 128 * 2),
    ("Qwen3-235B-A22B", 4, 2 * 94 * 1 * 128 * 2),  # 48,128
    ("MiniMax-M2.5", 4, 2 * 62 * 2 * 128 * 2),
    ("DeepSeek-V3", 8, 61 * 576 * 2),  # MLA latent replicated: 1,152 B/layer, same at any tp
    ("DeepSeek-V3", 1, 61 * 576 * 2),
    ("Kimi-K2", 8, 61 * 576 * 2),
    ("gpt-oss-120b", 1, 2 * 36 * 8 * 64 * 2),
    ("gemma-2-9b", 1, 2 * 42 * 8 * 256 * 2),
    ("gemma-3-27b", 2, 2 * 62 * 8 * 128 * 2),
]


@pytest.mark.parametrize(("name", "tp", "expected"), KV_BYTES)
def test_kv_bytes_per_token(name: str, tp: int, expected: int) -> None:
    """KV bytes per token per rank follow GQA replication and MLA's replicated latent."""
    arch = parse_architecture(bundled_config(name))
    assert kv_spec(arch, (0, arch.num_layers), tp, "auto").bytes_per_token == expected


def test_fp8_kv_halves_bytes_and_ds_mla_is_656() -> None:
    """--kv-cache-dtype fp8 halves bytes per token; fp8_ds_mla is a fixed 656 B per layer."""
    llama = parse_architecture(bundled_config("Llama-3.1-8B"))
    assert kv_spec(llama, (0, 32), 1, "fp8").bytes_per_token == 65_536
    ds = parse_architecture(bundled_config("DeepSeek-V3"))
    assert kv_spec(ds, (0, 61), 8, "fp8_ds_mla").bytes_per_token == 61 * 656


def test_sliding_window_layers_bound_a_request() -> None:
    """gpt-oss: half the layers keep only window + batch tokens, so a long request costs about half."""
    arch = parse_architecture(bundled_config("gpt-oss-120b"))
    assert arch.layer_kinds.count("sliding") == 18
    spec = kv_spec(arch, (0, 36), 1, "auto")
    full_only = 131_072 * spec.full_bytes_per_token
    assert full_only <= request_bytes(spec, 131_072, 8192) < full_only * 1.1


def test_gemma3_pattern_has_one_global_layer_in_six() -> None:
    """Gemma-3's sliding_window_pattern 6 makes every sixth layer global."""
    arch = parse_architecture(bundled_config("gemma-3-27b"))
    assert arch.layer_kinds.count("full") == 10
    assert arch.sliding_window == 1024


# model, quantization override, tp, expert parallel, expected weights per GPU (GiB), tolerance
WEIGHTS = [
    ("Llama-3.1-8B", None, 1, False, 14.96, 0.01),  # 8.03e9 params x 2 B
    ("Llama-3.1-70B", None, 4, False, 32.87, 0.01),
    ("Qwen3-30B-A3B", None, 4, False, 14.24, 0.01),
    ("MiniMax-M2.5", None, 4, False, 53.63, 0.01),  # the "57.5 GB" per GPU, in GiB
    ("MiniMax-M2.5", None, 4, True, 53.63, 0.01),  # 256 experts / 4: EP gives the same share
    ("Mixtral-8x7B", None, 2, False, 43.50, 0.01),
    ("DeepSeek-V3", None, 8, False, 78.9, 0.02),
    ("Llama-3.1-8B-AWQ", None, 1, False, 5.37, 0.03),
    ("Qwen3-8B-FP8", None, 1, False, 8.79, 0.02),
]


@pytest.mark.parametrize(("name", "quant", "tp", "ep", "expected_gib", "tol"), WEIGHTS)
def test_weights_per_gpu(
    name: str, quant: str | None, tp: int, ep: bool, expected_gib: float, tol: float
) -> None:
    """Weights per GPU match the hand calculation from the public architecture."""
    p = plan(
        name,
        "H200",
        max(tp, 1),
        tensor_parallel_size=tp,
        enable_expert_parallel=ep,
        quantization=quant,
    )
    assert p.per_gpu.weights_bytes / GiB == pytest.approx(expected_gib, rel=tol)


def test_kv_heads_replicate_in_weights_beyond_kv_heads() -> None:
    """At tp 16 on Llama-70B (8 KV heads) each rank keeps a whole K/V head: k/v bytes do not halve."""
    arch = parse_architecture(bundled_config("Llama-3.1-70B"))
    tensors = synthesize(arch, format_from_config(None, None))
    kv_only = [t for t in tensors if ".k_proj." in t.name or ".v_proj." in t.name]
    at8 = weights_per_stage(kv_only, arch, Parallel(8))[0].total_bytes
    at16 = weights_per_stage(kv_only, arch, Parallel(16))[0].total_bytes
    assert at8 == at16


def test_pipeline_parallel_splits_layers_and_puts_vocab_at_the_ends() -> None:
    """PP 2: each stage holds half the layers, the embedding on the first and the LM head on the last."""
    arch = parse_architecture(bundled_config("Llama-3.1-8B"))
    stages = weights_per_stage(
        synthesize(arch, format_from_config(None, None)), arch, Parallel(1, 2)
    )
    assert [s.layers for s in stages] == [(0, 16), (16, 32)]
    assert stages[0].vocab_bytes == stages[1].vocab_bytes == 128_256 * 4096 * 2


def test_mtp_layers_are_not_counted() -> None:
    """A tensor of layer num_hidden_layers (DeepSeek's MTP head) does not add to the weights."""
    arch = parse_architecture(bundled_config("Llama-3.1-8B"))
    tensors = synthesize(arch, format_from_config(None, None))
    from bringup.core.checkpoint import TensorInfo

    extra = [
        *tensors,
        TensorInfo(
            "model.layers.32.mlp.up_proj.weight", "BF16", (14336, 4096), 14336 * 4096 * 2, "x"
        ),
    ]
    assert weights_per_stage(extra, arch, Parallel(1)) == weights_per_stage(
        tensors, arch, Parallel(1)
    )


# name, gpu, count, settings, expected (fits, class, phase)
VERDICTS = [
    ("Llama-3.1-8B", "H100", 1, {}, (True, None, None)),
    ("Llama-3.1-70B", "H100", 1, {}, (False, "cuda_oom", "weights_loading")),
    ("Llama-3.1-70B", "H100", 4, {"tensor_parallel_size": 4}, (True, None, None)),
    ("Llama-3.1-8B", "RTX 4090", 1, {}, (False, "kv_cache_insufficient", "kv_cache_alloc")),
    ("Llama-3.1-8B", "RTX 4090", 1, {"max_model_len": 8192}, (True, None, None)),
    (
        "Llama-3.1-8B",
        "H100",
        1,
        {"free_bytes": 40 * GiB},
        (False, "gpu_memory_utilization", "distributed_init"),
    ),
    ("Qwen3-32B", "H100", 2, {"tensor_parallel_size": 3}, (False, "config_error", "config")),
    ("Qwen3-32B", "H100", 2, {"tensor_parallel_size": 4}, (False, "config_error", "config")),
    ("DeepSeek-V3", "H200", 8, {"tensor_parallel_size": 8}, (True, None, None)),
    ("gpt-oss-120b", "H100", 1, {"max_model_len": 32768}, (True, None, None)),
    (
        "MiniMax-M2.5",
        "RTX PRO 6000",
        4,
        {"tensor_parallel_size": 4, "gpu_memory_utilization": 0.95},
        (True, None, None),
    ),
    (
        "MiniMax-M2.5",
        "RTX PRO 6000",
        4,
        {"tensor_parallel_size": 4, "gpu_memory_utilization": 0.97},
        (False, "cuda_oom", "warmup"),
    ),
    (
        "MiniMax-M2.5",
        "RTX PRO 6000",
        4,
        {"tensor_parallel_size": 4, "engine_version": "0.20", "gpu_memory_utilization": 0.95},
        (True, None, None),
    ),
    (
        "MiniMax-M2.5",
        "RTX PRO 6000",
        4,
        {"tensor_parallel_size": 4, "engine_version": "0.20", "gpu_memory_utilization": 0.97},
        (False, "cuda_oom", "warmup"),
    ),
]


@pytest.mark.parametrize(("name", "gpu", "count", "settings", "expected"), VERDICTS)
def test_verdicts(
    name: str,
    gpu: str,
    count: int,
    settings: dict[str, object],
    expected: tuple[bool, str | None, str | None],
) -> None:
    """Each case predicts the right first failure (or fits) in diagnose's vocabulary."""
    v = plan(name, gpu, count, **settings).verdict
    assert (v.fits, v.failure_class, v.phase) == expected


def test_parts_add_up_to_the_gpu() -> None:
    """The per-GPU parts of a plan sum to the GPU's total memory."""
    g = plan("MiniMax-M2.5", "RTX PRO 6000", 4, tensor_parallel_size=4).per_gpu
    parts = (
        g.weights_bytes
        + g.activation_peak_bytes
        + g.non_torch_bytes
        + g.cuda_graph_bytes
        + g.kv_cache_bytes
        + g.sampler_warmup_bytes
        + g.headroom_bytes
    )
    assert parts == g.total_bytes


def test_tokens_follow_the_pool() -> None:
    """KV tokens are whole blocks of the pool divided by bytes per token."""
    planner, s = planner_for(bundled_config("Llama-3.1-8B"), "H100", 1)
    o = planner.evaluate(s)
    assert tokens_in(o.rank.spec, o.rank.kv) == o.rank.kv // (131_072 * 16) * 16


def test_sampler_warmup_beyond_the_profile_follows_the_model_runner() -> None:
    """V1 runner and V0: the warmup repeats the profile's sampler pass (0 beyond it); V2:
    min(max_num_seqs, max_num_batched_tokens) x padded vocab x 12 bytes beyond it."""
    arch = parse_architecture(bundled_config("MiniMax-M2.5"))
    assert sampler_warmup_bytes(arch, 1024, 8192, "v1") == 0
    assert sampler_warmup_bytes(arch, 1024, 8192, "v0") == 0
    assert sampler_warmup_bytes(arch, 1024, 8192, "v2") == 1024 * 200_064 * 12
    assert sampler_warmup_bytes(arch, 1024, 512, "v2") == 512 * 200_064 * 12


def test_profile_peak_holds_the_v1_sampler_pass_and_only_v2_logits() -> None:
    """The V1 runner's profile peak holds its 28-byte sampler pass; V2's holds the logits."""
    arch = parse_architecture(bundled_config("MiniMax-M2.5"))
    v1 = activation_peak_bytes(arch, 4, 1024, 8192, runner="v1")
    v2 = activation_peak_bytes(arch, 4, 1024, 8192, runner="v2")
    assert v1 >= 1024 * 200_064 * 28
    assert 1024 * 200_064 * 2 <= v2 < 1024 * 200_064 * 28


def test_graphs_outside_the_budget_starve_the_v1_sampler_warmup() -> None:
    """Before 0.21 the graph pool is captured outside the budget, into the room the profile
    kept for the sampler pass: the warmup is what fails, by the graphs' excess."""
    p = plan(
        "MiniMax-M2.5",
        "RTX PRO 6000",
        4,
        tensor_parallel_size=4,
        engine_version="0.20",
        gpu_memory_utilization=0.97,
    )
    assert p.settings.model_runner == "v1"
    assert p.per_gpu.sampler_warmup_bytes == 0
    assert p.per_gpu.headroom_bytes < 0
    assert "CUDA graphs" in p.verdict.reason
