"""A model's architecture, read from its config.json: what the memory planner needs.

Handles dense GQA/MHA (Llama, Qwen, Mistral, Gemma), MoE (Mixtral, Qwen-MoE, DeepSeek,
MiniMax, gpt-oss), MLA (DeepSeek-V2/V3, Kimi-K2), sliding-window layers (``layer_types``,
``sliding_window_pattern``, Gemma-2 interleaving), linear-attention/mamba layers, and
multimodal configs whose language model sits under ``text_config``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bringup.core.plan import families
from bringup.errors import InputError

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4, "fp8": 1}


@dataclass(frozen=True, slots=True)
class Moe:
    """Mixture-of-experts shape."""

    num_experts: int
    experts_per_token: int
    intermediate_size: int  # per expert
    shared_intermediate_size: int  # all shared experts together (0 if none)
    dense_layers: frozenset[int]  # layer indices with a dense MLP instead of experts


@dataclass(frozen=True, slots=True)
class Mla:
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2)."""

    kv_lora_rank: int
    q_lora_rank: int | None
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True, slots=True)
class Architecture:
    """The numbers of a model that decide its memory."""

    name: str  # architectures[0], e.g. "LlamaForCausalLM"
    model_type: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool
    dtype_bytes: int  # of the unquantized weights and activations
    layer_kinds: tuple[str, ...]  # per layer: "full" | "sliding" | "linear"
    sliding_window: int | None
    moe: Moe | None
    mla: Mla | None
    linear_state_bytes: int  # per request per linear/mamba layer (recurrent state), 0 if none
    quantization: Mapping[str, Any] | None  # config's quantization_config
    # the config key max_position_embeddings was derived from (vLLM names it when it refuses a
    # longer --max-model-len), and the hf_config's model_max_length, which may allow one
    max_len_key: str = "max_position_embeddings"
    model_max_length: int | None = None
    gated_mlp: bool = True  # MLP and experts with a gate projection (Nemotron's have none)
    # one block per layer ("mamba", "attention", "mlp", "moe": Nemotron-H); None: every layer
    # has attention and a feed-forward
    blocks: tuple[str, ...] | None = None
    mamba: families.Mamba2 | None = None  # Nemotron-H's Mamba-2 mixer

    @property
    def dense(self) -> bool:
        """Neither experts nor linear-attention/mamba layers (vLLM's runner choice looks at it)."""
        return self.moe is None and "linear" not in self.layer_kinds


def parse_architecture(config: Mapping[str, Any]) -> Architecture:
    """Read an Architecture from a parsed config.json; InputError (one line naming the key)
    when a field the planner needs is missing or not a number."""
    cfg = _merged(config)
    try:
        return _parse(cfg)
    except _Missing as exc:
        raise InputError(
            f"the model's config lacks {exc.args[0]}",
            hint="the planner needs num_hidden_layers, hidden_size, num_attention_heads and "
            "vocab_size (or their GPT-2 names n_layer, n_embd, n_head)",
        ) from None
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise InputError(
            f"the model's config has a value the planner cannot use ({type(exc).__name__}: {exc})",
            hint="check config.json against the model's published one",
        ) from exc


# Architectures whose config fields the planner reads specifically (others are planned
# generically: dense, MoE, MLA and windows from the fields they have, with a warning).
KNOWN_ARCHITECTURES = frozenset(
    {
        "LlamaForCausalLM",
        "MistralForCausalLM",
        "MixtralForCausalLM",
        "Qwen2ForCausalLM",
        "Qwen2MoeForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen3MoeForCausalLM",
        "Qwen3NextForCausalLM",
        "Qwen2VLForConditionalGeneration",
        "Qwen2_5_VLForConditionalGeneration",
        "DeepseekV2ForCausalLM",
        "DeepseekV3ForCausalLM",
        "KimiK2ForCausalLM",
        "MiniMaxM2ForCausalLM",
        "GptOssForCausalLM",
        "Gemma2ForCausalLM",
        "Gemma3ForCausalLM",
        "Gemma3ForConditionalGeneration",
        "Phi3ForCausalLM",
        "GraniteForCausalLM",
        "Glm4ForCausalLM",
        "Glm4MoeForCausalLM",
        "Llama4ForConditionalGeneration",
        "Llama4ForCausalLM",
        "NemotronForCausalLM",
        "NemotronHForCausalLM",
    }
)


