"""Build a tiny real Llama checkpoint offline that real vLLM (CPU build) serves.

Run with the vLLM venv's python (it needs ``tokenizers``, ``transformers`` and ``torch``)::

    python tests/builders/tiny_hf.py OUT_DIR [--shards 2]

A byte-level BPE tokenizer (vocabulary ~500) is trained on a few lines of text and wrapped in a
``PreTrainedTokenizerFast`` with bos/eos/pad/unk and a simple chat template; the model is a
2-layer ``LlamaForCausalLM`` with random float32 weights (about 1.7 MB), head_dim 32 (the CPU
attention's range is 32..512) and 2048 positions. ``--shards 2`` splits the tensors into two
safetensors files with a ``model.safetensors.index.json``. Takes a few seconds; writes nothing
outside OUT_DIR. This file imports nothing from bringup.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# Run as a script, this folder would come first on sys.path, and its safetensors.py (the test
# builder) would shadow the real safetensors package that transformers imports.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    del sys.path[0]

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world! This is a tiny model for testing real inference servers.",
    "bringup takes a server from weights on disk to verified serving.",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000. Punctuation: , . ; : ! ? ( ) [ ] { }",
    "user assistant system: a chat between a person and a helpful machine.",
    "Once upon a time there was a small language model that answered every question.",
]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
SPECIAL = ["<unk>", "<s>", "</s>", "<pad>"]


def build(out: Path, shards: int = 1, seed: int = 0) -> Path:
    """Write the tokenizer, config and weights into ``out``; return ``out``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(CORPUS * 4, trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        model_max_length=2048,
    )
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(out)

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=2048,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(cfg).to(torch.float32)
    model.save_pretrained(out, safe_serialization=True)
    if shards > 1:
        _split(out, shards)
    return out


def _split(out: Path, shards: int) -> None:
    """Split model.safetensors into ``shards`` files and write the index that names them."""
    from safetensors.torch import load_file, save_file

    single = out / "model.safetensors"
    tensors = load_file(single)
    names = sorted(tensors)
    weight_map: dict[str, str] = {}
    total = 0
    for i in range(shards):
        part = names[i::shards]
        file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        save_file({n: tensors[n].contiguous() for n in part}, out / file, metadata={"format": "pt"})
        for n in part:
            weight_map[n] = file
            total += tensors[n].numel() * tensors[n].element_size()
    single.unlink()
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--shards", type=int, default=1)
    args = parser.parse_args()
    build(args.out, args.shards)
    print(args.out)


if __name__ == "__main__":
    main()
