"""Families whose layers are not "attention + gated MLP" everywhere (core.plan.families):
Llama 4's interleaved MoE, shared expert and chunked attention, Nemotron's ungated MLP,
Nemotron-H's one block per layer. Configs self-written from the public config.json numbers."""

from __future__ import annotations

from typing import Any

import pytest

from bringup.core.plan import parse_architecture
from bringup.core.plan.kv import kv_spec
from bringup.core.plan.quant import format_from_config
from bringup.core.plan.synth import synthesize
from bringup.core.plan.weights import parameter_count


def _llama4(experts: int, step: int) -> dict[str, Any]:
    text = {
        "model_type": "llama4_text",
        "hidden_size": 5120,
        "num_hidden_layers": 48,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "num_local_experts": experts,
        "num_experts_per_tok": 1,
        "interleave_moe_layer_step": step,
        "vocab_size": 202048,
        "max_position_embeddings": 1048576,
        "attention_chunk_size": 8192,
        "no_rope_layers": [],
        "torch_dtype": "bfloat16",
    }
    return {
        "architectures": ["Llama4ForConditionalGeneration"],
        "model_type": "llama4",
        "text_config": text,
    }


def _params(cfg: dict[str, Any]) -> int:
    arch = parse_architecture(cfg)
    return parameter_count(synthesize(arch, format_from_config(None, None)), arch)


@pytest.mark.parametrize(
    ("experts", "step", "published"),
    [(16, 1, 109e9), (128, 2, 400e9)],  # Meta's model cards: Scout 109B, Maverick 400B total
)
def test_llama4_parameters_match_the_published_totals(
    experts: int, step: int, published: float
) -> None:
    """Scout (every layer MoE) and Maverick (every second layer MoE, the others a dense MLP
    of intermediate_size_mlp), each MoE with one shared expert: the text model's parameters
    within 2 % of the published total (which also counts the vision encoder)."""
    assert _params(_llama4(experts, step)) == pytest.approx(published, rel=0.02)


def test_llama4_layers_interleave_and_chunk() -> None:
    """Maverick: odd layers dense, even MoE; three of four layers chunked at 8,192 tokens."""
    arch = parse_architecture(_llama4(128, 2))
    assert arch.moe is not None
    assert arch.moe.dense_layers == frozenset(range(0, 48, 2))
    assert arch.moe.shared_intermediate_size == 8192
    assert arch.intermediate_size == 16384
    assert arch.layer_kinds.count("full") == 12
    assert arch.layer_kinds.count("sliding") == 36
    assert arch.layer_kinds[3] == "full"
    assert arch.sliding_window == 8192


def test_nemotron_mlp_has_no_gate() -> None:
    """Minitron-4B's shape (hidden 3072, 32 layers, 24/8 heads, MLP 9216, vocab 256,000): two
    MLP matrices per layer give its published 4.2B parameters (three would give 5.1B)."""
    cfg = {
        "architectures": ["NemotronForCausalLM"],
        "model_type": "nemotron",
        "hidden_size": 3072,
        "num_hidden_layers": 32,
        "num_attention_heads": 24,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 9216,
        "vocab_size": 256000,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    arch = parse_architecture(cfg)
    names = [t.name for t in synthesize(arch, format_from_config(None, None))]
    assert not any("gate_proj" in n for n in names)
    assert _params(cfg) == pytest.approx(4.2e9, rel=0.03)


NEMOTRON_H: dict[str, Any] = {
    "architectures": ["NemotronHForCausalLM"],
    "model_type": "nemotron_h",
    "hybrid_override_pattern": "M-M*-E-",
    "num_hidden_layers": 7,
    "hidden_size": 512,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "intermediate_size": 1024,
    "vocab_size": 8192,
    "max_position_embeddings": 8192,
    "mamba_num_heads": 16,
    "mamba_head_dim": 64,
    "ssm_state_size": 128,
    "n_groups": 8,
    "conv_kernel": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 256,
    "moe_shared_expert_intermediate_size": 512,
    "n_shared_experts": 1,
    "torch_dtype": "bfloat16",
}


def test_nemotron_h_blocks() -> None:
    """One block per layer: KV only on the '*' layer, Mamba-2 state on the 'M' layers, the
    MoE only on 'E', no attention weights on the others, no gate anywhere."""
    arch = parse_architecture(NEMOTRON_H)
    assert arch.blocks == ("mamba", "mlp", "mamba", "attention", "mlp", "moe", "mlp")
    assert arch.layer_kinds == ("linear", "none", "linear", "full", "none", "none", "none")
    spec = kv_spec(arch, (0, 7), 1, "auto")
    assert spec.full_bytes_per_token == 2 * 2 * 64 * 2  # one attention layer
    # conv (4 - 1) x (16 x 64 + 2 x 8 x 128) x bf16 + SSM 16 x 64 x 128 x fp32, per 'M' layer
    assert arch.linear_state_bytes == 3 * (1024 + 2048) * 2 + 16 * 64 * 128 * 4
    assert spec.state_bytes_per_request == 2 * arch.linear_state_bytes
    assert arch.moe is not None
    assert arch.moe.dense_layers == frozenset({0, 1, 2, 3, 4, 6})
    names = [t.name for t in synthesize(arch, format_from_config(None, None))]
    assert not any("gate_proj" in n for n in names)
    assert sum("q_proj" in n for n in names) == 1
    assert sum(".experts." in n and "up_proj" in n for n in names) == 4
    assert any(n.startswith("model.layers.0.mixer.in_proj") for n in names)


def test_nemotron_h_layer_count_from_the_pattern() -> None:
    """transformers 5 writes layers_block_type and no num_hidden_layers: the count is read
    from the blocks."""
    cfg = {k: v for k, v in NEMOTRON_H.items() if k not in ("num_hidden_layers",)}
    cfg.pop("hybrid_override_pattern")
    cfg["layers_block_type"] = ["mamba", "attention", "mlp"]
    arch = parse_architecture(cfg)
    assert arch.num_layers == 3
    assert arch.layer_kinds == ("linear", "full", "none")