def architecture_warning(arch: Architecture) -> str | None:
    """A warning when the architecture is not one the planner knows specifically."""
    if arch.name in KNOWN_ARCHITECTURES:
        return None
    shape = "MLA" if arch.mla else ("MoE" if arch.moe else "dense")
    return (
        f"architecture {arch.name} is not one bringup knows: planned generically as a {shape} "
        "decoder from the config's fields (weights and KV may be off)"
    )


class _Missing(Exception):
    """A required config key is absent."""


def _need(cfg: Mapping[str, Any], *names: str) -> int:
    for name in names:
        value = cfg.get(name)
        if value is not None:
            return int(value)
    raise _Missing(" (or ".join(names) + ")" * (len(names) - 1))


def _merged(config: Mapping[str, Any]) -> dict[str, Any]:
    text = config.get("text_config") or config.get("llm_config")
    merged = dict(config)
    if isinstance(text, Mapping):
        merged.update({k: v for k, v in text.items() if v is not None})
        merged.setdefault("architectures", config.get("architectures"))
        if "quantization_config" in config:
            merged["quantization_config"] = config["quantization_config"]
    return merged


def _parse(cfg: Mapping[str, Any]) -> Architecture:
    counted = families.num_layers(cfg)
    layers = counted if counted and "num_hidden_layers" not in cfg else 0
    layers = layers or _need(cfg, "num_hidden_layers", "n_layer", "num_layers")
    hidden = _need(cfg, "hidden_size", "n_embd", "d_model")
    heads = _need(cfg, "num_attention_heads", "n_head")
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    names = cfg.get("architectures") or [cfg.get("model_type", "unknown")]
    return Architecture(
        name=str(names[0]),
        model_type=str(cfg.get("model_type", "")),
        num_layers=layers,
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=families.dense_intermediate(cfg)
        or int(cfg.get("intermediate_size") or cfg.get("ffn_hidden_size") or 4 * hidden),
        vocab_size=_need(cfg, "vocab_size", "padded_vocab_size"),
        max_position_embeddings=derived_max_len(cfg)[0],
        max_len_key=derived_max_len(cfg)[1],
        model_max_length=_int_or_none(cfg.get("model_max_length")),
        tie_word_embeddings=tied_embeddings(cfg),
        dtype_bytes=DTYPE_BYTES.get(
            str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"), 2
        ),
        layer_kinds=_layer_kinds(cfg, layers),
        sliding_window=_window(cfg),
        moe=_moe(cfg, layers),
        mla=_mla(cfg),
        linear_state_bytes=_linear_state_bytes(cfg),
        quantization=cfg.get("quantization_config") or cfg.get("compression_config"),
        gated_mlp=families.gated_mlp(cfg),
        blocks=families.blocks(cfg),
        mamba=families.mamba2(cfg),
    )


# Decoder model types whose transformers config class defaults tie_word_embeddings to True
# (transformers 5.19, the version vLLM 0.32's CPU build installs: each class instantiated
# with no arguments); vLLM reads the attribute from the config object, so a config.json that
# omits the key takes its class's default. Every other type here defaults to False.
TIED_BY_DEFAULT = frozenset(
    {
        "gemma", "gemma2", "gemma3", "gemma3_text", "gemma3n", "gemma3n_text", "gemma4",
        "gemma4_text", "recurrent_gemma", "vaultgemma", "paligemma", "cohere", "cohere2",
        "cohere2_moe", "gpt2", "gpt_bigcode", "gpt_neo", "openai-gpt", "ctrl", "xglm",
        "falcon", "falcon_mamba", "mamba", "bloom", "opt", "mpt", "starcoder2", "ernie4_5",
        "ernie4_5_moe", "jetmoe", "lfm2", "lfm2_moe", "minicpm3", "smollm3", "zamba",
        "zamba2", "biogpt",
    }
)  # fmt: skip


