"""Write real safetensors files and Hugging Face model folders for tests, at any size.

Tensor data is left as a hole (``truncate``), so a 4 GB shard costs no disk and no time,
yet its size on disk is exactly what its header says. Pass ``fill=True`` to write
deterministic non-zero bytes instead (for hashing tests; keep those small).

    write_safetensors(path, {"w": ("BF16", (4, 4))})
    write_checkpoint(folder, n_shards=3)                      # tiny llama, index, config, tokenizer
    write_checkpoint(folder, n_shards=2, hidden=16384)        # multi-GB sparse shards
    write_checkpoint(folder, quant="fp8")                      # F8_E4M3 weights + scales
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DTYPE_BITS = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "I64": 64,
    "U64": 64,
    "F64": 64,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
}

Spec = tuple[str, tuple[int, ...]]  # (dtype, shape)


def tensor_bytes(dtype: str, shape: tuple[int, ...]) -> int:
    """Bytes of one tensor's data (unknown dtypes count 2 bytes per element)."""
    n = 1
    for d in shape:
        n *= d
    return (n * DTYPE_BITS.get(dtype, 16) + 7) // 8


def header_for(
    tensors: Mapping[str, Spec], metadata: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The JSON header (as a dict) for tensors laid out back to back in the given order."""
    header: dict[str, Any] = {}
    if metadata is not None:
        header["__metadata__"] = dict(metadata)
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = tensor_bytes(dtype, shape)
        header[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    return header


def write_raw(
    path: Path,
    header: Mapping[str, Any] | bytes,
    data_bytes: int,
    *,
    fill: bool = False,
    length: int | None = None,
) -> Path:
    """Write 8-byte length + header + ``data_bytes`` of data (a hole unless ``fill``).

    ``header`` may be a dict (serialised as JSON, padded to 8 bytes) or raw bytes;
    ``length`` overrides the length field (for absurd or lying lengths).
    """
    raw = header if isinstance(header, bytes) else _json_header(header)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(raw) if length is None else length))
        f.write(raw)
        if fill:
            _write_pattern(f, data_bytes, seed=path.name)
        else:
            f.truncate(8 + len(raw) + data_bytes)
    return path


def _json_header(header: Mapping[str, Any]) -> bytes:
    raw = json.dumps(header, separators=(",", ":")).encode()
    return raw + b" " * (-len(raw) % 8)


def _write_pattern(f: Any, n_bytes: int, seed: str) -> None:
    block = hashlib.sha256(seed.encode()).digest() * 2048  # 64 KiB, deterministic per file name
    while n_bytes > 0:
        chunk = block[:n_bytes]
        f.write(chunk)
        n_bytes -= len(chunk)


def write_safetensors(
    path: str | Path,
    tensors: Mapping[str, Spec],
    *,
    metadata: Mapping[str, str] | None = None,
    fill: bool = False,
) -> Path:
    """Write a valid safetensors file holding ``tensors`` ({name: (dtype, shape)})."""
    header = header_for(tensors, metadata if metadata is not None else {"format": "pt"})
    data = sum(tensor_bytes(d, s) for d, s in tensors.values())
    return write_raw(Path(path), header, data, fill=fill)


def llama_tensors(
    *,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    intermediate: int | None = None,
    vocab: int = 256,
    dtype: str = "BF16",
    quant: str | None = None,
) -> dict[str, Spec]:
    """Tensor names and shapes of a Llama model, as Hugging Face writes them.

    ``quant``: None, ``"fp8"`` (F8_E4M3 linear weights + F32 weight_scale) or ``"awq"``
    (I32 qweight/qzeros + F16 scales, group size 128 or the input size if smaller).
    """
    ff = intermediate or hidden * 2
    kv = hidden // heads * kv_heads
    out: dict[str, Spec] = {"model.embed_tokens.weight": (dtype, (vocab, hidden))}
    for i in range(layers):
        p = f"model.layers.{i}"
        linears = {
            f"{p}.self_attn.q_proj": (hidden, hidden),
            f"{p}.self_attn.k_proj": (kv, hidden),
            f"{p}.self_attn.v_proj": (kv, hidden),
            f"{p}.self_attn.o_proj": (hidden, hidden),
            f"{p}.mlp.gate_proj": (ff, hidden),
            f"{p}.mlp.up_proj": (ff, hidden),
            f"{p}.mlp.down_proj": (hidden, ff),
        }
        out[f"{p}.input_layernorm.weight"] = (dtype, (hidden,))
        for name, (rows, cols) in linears.items():
            out.update(_linear(name, rows, cols, dtype, quant))
        out[f"{p}.post_attention_layernorm.weight"] = (dtype, (hidden,))
    out["model.norm.weight"] = (dtype, (hidden,))
    out["lm_head.weight"] = (dtype, (vocab, hidden))
    return out


def _linear(name: str, rows: int, cols: int, dtype: str, quant: str | None) -> dict[str, Spec]:
    if quant is None:
        return {f"{name}.weight": (dtype, (rows, cols))}
    if quant == "fp8":
        return {f"{name}.weight": ("F8_E4M3", (rows, cols)), f"{name}.weight_scale": ("F32", ())}
    if quant == "awq":
        group = min(128, cols)
        return {
            f"{name}.qweight": ("I32", (cols, rows // 8)),
            f"{name}.qzeros": ("I32", (cols // group, rows // 8)),
            f"{name}.scales": ("F16", (cols // group, rows)),
        }
    raise ValueError(f"unknown quant {quant!r}")


def llama_config(
    *,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    intermediate: int | None = None,
    vocab: int = 256,
    dtype: str = "bfloat16",
    quant: str | None = None,
) -> dict[str, Any]:
    """A Llama ``config.json`` matching :func:`llama_tensors`."""
    config: dict[str, Any] = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "intermediate_size": intermediate or hidden * 2,
        "vocab_size": vocab,
        "max_position_embeddings": 4096,
        "torch_dtype": dtype,
        "rms_norm_eps": 1e-5,
    }
    if quant == "fp8":
        config["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic"}
    elif quant == "awq":
        config["quantization_config"] = {
            "quant_method": "awq",
            "bits": 4,
            "group_size": 128,
            "zero_point": True,
            "version": "gemm",
        }
    return config


def shard_name(i: int, n: int) -> str:
    """``model-00001-of-00003.safetensors`` (1-based)."""
    return f"model-{i:05d}-of-{n:05d}.safetensors"


def write_checkpoint(
    folder: str | Path,
    *,
    n_shards: int = 2,
    tensors: Mapping[str, Spec] | None = None,
    config: Mapping[str, Any] | None = None,
    tokenizer: bool = True,
    index: bool = True,
    quant: str | None = None,
    fill: bool = False,
    **llama: Any,
) -> Path:
    """Write a Hugging Face model folder: shards, index, config.json and tokenizer files.

    Tensors default to :func:`llama_tensors` (``llama`` keyword arguments pass through,
    e.g. ``hidden=16384`` for multi-GB sparse shards) and are dealt to ``n_shards`` shards
    evenly, in order. ``n_shards=1`` writes ``model.safetensors`` (and no index unless asked).
    """
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    specs = dict(tensors) if tensors is not None else llama_tensors(quant=quant, **llama)
    names = list(specs)
    weight_map: dict[str, str] = {}
    for i in range(n_shards):
        file = "model.safetensors" if n_shards == 1 else shard_name(i + 1, n_shards)
        part = {
            n: specs[n]
            for n in names[i * len(names) // n_shards : (i + 1) * len(names) // n_shards]
        }
        write_safetensors(root / file, part, fill=fill)
        weight_map.update(dict.fromkeys(part, file))
    if index and n_shards > 1:
        total = sum(tensor_bytes(d, s) for d, s in specs.values())
        (root / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2)
        )
    cfg = config if config is not None else llama_config(quant=quant, **llama)
    (root / "config.json").write_text(json.dumps(cfg, indent=2))
    if tokenizer:
        (root / "tokenizer.json").write_text(
            json.dumps({"version": "1.0", "model": {"type": "BPE"}})
        )
        (root / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 4096}))
    return root


def write_hf_cache(
    cache: str | Path,
    repo_id: str,
    folder: str | Path,
    *,
    revision: str = "0" * 40,
    ref: str | None = "main",
) -> Path:
    """Move a model folder into Hugging Face hub cache layout; return the repo folder.

    Weight files become ``blobs/<sha256>``, small files ``blobs/<git sha1>``, and
    ``snapshots/<revision>/<file>`` are relative symlinks to them, as huggingface_hub does.
    """
    repo = Path(cache) / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / revision
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snap.mkdir(parents=True, exist_ok=True)
    for src in sorted(Path(folder).iterdir()):
        blob = repo / "blobs" / (_sha256(src) if src.suffix == ".safetensors" else _git_sha1(src))
        src.replace(blob)
        (snap / src.name).symlink_to(Path("..", "..", "blobs", blob.name))
    if ref is not None:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / ref).write_text(revision)
    return repo


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _git_sha1(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
