"""config.json against the tensors: what vLLM builds from the config must match what it loads.

vLLM (and transformers) build the model from ``config.json`` and then copy each checkpoint
tensor into the parameter of the same name, checking its shape; a parameter no tensor
filled fails the load. So a config whose sizes disagree with the tensors fails at load time,
minutes in, although every shard is whole. The general rule checked here: each size the
config states and the tensors also show must agree.

- ``num_hidden_layers`` (``n_layer``, ``num_layers``): the layer indices in tensor names
  (``model.layers.N.``, ``transformer.h.N.``), plus ``num_nextn_predict_layers`` MTP layers
  when the checkpoint carries them;
- ``vocab_size`` and ``hidden_size`` (``n_embd``, ``d_model``): the token embedding's shape;
- ``num_attention_heads``/``head_dim`` and ``num_key_value_heads``: the rows of layer 0's
  ``q_proj``/``k_proj`` (unquantized ones only);
- ``num_local_experts``/``num_experts``/``n_routed_experts``: the expert indices
  (``.experts.N.``);
- ``tie_word_embeddings: false``: an output projection (``lm_head.weight``) must exist.

Multimodal configs (``text_config``) are not checked: their tensor names differ per model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from bringup.core.checkpoint import Problem, TensorInfo

_LAYER = re.compile(r"(?:^|\.)(?:layers|h|blocks)\.(\d+)\.")
_EXPERT = re.compile(r"\.experts\.(\d+)\.")
_EMBED = ("embed_tokens.weight", "wte.weight", "word_embeddings.weight", "embed_in.weight")
_HEADS = ("lm_head.weight", "embed_out.weight", "output.weight")
_SKIP = ("vision", "visual", "mtp.", "audio")
_INT_DTYPES = frozenset({"I8", "U8", "I32", "I16", "U16", "U32", "I64", "U64", "BOOL"})


def check_config_tensors(
    config: Mapping[str, Any] | None, tensors: Sequence[TensorInfo]
) -> list[Problem]:
    """Every size ``config`` states that the tensors contradict, naming the key."""
    if not config or not tensors or "text_config" in config or "vision_config" in config:
        return []
    names = [t.name for t in tensors if not any(s in t.name for s in _SKIP)]
    return [
        *_layers(config, names),
        *_embedding(config, tensors),
        *_heads(config, tensors),
        *_experts(config, names),
        *_tied(config, names),
    ]


def _first(config: Mapping[str, Any], *keys: str) -> tuple[str, int] | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return key, value
    return None


def _mismatch(key: str, said: object, found: str) -> Problem:
    return Problem(
        "config_mismatch",
        "config.json",
        f"config.json says {key} {said}, but {found}",
        "fetch config.json again from the same revision as the weights: vLLM builds the model "
        f"from it and fails to load tensors that do not match ({key})",
    )


def _layers(config: Mapping[str, Any], names: Sequence[str]) -> list[Problem]:
    stated = _first(config, "num_hidden_layers", "n_layer", "num_layers")
    found = {int(m.group(1)) for n in names if (m := _LAYER.search(n))}
    if stated is None or not found:
        return []
    key, layers = stated
    extra = config.get("num_nextn_predict_layers")
    allowed = {layers} | ({layers + extra} if isinstance(extra, int) else set())
    count = max(found) + 1
    if count in allowed and len(found) == count:
        return []
    gaps = sorted(set(range(count)) - found) if count <= 100_000 else []  # hostile indices
    held = f"the tensors hold {count} layers (0-{count - 1})"
    if gaps:
        held += f" with layers {', '.join(map(str, gaps[:5]))} absent"
    return [_mismatch(key, layers, held)]


def _embedding(config: Mapping[str, Any], tensors: Sequence[TensorInfo]) -> list[Problem]:
    embed = next(
        (
            t
            for t in tensors
            if t.name.endswith(_EMBED) and len(t.shape) == 2 and t.dtype not in _INT_DTYPES
        ),
        None,
    )
    if embed is None:
        return []
    rows, width = embed.shape
    problems = []
    vocab = _first(config, "vocab_size", "padded_vocab_size")
    if vocab is not None and vocab[1] != rows:
        problems.append(_mismatch(vocab[0], vocab[1], f"{embed.name} has {rows} rows"))
    hidden = _first(config, "hidden_size", "n_embd", "d_model")
    if hidden is not None and hidden[1] != width:
        problems.append(_mismatch(hidden[0], hidden[1], f"{embed.name} is {width} wide"))
    return problems


def _heads(config: Mapping[str, Any], tensors: Sequence[TensorInfo]) -> list[Problem]:
    heads = _first(config, "num_attention_heads", "n_head")
    hidden = _first(config, "hidden_size", "n_embd")
    if heads is None or hidden is None or heads[1] <= 0:
        return []
    head_dim = config.get("head_dim")
    if not isinstance(head_dim, int) or head_dim <= 0:
        head_dim = hidden[1] // heads[1]
    kv = _first(config, "num_key_value_heads") or ("num_attention_heads", heads[1])
    problems = []
    for proj, (key, count) in (("q_proj", heads), ("k_proj", kv)):
        t = _layer0(tensors, proj)
        if t is not None and t.shape[0] != count * head_dim:
            problems.append(
                _mismatch(
                    key,
                    count,
                    f"{t.name} has {t.shape[0]} rows, not {count} heads x {head_dim} (head_dim)",
                )
            )
    return problems


def _layer0(tensors: Sequence[TensorInfo], proj: str) -> TensorInfo | None:
    for t in tensors:
        m = _LAYER.search(t.name)
        if (
            m
            and m.group(1) == "0"
            and t.name.endswith(f"{proj}.weight")
            and len(t.shape) == 2
            and t.dtype not in _INT_DTYPES
        ):
            return t
    return None


def _experts(config: Mapping[str, Any], names: Sequence[str]) -> list[Problem]:
    stated = _first(
        config, "num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"
    )
    found = {int(m.group(1)) for n in names if (m := _EXPERT.search(n))}
    if stated is None or not found or max(found) + 1 == stated[1]:
        return []
    return [_mismatch(stated[0], stated[1], f"the tensors hold {max(found) + 1} experts")]


def _tied(config: Mapping[str, Any], names: Sequence[str]) -> list[Problem]:
    if config.get("tie_word_embeddings") is not False or any(n.endswith(_HEADS) for n in names):
        return []
    return [
        _mismatch(
            "tie_word_embeddings",
            "false",
            "no output projection (lm_head.weight) is in the tensors: with untied embeddings "
            "vLLM needs one",
        )
    ]