def tied_embeddings(cfg: Mapping[str, Any]) -> bool:
    """``tie_word_embeddings`` as vLLM sees it: the config's value, else the default of the
    model type's transformers config class (:data:`TIED_BY_DEFAULT`; Gemma's is True, so a
    Gemma config without the key has no separate lm_head).

    >>> tied_embeddings({"model_type": "gemma2"}), tied_embeddings({"model_type": "llama"})
    (True, False)
    """
    value = cfg.get("tie_word_embeddings")
    if value is not None:
        return bool(value)
    return str(cfg.get("model_type", "")) in TIED_BY_DEFAULT


# vLLM 0.32 transformers_utils/model_arch_config_convertor.py::derive_max_model_len_and_key:
# the smallest of these config keys is the model's length (model_max_length, Command-R's,
# replaces it when present)
MAX_LEN_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
# vllm/config/model.py::_get_and_verify_max_len: RoPE types whose factor is NOT applied again
# (their max_position_embeddings is already the scaled length); every other type's factor
# multiplies the derived length ("linear", "dynamic"), except for Gemma-3
ROPE_ALREADY_SCALED = frozenset(
    {"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"}
)
NO_LENGTH_DEFAULT = 2048  # vLLM: "Assuming the model's maximum length is 2048"


def derived_max_len(cfg: Mapping[str, Any]) -> tuple[int, str]:
    """The longest ``--max-model-len`` vLLM accepts for this config without
    ``VLLM_ALLOW_LONG_MAX_MODEL_LEN``, and the key it comes from, as vLLM 0.32 derives them
    (``_get_and_verify_max_len``): the smallest of :data:`MAX_LEN_KEYS` (``model_max_length``
    replacing it), 2048 when none is present, times the RoPE scaling factor for the RoPE types
    not already scaled. Not read: the tokenizer_config's ``model_max_length`` (vLLM takes the
    smaller), which a config.json alone does not carry.

    >>> derived_max_len({"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2.0}})
    (8192, 'max_position_embeddings')
    >>> derived_max_len({"max_position_embeddings": 40960, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})
    (40960, 'max_position_embeddings')
    """
    length: float = float("inf")
    key = "max_position_embeddings"
    for name in MAX_LEN_KEYS:
        value = _int_or_none(cfg.get(name))
        if value is not None and value < length:
            length, key = value, name
    model_max = _int_or_none(cfg.get("model_max_length"))
    if model_max:
        length, key = model_max, "model_max_length"
    if length == float("inf"):
        return NO_LENGTH_DEFAULT, "none (vLLM assumes 2048)"
    rope = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    # rope_parameters may be nested per layer type ({"full_attention": {...}, ...}); vLLM
    # loops over them all, the last factor of a type not already scaled winning
    params = list(rope.values()) if isinstance(rope, Mapping) else []
    if not all(isinstance(p, Mapping) for p in params) or not params:
        params = [rope] if isinstance(rope, Mapping) else []
    scale = 1.0
    for p in params if "gemma3" not in str(cfg.get("model_type", "")) else ():
        rope_type = str(p.get("rope_type") or p.get("type") or "default")
        factor = p.get("factor")
        if rope_type not in ROPE_ALREADY_SCALED and isinstance(factor, (int, float)) and factor:
            scale = float(factor)
    return int(length * scale), key


def _int_or_none(value: Any) -> int | None:
    try:
        return None if value is None or isinstance(value, bool) else int(value)
    except (TypeError, ValueError):
        return None


def _window(cfg: Mapping[str, Any]) -> int | None:
    chunk = families.chunk_window(cfg)
    if chunk is not None:
        return chunk
    value = cfg.get("sliding_window")
    if not value or cfg.get("use_sliding_window") is False:
        return None
    return int(value)


def _layer_kinds(cfg: Mapping[str, Any], layers: int) -> tuple[str, ...]:
    family = families.layer_kinds(cfg, layers)
    if family is not None:
        return family
    types = cfg.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        return tuple(_kind(str(t)) for t in types)
    window = _window(cfg)
    if window is None:
        return ("full",) * layers
    pattern = cfg.get("sliding_window_pattern")
    if isinstance(pattern, int) and pattern > 1:  # Gemma-3: every pattern-th layer is global
        return tuple("full" if (i + 1) % pattern == 0 else "sliding" for i in range(layers))
    if cfg.get("model_type") in ("gemma2", "cohere2") or cfg.get("interleaved_sliding_window"):
        return tuple("sliding" if i % 2 == 0 else "full" for i in range(layers))
    max_window_layers = cfg.get("max_window_layers")
    if isinstance(max_window_layers, int) and cfg.get("use_sliding_window"):
        return tuple("sliding" if i >= max_window_layers else "full" for i in range(layers))
    return ("sliding",) * layers  # Mistral-7B v0.1: every layer windowed


