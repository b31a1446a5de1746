"""vLLM's accounting per version (rules in core/plan/budget.py, settings.py, kv.py docstrings)."""

from __future__ import annotations

from bringup.core.plan import parse_architecture
from bringup.core.plan.kv import group_layout, kv_spec, reported_tokens
from bringup.core.plan.settings import Requested, resolve
from plan.helpers import GiB, bundled_config, plan


def test_v0_profiles_a_whole_max_length_prompt() -> None:
    """V0 without chunked prefill: max_num_batched_tokens = max(max_model_len, 2048)."""
    s = resolve(
        Requested(engine_version="0.6", max_model_len=29000),
        memory_bytes=24 * GiB,
        treats_as_a100=False,
        max_position_embeddings=131072,
        default_quantization=None,
    )
    assert (s.v0_engine, s.max_num_batched_tokens, s.max_num_seqs) == (True, 29000, 256)
    long = resolve(
        Requested(engine_version="0.6", max_model_len=65536),
        memory_bytes=24 * GiB,
        treats_as_a100=False,
        max_position_embeddings=131072,
        default_quantization=None,
    )
    assert long.max_num_batched_tokens == 512  # chunked prefill on above 32K


def test_vllm_use_v1_0_selects_v0_up_to_0_10() -> None:
    """VLLM_USE_V1=0 runs the V0 engine on 0.8-0.10, not on 0.11."""
    common = {
        "memory_bytes": 80 * GiB,
        "treats_as_a100": False,
        "max_position_embeddings": 8192,
        "default_quantization": None,
    }
    assert resolve(Requested(engine_version="0.9", use_v1=False), **common).v0_engine
    assert not resolve(Requested(engine_version="0.11", use_v1=False), **common).v0_engine


def test_context_is_inside_the_budget_before_0_9() -> None:
    """Before 0.9 the CUDA context (and other processes) come out of the KV budget."""
    old = plan("Llama-3.1-8B", "H100", 1, engine_version="0.8", max_model_len=8192)
    new = plan("Llama-3.1-8B", "H100", 1, engine_version="0.9", max_model_len=8192)
    assert old.per_gpu.kv_cache_bytes < new.per_gpu.kv_cache_bytes
    assert (
        sum(
            getattr(old.per_gpu, f)
            for f in (
                "weights_bytes",
                "activation_peak_bytes",
                "non_torch_bytes",
                "kv_cache_bytes",
            )
        )
        <= old.per_gpu.total_bytes
    )


def test_other_processes_before_0_9_shrink_kv_instead_of_failing_the_start() -> None:
    """A GPU with 10 GiB taken: 0.8 plans a smaller pool, 0.9 refuses at start."""
    old = plan("Llama-3.1-8B", "H100", 1, engine_version="0.8", free_bytes=69 * GiB)
    new = plan("Llama-3.1-8B", "H100", 1, engine_version="0.9", free_bytes=69 * GiB)
    assert old.verdict.failure_class != "gpu_memory_utilization"
    assert new.verdict.failure_class == "gpu_memory_utilization"


def test_reported_tokens_by_version_for_a_hybrid_model() -> None:
    """gemma-3-27b (52 sliding + 10 full layers): groups of 10, 6 sliding groups + 1 full."""
    arch = parse_architecture(bundled_config("gemma-3-27b"))
    spec = kv_spec(arch, (0, arch.num_layers), 1, "auto")
    assert group_layout(spec.full_layers, spec.sliding_layers) == (10, 1, 6)
    pool = 20 * GiB
    page = spec.bytes_per_token // arch.num_layers * spec.block_size
    blocks = pool // (10 * page)
    args = {"max_model_len": 65536, "max_num_batched_tokens": 2048}
    assert (
        reported_tokens(spec, pool, version=(0, 8), **args)
        == pool // (spec.bytes_per_token * 16) * 16
    )
    assert reported_tokens(spec, pool, version=(0, 12), **args) == blocks // 7 * 16
    need = 65536 // 16 + 6 * (-(-(1024 - 1 + 2048) // 16) + 1)
    assert reported_tokens(spec, pool, version=(0, 22), **args) == int(blocks / need * 65536)


def test_model_runner_by_version_and_model() -> None:
    """vLLM's V2 model runner: dense models from 0.22, every model from 0.28; V0 before 0.8."""
    from bringup.core.plan.settings import model_runner

    assert model_runner((0, 7), v0_engine=True, dense=True) == "v0"
    assert model_runner((0, 21), v0_engine=False, dense=True) == "v1"
    assert model_runner((0, 22), v0_engine=False, dense=True) == "v2"
    assert model_runner((0, 27), v0_engine=False, dense=False) == "v1"
    assert model_runner((0, 28), v0_engine=False, dense=False) == "v2"
