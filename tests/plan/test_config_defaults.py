"""Config keys a config.json may omit: vLLM sees the default of the model type's
transformers config class, so the planner must too."""

from __future__ import annotations

from typing import Any

import pytest

from bringup.core.plan import parse_architecture
from bringup.core.plan.quant import format_from_config
from bringup.core.plan.synth import synthesize

BASE: dict[str, Any] = {
    "num_hidden_layers": 2,
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "head_dim": 64,
    "intermediate_size": 512,
    "vocab_size": 4096,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}


@pytest.mark.parametrize(
    ("model_type", "architecture", "tied"),
    [
        ("gemma", "GemmaForCausalLM", True),
        ("gemma2", "Gemma2ForCausalLM", True),
        ("gemma3_text", "Gemma3ForCausalLM", True),
        ("llama", "LlamaForCausalLM", False),
        ("qwen3", "Qwen3ForCausalLM", False),
        ("some_new_type", "SomethingForCausalLM", False),
    ],
)
def test_tie_word_embeddings_defaults_per_model_type(
    model_type: str, architecture: str, tied: bool
) -> None:
    """Without the key, Gemma's embeddings are tied (no lm_head tensor is planned); Llama's
    and Qwen's are not."""
    cfg = {**BASE, "model_type": model_type, "architectures": [architecture]}
    arch = parse_architecture(cfg)
    assert arch.tie_word_embeddings is tied
    names = {t.name for t in synthesize(arch, format_from_config(None, None))}
    assert ("lm_head.weight" in names) is not tied


def test_an_explicit_key_wins_over_the_default() -> None:
    """A Gemma config that says tie_word_embeddings false has its own lm_head."""
    cfg = {**BASE, "model_type": "gemma2", "tie_word_embeddings": False}
    assert parse_architecture(cfg).tie_word_embeddings is False
    cfg = {**BASE, "model_type": "llama", "tie_word_embeddings": True}
    assert parse_architecture(cfg).tie_word_embeddings is True
