"""The tensor list a checkpoint of this architecture would have, from config.json alone.

Names follow the Hugging Face conventions (``model.layers.N.self_attn.q_proj.weight``,
``mlp.experts.E.gate_proj``, MLA's ``kv_a_proj_with_mqa``), so the same placement rules
(:mod:`bringup.core.plan.weights`) apply to real and synthesised checkpoints.
"""

from __future__ import annotations

from bringup.core.checkpoint import TensorInfo
from bringup.core.plan.arch import Architecture
from bringup.core.plan.quant import WeightFormat, linear_tensors, plain


def synthesize(arch: Architecture, fmt: WeightFormat) -> list[TensorInfo]:
    """Every tensor of the model, with the bytes it would be stored in."""
    d = arch.dtype_bytes
    out = [
        plain("model.embed_tokens.weight", (arch.vocab_size, arch.hidden_size), d),
        plain("model.norm.weight", (arch.hidden_size,), d),
    ]
    if not arch.tie_word_embeddings:
        out.append(plain("lm_head.weight", (arch.vocab_size, arch.hidden_size), d))
    for i in range(arch.num_layers):
        p = f"model.layers.{i}"
        if arch.blocks is not None:
            out += _block(arch, fmt, i, p)
            continue
        out += [
            plain(f"{p}.input_layernorm.weight", (arch.hidden_size,), d),
            plain(f"{p}.post_attention_layernorm.weight", (arch.hidden_size,), d),
        ]
        out += _attention(arch, fmt, f"{p}.self_attn")
        out += _mlp(arch, fmt, i, f"{p}.mlp")
    return out


def _lin(
    fmt: WeightFormat, arch: Architecture, name: str, o: int, i: int, *, expert: bool = False
) -> list[TensorInfo]:
    quantized = expert or not fmt.experts_only
    return linear_tensors(name, o, i, fmt, arch.dtype_bytes, quantized=quantized)


def _attention(arch: Architecture, fmt: WeightFormat, p: str) -> list[TensorInfo]:
    h, d = arch.hidden_size, arch.dtype_bytes
    if arch.mla is not None:
        m = arch.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        out: list[TensorInfo] = []
        if m.q_lora_rank:
            out += _lin(fmt, arch, f"{p}.q_a_proj", m.q_lora_rank, h)
            out.append(plain(f"{p}.q_a_layernorm.weight", (m.q_lora_rank,), d))
            out += _lin(fmt, arch, f"{p}.q_b_proj", arch.num_heads * qk, m.q_lora_rank)
        else:
            out += _lin(fmt, arch, f"{p}.q_proj", arch.num_heads * qk, h)
        out += _lin(fmt, arch, f"{p}.kv_a_proj_with_mqa", m.kv_lora_rank + m.qk_rope_head_dim, h)
        out.append(plain(f"{p}.kv_a_layernorm.weight", (m.kv_lora_rank,), d))
        out += _lin(
            fmt,
            arch,
            f"{p}.kv_b_proj",
            arch.num_heads * (m.qk_nope_head_dim + m.v_head_dim),
            m.kv_lora_rank,
        )
        out += _lin(fmt, arch, f"{p}.o_proj", h, arch.num_heads * m.v_head_dim)
        return out
    q, kv = arch.num_heads * arch.head_dim, arch.num_kv_heads * arch.head_dim
    return (
        _lin(fmt, arch, f"{p}.q_proj", q, h)
        + _lin(fmt, arch, f"{p}.k_proj", kv, h)
        + _lin(fmt, arch, f"{p}.v_proj", kv, h)
        + _lin(fmt, arch, f"{p}.o_proj", h, q)
    )


def _mlp(arch: Architecture, fmt: WeightFormat, layer: int, p: str) -> list[TensorInfo]:
    h = arch.hidden_size
    moe = arch.moe
    if moe is None or layer in moe.dense_layers:
        return _ffn(arch, fmt, p, arch.intermediate_size)
    out = [plain(f"{p}.gate.weight", (moe.num_experts, h), arch.dtype_bytes)]
    for e in range(moe.num_experts):
        out += _ffn(arch, fmt, f"{p}.experts.{e}", moe.intermediate_size, expert=True)
    if moe.shared_intermediate_size:
        out += _ffn(arch, fmt, f"{p}.shared_experts", moe.shared_intermediate_size)
    return out


def _ffn(
    arch: Architecture, fmt: WeightFormat, p: str, inter: int, *, expert: bool = False
) -> list[TensorInfo]:
    h = arch.hidden_size
    gate = _lin(fmt, arch, f"{p}.gate_proj", inter, h, expert=expert) if arch.gated_mlp else []
    return (
        gate
        + _lin(fmt, arch, f"{p}.up_proj", inter, h, expert=expert)
        + _lin(fmt, arch, f"{p}.down_proj", h, inter, expert=expert)
    )


def _block(arch: Architecture, fmt: WeightFormat, i: int, p: str) -> list[TensorInfo]:
    """One Nemotron-H layer: a norm and its one block (``core.plan.families``)."""
    assert arch.blocks is not None
    block, h, d = arch.blocks[i], arch.hidden_size, arch.dtype_bytes
    out = [plain(f"{p}.norm.weight", (h,), d)]
    if block == "attention":
        return out + _attention(arch, fmt, f"{p}.mixer")
    if block in ("mlp", "moe"):
        return out + _mlp(arch, fmt, i, f"{p}.mixer")
    m = arch.mamba
    if m is None:
        return out
    # vLLM nemotron_h.py / mamba_mixer2.py: in_proj to z, x, B, C and dt; a depthwise conv over
    # x, B, C; per-head A, D, dt_bias; a gated norm; out_proj back to the hidden size
    inner = m.heads * m.head_dim
    conv_dim = inner + 2 * m.groups * m.state
    return [
        *out,
        *_lin(fmt, arch, f"{p}.mixer.in_proj", inner + conv_dim + m.heads, h),
        plain(f"{p}.mixer.conv1d.weight", (conv_dim, 1, m.conv_kernel), d),
        plain(f"{p}.mixer.conv1d.bias", (conv_dim,), d),
        plain(f"{p}.mixer.A_log", (m.heads,), 4),
        plain(f"{p}.mixer.D", (m.heads,), 4),
        plain(f"{p}.mixer.dt_bias", (m.heads,), 4),
        plain(f"{p}.mixer.norm.weight", (inner,), d),
        *_lin(fmt, arch, f"{p}.mixer.out_proj", h, inner),
    ]