def _kind(layer_type: str) -> str:
    t = layer_type.lower()
    if "sliding" in t or "local" in t or "chunked" in t:
        return "sliding"
    if "linear" in t or "mamba" in t or "recurrent" in t:
        return "linear"
    return "full"


def _moe(cfg: Mapping[str, Any], layers: int) -> Moe | None:
    experts = cfg.get("num_local_experts") or cfg.get("num_experts") or cfg.get("n_routed_experts")
    if not experts:
        return None
    per_token = int(
        cfg.get("num_experts_per_tok")
        or cfg.get("num_experts_per_token")
        or cfg.get("moe_topk")
        or 2
    )
    inter = int(cfg.get("moe_intermediate_size") or cfg["intermediate_size"])
    layout = families.moe_layout(cfg, layers, inter)
    if layout is not None:
        dense_layers, family_shared = layout
        return Moe(int(experts), per_token, inter, family_shared or 0, frozenset(dense_layers))
    shared = int(cfg.get("shared_expert_intermediate_size") or 0)
    if not shared and cfg.get("n_shared_experts"):
        shared = int(cfg["n_shared_experts"]) * inter
    dense = set(range(int(cfg.get("first_k_dense_replace") or 0)))
    sparse_step = int(cfg.get("decoder_sparse_step") or 1)
    if sparse_step > 1:
        dense |= {i for i in range(layers) if (i + 1) % sparse_step != 0}
    dense |= {int(i) for i in cfg.get("mlp_only_layers") or []}
    return Moe(int(experts), per_token, inter, shared, frozenset(dense))


def _mla(cfg: Mapping[str, Any]) -> Mla | None:
    if not cfg.get("kv_lora_rank"):
        return None
    q_rank = cfg.get("q_lora_rank")
    return Mla(
        kv_lora_rank=int(cfg["kv_lora_rank"]),
        q_lora_rank=int(q_rank) if q_rank else None,
        qk_rope_head_dim=int(cfg.get("qk_rope_head_dim") or 64),
        qk_nope_head_dim=int(cfg.get("qk_nope_head_dim") or 128),
        v_head_dim=int(cfg.get("v_head_dim") or 128),
    )


def _linear_state_bytes(cfg: Mapping[str, Any]) -> int:
    """Recurrent state per request per linear-attention/mamba layer (whole model width, fp32/bf16)."""
    if cfg.get("linear_num_value_heads"):  # Qwen3-Next gated delta net
        v_heads = int(cfg["linear_num_value_heads"])
        k_heads = int(cfg.get("linear_num_key_heads") or v_heads)
        k_dim = int(cfg.get("linear_key_head_dim") or 128)
        v_dim = int(cfg.get("linear_value_head_dim") or 128)
        conv = int(cfg.get("linear_conv_kernel_dim") or 4)
        ssm = v_heads * k_dim * v_dim * 4
        conv_state = (2 * k_heads * k_dim + v_heads * v_dim) * (conv - 1) * 2
        return ssm + conv_state
    mamba2 = families.mamba2(cfg)
    if mamba2 is not None:
        return mamba2.state_bytes(DTYPE_BYTES.get(str(cfg.get("torch_dtype")), 2))
    if cfg.get("mamba_n_heads") or cfg.get("ssm_state_size") or cfg.get("mamba_d_state"):
        heads = int(cfg.get("mamba_n_heads") or 128)
        head_dim = int(cfg.get("mamba_d_head") or cfg.get("mamba_head_dim") or 64)
        state = int(cfg.get("ssm_state_size") or cfg.get("mamba_d_state") or 128)
        conv = int(cfg.get("conv_kernel") or cfg.get("mamba_d_conv") or 4)
        return heads * head_dim * state * 4 + heads * head_dim * (conv - 1) * 2
    return 0
