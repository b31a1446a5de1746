"""Config fields of model families whose layers are not "attention + gated MLP" everywhere.

Read from vLLM 0.32's model code (``vllm/model_executor/models/``), each rule where it is:

- **Llama 4** (``llama4.py``): a layer's feed-forward is the MoE when ``interleave_moe_layer_step
  > 0 and (layer + 1) % step == 0`` (Scout: every layer, Maverick: every second), else a dense
  ``LlamaMLP`` of ``intermediate_size_mlp``; each MoE has one shared expert of the experts'
  ``intermediate_size`` (``Llama4MoE.shared_expert``); the RoPE layers
  (``no_rope_layers[i] == 1``; transformers fills an empty list with every layer but each
  ``no_rope_layer_interval``-th) use chunked local attention of ``attention_chunk_size`` tokens,
  whose KV vLLM bounds like a window (``kv_cache_interface.ChunkedLocalAttentionSpec``:
  ``min(chunk + tokens in flight, max_model_len)``; the planner's window rule counts one token
  less).
- **Nemotron** (``nemotron.py``, ``NemotronMLP``): ``up_proj`` then ``down_proj`` (relu²), no
  gate: two matrices per MLP, not three.
- **Nemotron-H** (``nemotron_h.py``): each layer is one block, by ``hybrid_override_pattern``
  (``ALL_DECODER_LAYER_TYPES``: ``M`` Mamba-2 mixer, ``*`` attention, ``-`` MLP, ``E`` MoE) or
  transformers 5's ``layers_block_type``; MLPs and experts are ungated; the shared expert is
  ``moe_shared_expert_intermediate_size x n_shared_experts``; a Mamba-2 layer's state per
  request (``mamba_utils.MambaStateShapeCalculator.mamba2_state_shape``) is a conv state
  ``(conv_kernel - 1) x (heads x head_dim + 2 x n_groups x state)`` in the model dtype and an SSM
  state ``heads x head_dim x state`` in ``mamba_ssm_cache_dtype`` (float32 unless the config
  says otherwise: ``models/config.py::NemotronHForCausalLMConfig``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Nemotron-H's pattern characters and transformers 5's block names -> the planner's blocks
_PATTERN = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
_BLOCK_TYPES = {
    "mamba": "mamba",
    "linear_attention": "mamba",
    "attention": "attention",
    "full_attention": "attention",
    "mlp": "mlp",
    "moe": "moe",
}
UNGATED_TYPES = frozenset({"nemotron", "nemotron_h"})
_SSM_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def blocks(cfg: Mapping[str, Any]) -> tuple[str, ...] | None:
    """Nemotron-H's block per layer ("mamba", "attention", "mlp", "moe"); None for a model
    whose every layer has attention and a feed-forward."""
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern and set(pattern) <= set(_PATTERN):
        return tuple(_PATTERN[c] for c in pattern)
    types = cfg.get("layers_block_type")
    if isinstance(types, list) and types and all(str(t) in _BLOCK_TYPES for t in types):
        return tuple(_BLOCK_TYPES[str(t)] for t in types)
    return None


def num_layers(cfg: Mapping[str, Any]) -> int | None:
    """The layer count a block pattern gives when the config has no num_hidden_layers."""
    found = blocks(cfg)
    return len(found) if found else None


def gated_mlp(cfg: Mapping[str, Any]) -> bool:
    """Whether the MLPs (and experts) have a gate projection (Nemotron's do not)."""
    return str(cfg.get("model_type", "")) not in UNGATED_TYPES


def dense_intermediate(cfg: Mapping[str, Any]) -> int | None:
    """The dense MLP's width where it is not ``intermediate_size``: Llama 4's
    ``intermediate_size_mlp``; Nemotron-H's list (one per MLP layer: the largest)."""
    if cfg.get("intermediate_size_mlp"):
        return int(cfg["intermediate_size_mlp"])
    value = cfg.get("intermediate_size")
    if isinstance(value, list) and value:
        return max(int(v) for v in value)
    return None


def layer_kinds(cfg: Mapping[str, Any], layers: int) -> tuple[str, ...] | None:
    """The KV kind per layer for these families ("full", "sliding", "linear", "none": a
    block without attention or state); None for the others."""
    found = blocks(cfg)
    if found is not None and len(found) == layers:
        kind = {"attention": "full", "mamba": "linear", "mlp": "none", "moe": "none"}
        return tuple(kind[b] for b in found)
    rope = _llama4_rope_layers(cfg, layers)
    if rope is not None:
        return tuple("sliding" if r else "full" for r in rope)
    return None


def chunk_window(cfg: Mapping[str, Any]) -> int | None:
    """Llama 4's chunked-attention size (its RoPE layers' KV bound), when it has one."""
    chunk = cfg.get("attention_chunk_size")
    return int(chunk) if chunk and str(cfg.get("model_type", "")).startswith("llama4") else None


def _llama4_rope_layers(cfg: Mapping[str, Any], layers: int) -> list[int] | None:
    if chunk_window(cfg) is None:
        return None
    rope = cfg.get("no_rope_layers")
    if isinstance(rope, list) and len(rope) == layers:
        return [int(r) for r in rope]
    interval = int(cfg.get("no_rope_layer_interval") or 4)
    return [int((i + 1) % interval != 0) for i in range(layers)]


def moe_layout(
    cfg: Mapping[str, Any], layers: int, inter: int
) -> tuple[set[int], int | None] | None:
    """(dense layers, shared-expert width or None to keep the generic rule) for Llama 4 and
    Nemotron-H; None for the others."""
    found = blocks(cfg)
    if found is not None:
        shared = int(cfg.get("moe_shared_expert_intermediate_size") or 0) * int(
            cfg.get("n_shared_experts") or 0
        )
        return {i for i, b in enumerate(found) if b != "moe"}, shared
    step = cfg.get("interleave_moe_layer_step")
    if str(cfg.get("model_type", "")).startswith("llama4") and step is not None:
        step = int(step)
        dense = {i for i in range(layers) if step <= 0 or (i + 1) % step != 0}
        return dense, inter  # Llama4MoE: one shared expert of the experts' width
    return None


@dataclass(frozen=True, slots=True)
class Mamba2:
    """A Nemotron-H Mamba-2 mixer's shape."""

    heads: int
    head_dim: int
    state: int
    groups: int
    conv_kernel: int
    ssm_bytes: int  # per SSM-state element (mamba_ssm_cache_dtype)

    def state_bytes(self, dtype_bytes: int) -> int:
        """Its state per request, whole model width (module docstring)."""
        conv_state = (self.conv_kernel - 1) * (
            self.heads * self.head_dim + 2 * self.groups * self.state
        )
        return conv_state * dtype_bytes + self.heads * self.head_dim * self.state * self.ssm_bytes


def mamba2(cfg: Mapping[str, Any]) -> Mamba2 | None:
    """The Mamba-2 mixer of a Nemotron-H config; None for other models."""
    if blocks(cfg) is None or not cfg.get("mamba_num_heads"):
        return None
    return Mamba2(
        heads=int(cfg["mamba_num_heads"]),
        head_dim=int(cfg.get("mamba_head_dim") or 64),
        state=int(cfg.get("ssm_state_size") or 128),
        groups=int(cfg.get("n_groups") or 8),
        conv_kernel=int(cfg.get("conv_kernel") or 4),
        ssm_bytes=_SSM_DTYPE_BYTES.get(str(cfg.get("mamba_ssm_cache_dtype") or "float32"), 4),
    )
