"""Write a real, loadable tiny llama GGUF (random F32 weights, SentencePiece-style vocab).

Follows appendix A of the ecosystem notes: 2 layers, n_embd 64, 4 heads / 2 KV heads,
n_ff 128, 267 tokens, a chat template. About 440 KB, deterministic (fixed numpy seed).
llama.cpp loads it, and ``GGUFReader`` reads back 21 tensors.

    write_tiny_llama_gguf(tmp_path / "tiny.gguf")
    write_tiny_llama_gguf(tmp_path / "tiny.gguf", split_max_tensors=8)   # tiny-00001-of-00003.gguf ...
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import numpy as np

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def _vocab() -> tuple[list[str], list[int]]:
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    pieces = ["\u2581", "\u2581a", "\u2581the", "\u2581hello", "\u2581world", "e", "t", "o"]
    return tokens + pieces, types + [1] * len(pieces)


def write_tiny_llama_gguf(
    path: str | Path,
    *,
    n_embd: int = 64,
    n_ff: int = 128,
    n_layer: int = 2,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ctx: int = 512,
    seed: int = 0,
    split_max_tensors: int = 0,
    name: str = "tiny-random-llama",
) -> list[Path]:
    """Write the model; return the files written (several when ``split_max_tensors`` splits it)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    tokens, types = _vocab()
    w = gguf.GGUFWriter(out, "llama", split_max_tensors=split_max_tensors)
    _add_metadata(
        w,
        name=name,
        n_ctx=n_ctx,
        n_embd=n_embd,
        n_ff=n_ff,
        n_layer=n_layer,
        n_head=n_head,
        n_head_kv=n_head_kv,
        tokens=tokens,
        types=types,
    )

    def t(*shape: int) -> Any:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    head_dim = n_embd // n_head
    kv = n_head_kv * head_dim
    w.add_tensor("token_embd.weight", t(len(tokens), n_embd))
    w.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    w.add_tensor("output.weight", t(len(tokens), n_embd))
    for i in range(n_layer):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        w.add_tensor(f"blk.{i}.attn_q.weight", t(n_embd, n_embd))
        w.add_tensor(f"blk.{i}.attn_k.weight", t(kv, n_embd))
        w.add_tensor(f"blk.{i}.attn_v.weight", t(kv, n_embd))
        w.add_tensor(f"blk.{i}.attn_output.weight", t(n_embd, n_embd))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", t(n_ff, n_embd))
        w.add_tensor(f"blk.{i}.ffn_up.weight", t(n_ff, n_embd))
        w.add_tensor(f"blk.{i}.ffn_down.weight", t(n_embd, n_ff))
    files = [Path(p) for p in w.format_shard_names(out)] if split_max_tensors else [out]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return files


def _add_metadata(
    w: Any,
    *,
    name: str,
    n_ctx: int,
    n_embd: int,
    n_ff: int,
    n_layer: int,
    n_head: int,
    n_head_kv: int,
    tokens: list[str],
    types: list[int],
) -> None:
    w.add_name(name)
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * len(tokens))
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_chat_template(CHAT_TEMPLATE)
