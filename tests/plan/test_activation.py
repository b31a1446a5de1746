"""The profile run's forward peak from the layer code (core/plan/activation.py)."""

from __future__ import annotations

from bringup.core.plan.activation import forward_peak_bytes
from bringup.core.plan.arch import parse_architecture

GiB = 1024**3
DENSE = {  # a Llama-3-8B-shaped config, written here
    "architectures": ["LlamaForCausalLM"],
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}
MOE = {  # a Qwen3-MoE-shaped config, written here
    "architectures": ["Qwen3MoeForCausalLM"],
    "num_hidden_layers": 48,
    "hidden_size": 2048,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "torch_dtype": "bfloat16",
}


def test_dense_peak_is_the_mlp_with_the_residual_stream() -> None:
    """3·t·(h + i)·d: residual, normed input, gate_up, the activation and down's output."""
    arch = parse_architecture(DENSE)
    t = 20_000
    assert forward_peak_bytes(arch, 1, t) == 3 * t * (4096 + 14336) * 2
    # vllm-project/vllm#10517 measured 2.07 GiB above the weights at 20,000 tokens (V0)
    assert abs(forward_peak_bytes(arch, 1, t) / GiB - 2.07) < 0.03


def test_dense_mlp_shards_with_tensor_parallelism() -> None:
    arch = parse_architecture(DENSE)
    one, four = forward_peak_bytes(arch, 1, 8192), forward_peak_bytes(arch, 4, 8192)
    assert four == 8192 * 2 * (2 * 4096 + 3 * 14336 // 4 + 4096)
    assert four < one


def test_fused_moe_caches_do_not_shrink_with_expert_parallelism() -> None:
    """Every rank allocates [t, topk, ...] caches; EP only makes each expert whole."""
    arch = parse_architecture(MOE)
    t, k = 8192, 8
    tp = forward_peak_bytes(arch, 4, t)
    ep = forward_peak_bytes(arch, 4, t, expert_parallel=True)
    stream = 2 * t * 2048 * 2
    router = t * 128 * 4
    assert tp == stream + t * k * (3 * 768 // 4 + 2048) * 2 + t * 2048 * 2 + router
    assert ep == stream + t * k * (3 * 768 + 2048) * 2 + t * 2048 * 2 + router
