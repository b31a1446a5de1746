"""The batch-1 decode ceiling: weights over bandwidth plus allreduces over the link."""

from __future__ import annotations

from typing import Any

import pytest

from bringup.core.ceiling import (
    DecodeInputs,
    Link,
    MoeShape,
    active_weight_bytes,
    link_for,
    model_shape,
    predict_decode_ceiling,
)
from bringup.core.checkpoint import TensorInfo

GB = 1_000_000_000


def test_single_gpu_ceiling_is_bandwidth_over_weights() -> None:
    """Without tensor parallel, tokens/s is memory bandwidth divided by active weight bytes."""
    c = predict_decode_ceiling(DecodeInputs(16 * GB, 32, 4096, 1, 3.35e12))
    assert c.decode_tokens_per_second == pytest.approx(3.35e12 / (16 * GB))
    assert c.allreduce_seconds == 0.0
    assert "3.35 TB/s" in c.basis


def test_tensor_parallel_adds_two_allreduces_per_layer() -> None:
    """At tp=4, each rank reads a quarter of the weights and pays 2 x layers ring allreduces."""
    link = Link("PCIe", 64e9, 50e-6)
    c = predict_decode_ceiling(DecodeInputs(140 * GB, 80, 8192, 4, 1.792e12, link))
    moved = 2 * 3 / 4 * 8192 * 2
    allreduce = 160 * (50e-6 + moved / 64e9)
    assert c.allreduce_seconds == pytest.approx(allreduce)
    assert c.weight_seconds == pytest.approx(35 * GB / 1.792e12)
    assert c.decode_tokens_per_second == pytest.approx(1 / (c.weight_seconds + allreduce))
    assert "160 allreduces" in c.basis
    assert "PCIe" in c.basis


def test_nvlink_beats_pcie_for_the_same_model() -> None:
    """The same model and GPUs predict a higher ceiling over NVLink than over PCIe."""

    def tps(kind: str, bandwidth: float) -> float:
        inputs = DecodeInputs(140 * GB, 80, 8192, 8, 2e12, link_for(kind, bandwidth))
        return predict_decode_ceiling(inputs).decode_tokens_per_second

    assert tps("nvlink", 450e9) > tps("pcie", 64e9)


def test_tensor_parallel_without_link_is_an_error() -> None:
    """A tp>1 prediction cannot be made without knowing the link."""
    with pytest.raises(ValueError):
        predict_decode_ceiling(DecodeInputs(GB, 2, 64, 2, 1e12))


def test_moe_reads_shared_weights_plus_top_k_experts() -> None:
    """For MoE, one token reads the non-expert weights and k/E of the routed experts."""
    assert active_weight_bytes(100, MoeShape(80, 8, 2)) == 40
    assert active_weight_bytes(100, None) == 100


def _t(name: str, nbytes: int) -> TensorInfo:
    return TensorInfo(name, "BF16", (nbytes // 2,), nbytes, "model.safetensors")


def test_model_shape_from_moe_checkpoint_tensors_and_config() -> None:
    """Routed experts are found by tensor name; shared experts count as always read."""
    tensors = [
        _t("model.layers.0.self_attn.q_proj.weight", 100),
        _t("model.layers.0.mlp.experts.0.up_proj.weight", 400),
        _t("model.layers.0.mlp.experts.1.up_proj.weight", 400),
        _t("model.layers.0.mlp.shared_experts.up_proj.weight", 100),
    ]
    config = {
        "num_hidden_layers": 1,
        "hidden_size": 64,
        "n_routed_experts": 2,
        "num_experts_per_tok": 1,
    }
    shape = model_shape(tensors, config)
    assert not isinstance(shape, str)
    assert shape.moe == MoeShape(800, 2, 1)
    assert active_weight_bytes(shape.weight_bytes, shape.moe) == 600


def test_model_shape_from_gguf_metadata() -> None:
    """GGUF models take layers and width from their metadata."""
    meta = {"general.architecture": "llama", "llama.block_count": 2, "llama.embedding_length": 64}
    shape = model_shape([_t("blk.0.attn_q.weight", 10)], None, meta)
    assert not isinstance(shape, str)
    assert (shape.num_layers, shape.hidden_size, shape.moe) == (2, 64, None)


def test_model_shape_says_why_when_it_cannot() -> None:
    """No weights or no layer count gives a reason instead of a number."""
    assert "no weight files" in str(model_shape([], {"num_hidden_layers": 2, "hidden_size": 8}))
    assert "layer count" in str(model_shape([_t("w", 2)], {}))


def _predict(tmp_path: Any, config: dict[str, Any], gpu: str, tp: int) -> Any:
    import argparse
    import json

    from bringup.cli.commands.bench import predict

    (tmp_path / "config.json").write_text(json.dumps(config))
    args = argparse.Namespace(
        gpu=gpu, gpus=None, tp=tp, checkpoint=str(tmp_path / "config.json"), model=None
    )
    return predict(args)


def test_config_only_moe_reads_only_active_experts(tmp_path: Any) -> None:
    """From config.json alone, an MoE model's ceiling counts shared weights plus top-k experts."""
    base = {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "hidden_size": 2048,
        "num_hidden_layers": 48,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "intermediate_size": 6144,
        "moe_intermediate_size": 768,
        "num_experts": 128,
        "vocab_size": 151936,
        "max_position_embeddings": 40960,
        "torch_dtype": "bfloat16",
    }
    sparse, _ = _predict(tmp_path, {**base, "num_experts_per_tok": 8}, "H100", 1)
    dense_experts, _ = _predict(tmp_path, {**base, "num_experts_per_tok": 128}, "H100", 1)
    assert "estimated from config.json" in sparse.basis
    # 30B total, ~3B active: reading 8 of 128 experts is several times faster than all 128
    assert sparse.decode_tokens_per_second > 5 * dense_experts.decode_tokens_per_second


def test_pcie_tp_ceiling_is_bounded_by_allreduce(tmp_path: Any) -> None:
    """A 70B model at tp=4 over PCIe spends a large share of each token in allreduces."""
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 8192,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "intermediate_size": 28672,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        "torch_dtype": "bfloat16",
    }
    pcie, _ = _predict(tmp_path, config, "RTX PRO 6000", 4)
    assert pcie.allreduce_seconds > 0.25 * (pcie.weight_seconds + pcie.allreduce_seconds)
    assert "over PCIe" in pcie.basis
