"""One damaged checkpoint per problem kind: the right kind, the right file, a concrete fix."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from bringup.core.checkpoint import PROBLEM_KINDS, format_size

from builders.gguf import write_tiny_llama_gguf
from builders.safetensors import (
    header_for,
    llama_config,
    llama_tensors,
    shard_name,
    write_checkpoint,
    write_hf_cache,
    write_raw,
    write_safetensors,
)

SHARD1, SHARD2 = shard_name(1, 2), shard_name(2, 2)


def test_good_checkpoint_passes(tmp_path: Path, verify) -> None:
    """A complete sharded checkpoint has no problems, exit 0, and the right totals."""
    write_checkpoint(tmp_path, n_shards=3)
    result = verify(tmp_path, "--json")
    assert result.code == 0, result.out
    report = result.report
    assert list(report) == [
        "schema_version",
        "ok",
        "format",
        "files",
        "tensors",
        "parameters",
        "bytes_by_dtype",
        "problems",
        "layouts",
    ]
    expected = llama_tensors()
    params = sum(_numel(shape) for _, shape in expected.values())
    assert report == {
        "schema_version": 1,
        "ok": True,
        "format": "safetensors",
        "files": 3,
        "tensors": len(expected),
        "parameters": params,
        "bytes_by_dtype": {"BF16": 2 * params},
        "problems": [],
        "layouts": [],
    }


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def test_missing_shard(tmp_path: Path, verify) -> None:
    """A shard the index names but that is absent is missing_shard, fix: fetch it again."""
    write_checkpoint(tmp_path, n_shards=3)
    (tmp_path / shard_name(2, 3)).unlink()
    result = verify(tmp_path, "--json")
    assert result.code == 1
    assert result.kinds() == [("missing_shard", shard_name(2, 3))]
    assert result.problem("missing_shard")["fix"].startswith(f"fetch {shard_name(2, 3)} again")


def test_unreferenced_file(tmp_path: Path, verify) -> None:
    """A .safetensors file the index does not name is reported, and its tensors are not counted."""
    write_checkpoint(tmp_path, n_shards=2)
    before = verify(tmp_path, "--json").report
    write_safetensors(tmp_path / "consolidated.safetensors", llama_tensors())
    result = verify(tmp_path, "--json")
    assert result.kinds() == [("unreferenced_file", "consolidated.safetensors")]
    assert result.report["tensors"] == before["tensors"]
    assert "remove consolidated.safetensors" in result.problem("unreferenced_file")["fix"]


def test_truncated_multi_gb_shard(tmp_path: Path, verify) -> None:
    """A 4.8 GB sparse shard cut to 1.2 GB is truncated, both sizes in the detail; the fix says
    what happened and what to do, not the problem again."""
    write_checkpoint(tmp_path, n_shards=2, hidden=16384)
    full = (tmp_path / SHARD1).stat().st_size
    assert full > 4 * 10**9
    os.truncate(tmp_path / SHARD1, 1_200_000_000)
    result = verify(tmp_path, "--json")
    assert result.kinds() == [("truncated", SHARD1)]
    problem = result.problem("truncated")
    assert problem["detail"] == f"the header says {full / 1e9:.2f} GB, 1.20 GB on disk"
    assert (
        problem["fix"] == f"fetch {SHARD1} again: the download stopped before the end of the file"
    )
    assert problem["detail"] not in problem["fix"]


def test_empty_file_is_truncated_and_says_empty(tmp_path: Path, verify) -> None:
    """A zero-length shard gets its own finding: truncated, 'the file is empty'."""
    write_checkpoint(tmp_path, n_shards=2)
    os.truncate(tmp_path / SHARD2, 0)
    problem = verify(tmp_path, "--json").problem("truncated")
    assert (problem["file"], problem["detail"]) == (SHARD2, "the file is empty (0 bytes)")


def test_header_invalid(tmp_path: Path, verify) -> None:
    """A header that is not JSON is header_invalid."""
    write_raw(tmp_path / "model.safetensors", b'{"w": {"dtype": "F16", ', 0)
    result = verify(tmp_path / "model.safetensors", "--json")
    assert result.kinds() == [("header_invalid", "model.safetensors")]


def test_header_too_large(tmp_path: Path, verify) -> None:
    """A header length of 2^60 is refused at once as header_too_large."""
    write_raw(tmp_path / "model.safetensors", b"{}      ", 0, length=2**60)
    result = verify(tmp_path / "model.safetensors", "--json")
    assert result.kinds() == [("header_too_large", "model.safetensors")]
    assert str(2**60) in result.problem("header_too_large")["detail"]


def test_lfs_pointer(tmp_path: Path, verify) -> None:
    """A git-lfs pointer in place of a shard is lfs_pointer only (no index noise), fix: git lfs pull."""
    write_checkpoint(tmp_path, n_shards=2)
    (tmp_path / SHARD1).write_text(
        "version https://git-lfs.github.com/spec/v1\n"
        "oid sha256:" + "ab" * 32 + "\nsize 4294967296\n"
    )
    result = verify(tmp_path, "--json")
    assert result.kinds() == [("lfs_pointer", SHARD1)]
    problem = result.problem("lfs_pointer")
    assert problem["file"] == SHARD1
    assert "4.29 GB" in problem["detail"]
    assert f"git lfs pull --include {SHARD1}" in problem["fix"]


def test_offsets_invalid_overlap(tmp_path: Path, verify) -> None:
    """Overlapping tensor spans are offsets_invalid."""
    header = {
        "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
        "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]},
    }
    write_raw(tmp_path / "model.safetensors", header, 24)
    result = verify(tmp_path / "model.safetensors", "--json")
    assert result.kinds() == [("offsets_invalid", "model.safetensors")]
    assert "overlaps" in result.problem("offsets_invalid")["detail"]


def test_offsets_invalid_wrong_span_size(tmp_path: Path, verify) -> None:
    """A span that does not equal shape x dtype size is offsets_invalid."""
    header = {"a": {"dtype": "BF16", "shape": [4, 4], "data_offsets": [0, 30]}}
    write_raw(tmp_path / "model.safetensors", header, 30)
    detail = verify(tmp_path / "model.safetensors", "--json").problem("offsets_invalid")["detail"]
    assert "needs 32" in detail


def test_dtype_unknown(tmp_path: Path, verify) -> None:
    """A dtype safetensors does not define is dtype_unknown."""
    write_raw(tmp_path / "model.safetensors", header_for({"a": ("Q9_Z", (4,))}), 8)
    result = verify(tmp_path / "model.safetensors", "--json")
    assert result.kinds() == [("dtype_unknown", "model.safetensors")]


def test_duplicate_tensor(tmp_path: Path, verify) -> None:
    """A tensor present in two shards is duplicate_tensor, reported on the second shard."""
    tensors = {"a.weight": ("BF16", (4, 4)), "b.weight": ("BF16", (4, 4))}
    write_checkpoint(tmp_path, n_shards=2, tensors=tensors)
    write_safetensors(
        tmp_path / SHARD2, {"b.weight": ("BF16", (4, 4)), "a.weight": ("BF16", (4, 4))}
    )
    result = verify(tmp_path, "--json")
    assert result.kinds() == [("duplicate_tensor", SHARD2)]
    assert "a.weight" in result.problem("duplicate_tensor")["detail"]


def test_index_tensor_missing(tmp_path: Path, verify) -> None:
    """The index mapping a tensor to a shard whose header lacks it is index_tensor_missing."""
    write_checkpoint(tmp_path, n_shards=2)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    index["weight_map"]["model.layers.9.mlp.up_proj.weight"] = SHARD1
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    result = verify(tmp_path, "--json")
    assert result.kinds() == [("index_tensor_missing", SHARD1)]
    assert "model.layers.9.mlp.up_proj.weight" in result.problem("index_tensor_missing")["detail"]


def test_hash_mismatch_in_hf_cache(tmp_path: Path, verify) -> None:
    """A cache blob whose bytes no longer hash to its name is hash_mismatch under --hash only."""
    write_checkpoint(tmp_path / "m", n_shards=2, fill=True)
    repo = write_hf_cache(tmp_path / "hub", "org/model", tmp_path / "m")
    blob = (repo / "snapshots" / ("0" * 40) / SHARD2).resolve()
    with blob.open("r+b") as f:
        f.seek(-4, os.SEEK_END)
        f.write(b"\xff\x00\xff\x00")
    assert verify(repo, "--json").code == 0
    result = verify(repo, "--json", "--hash")
    assert result.kinds() == [("hash_mismatch", SHARD2)]
    fix = result.problem("hash_mismatch")["fix"]  # the repo id comes from models--org--model
    hub = tmp_path / "hub"
    assert fix.startswith("download it again (its contents differ from what was published")
    assert fix.endswith(f": `hf download org/model --include {SHARD2} --cache-dir {hub}`")


def test_config_missing(tmp_path: Path, verify) -> None:
    """A folder without config.json is config_missing."""
    write_checkpoint(tmp_path, n_shards=2)
    (tmp_path / "config.json").unlink()
    assert verify(tmp_path, "--json").kinds() == [("config_missing", "config.json")]


def test_tokenizer_missing(tmp_path: Path, verify) -> None:
    """A folder without any tokenizer file is config_missing on tokenizer.json."""
    write_checkpoint(tmp_path, n_shards=2, tokenizer=False)
    result = verify(tmp_path, "--json")
    assert result.kinds() == [("config_missing", "tokenizer.json")]
    assert "--tokenizer" in result.problem("config_missing")["fix"]


def test_config_invalid_json(tmp_path: Path, verify) -> None:
    """A config.json that does not parse is config_invalid."""
    write_checkpoint(tmp_path, n_shards=2)
    (tmp_path / "config.json").write_text('{"architectures": ["LlamaForCausalLM"],')
    assert verify(tmp_path, "--json").kinds() == [("config_invalid", "config.json")]


def test_config_without_architecture(tmp_path: Path, verify) -> None:
    """A config.json that names no architecture is config_invalid."""
    write_checkpoint(tmp_path, n_shards=2, config={"model_type": "llama"})
    assert "architecture" in verify(tmp_path, "--json").problem("config_invalid")["detail"]


def test_quantization_mismatch_fp8_config_bf16_tensors(tmp_path: Path, verify) -> None:
    """quantization_config fp8 over BF16 tensors is quantization_mismatch."""
    config = {"architectures": ["LlamaForCausalLM"], "quantization_config": {"quant_method": "fp8"}}
    write_checkpoint(tmp_path, n_shards=2, config=config)
    result = verify(tmp_path, "--json")
    assert result.kinds() == [("quantization_mismatch", "config.json")]
    assert "F8_E4M3 weights" in result.problem("quantization_mismatch")["detail"]


def test_quantization_mismatch_fp8_tensors_no_config(tmp_path: Path, verify) -> None:
    """FP8 tensors with no quantization_config are quantization_mismatch."""
    write_checkpoint(
        tmp_path, n_shards=2, quant="fp8", config={"architectures": ["LlamaForCausalLM"]}
    )
    assert verify(tmp_path, "--json").kinds() == [("quantization_mismatch", "config.json")]


def test_quantized_checkpoints_that_match_pass(tmp_path: Path, verify) -> None:
    """FP8 and AWQ checkpoints whose config matches their tensors pass."""
    write_checkpoint(tmp_path / "fp8", n_shards=2, quant="fp8")
    write_checkpoint(tmp_path / "awq", n_shards=2, quant="awq")
    assert verify(tmp_path / "fp8", "--json").code == 0
    awq = verify(tmp_path / "awq", "--json")
    assert awq.code == 0, awq.kinds()
    assert awq.report["bytes_by_dtype"].keys() == {"I32", "F16", "BF16"}


def test_awq_config_without_qzeros(tmp_path: Path, verify) -> None:
    """An AWQ config over tensors with no qzeros is quantization_mismatch naming qzeros."""
    tensors = {k: v for k, v in llama_tensors(quant="awq").items() if not k.endswith("qzeros")}
    write_checkpoint(tmp_path, n_shards=2, tensors=tensors, quant="awq")
    assert "qzeros" in verify(tmp_path, "--json").problem("quantization_mismatch")["detail"]


def test_gguf_invalid(tmp_path: Path, verify) -> None:
    """A GGUF whose tensor table is garbage is gguf_invalid, not a crash."""
    (path,) = write_tiny_llama_gguf(tmp_path / "tiny.gguf")
    data = bytearray(path.read_bytes())
    data[4:8] = struct.pack("<I", 99)  # version 99
    path.write_bytes(bytes(data))
    result = verify(path, "--json")
    assert result.code == 1
    assert result.kinds() == [("gguf_invalid", "tiny.gguf")]


def test_gguf_truncated_data_is_truncated_with_both_sizes(tmp_path: Path, verify) -> None:
    """A GGUF cut short inside its tensor data is truncated, with the size the table needs and
    the size on disk."""
    (path,) = write_tiny_llama_gguf(tmp_path / "tiny.gguf")
    full = path.stat().st_size
    os.truncate(path, 300_000)
    result = verify(path, "--json")
    assert result.code == 1
    assert result.kinds() == [("truncated", "tiny.gguf")]
    assert result.problem("truncated")["detail"] == (
        f"the tensor table says {format_size(full)} ({full:,} bytes), 300.00 kB (300,000 bytes) on disk"
    )


def test_gguf_cut_inside_its_header_is_truncated(tmp_path: Path, verify) -> None:
    """A GGUF that ends inside its metadata (the vocabulary) is truncated, not a parser error."""
    (path,) = write_tiny_llama_gguf(tmp_path / "tiny.gguf")
    os.truncate(path, 2_000)
    detail = verify(path, "--json").problem("truncated")["detail"]
    assert detail.startswith("the file ends inside its GGUF header: it needs at least ")
    assert detail.endswith(", 2,000 bytes on disk")


def _tensor_info(path: Path, index: int) -> tuple[int, int]:
    """Byte positions of tensor ``index``'s type and data offset in the tensor table."""
    import gguf

    field = gguf.GGUFReader(path).tensors[index].field
    sizes = [int(part.nbytes) for part in field.parts]
    return field.offset + sum(sizes[:-2]), field.offset + sum(sizes[:-1])


def test_gguf_unknown_tensor_type_is_dtype_unknown(tmp_path: Path, verify) -> None:
    (path,) = write_tiny_llama_gguf(tmp_path / "tiny.gguf")
    type_at, _ = _tensor_info(path, 3)
    data = bytearray(path.read_bytes())
    data[type_at : type_at + 4] = struct.pack("<I", 4)  # Q4_2: removed from GGML long ago
    path.write_bytes(bytes(data))
    result = verify(path, "--json")
    assert result.kinds() == [("dtype_unknown", "tiny.gguf")]
    assert result.problem("dtype_unknown")["detail"].startswith(
        "tensor 'blk.0.attn_norm.weight' has tensor type 4, which GGUF (gguf "
    )


def test_gguf_tensor_data_outside_the_file_is_offsets_invalid(tmp_path: Path, verify) -> None:
    (path,) = write_tiny_llama_gguf(tmp_path / "tiny.gguf")
    _, offset_at = _tensor_info(path, 3)
    data = bytearray(path.read_bytes())
    data[offset_at : offset_at + 8] = struct.pack("<Q", 10**15)
    path.write_bytes(bytes(data))
    detail = verify(path, "--json").problem("offsets_invalid")["detail"]
    assert detail.startswith(
        "tensor 'blk.0.attn_norm.weight' has data offset 1,000,000,000,000,000, expected "
    )
    assert detail.endswith(f": its data lies outside the file ({format_size(len(data))})")


def test_split_missing(tmp_path: Path, verify) -> None:
    """A split GGUF with part 2 absent is split_missing for that part."""
    parts = write_tiny_llama_gguf(tmp_path / "tiny.gguf", split_max_tensors=8)
    parts[1].unlink()
    result = verify(parts[0], "--json")
    assert result.kinds() == [("split_missing", "tiny-00002-of-00003.gguf")]


def test_every_kind_is_covered() -> None:
    """This module has a case for every kind in the vocabulary, spelled as the issue spells it."""
    assert PROBLEM_KINDS == (
        "missing_shard",
        "unreferenced_file",
        "truncated",
        "header_invalid",
        "header_too_large",
        "lfs_pointer",
        "offsets_invalid",
        "dtype_unknown",
        "duplicate_tensor",
        "index_tensor_missing",
        "hash_mismatch",
        "config_missing",
        "config_invalid",
        "quantization_mismatch",
        "gguf_invalid",
        "split_missing",
        "bad_magic",
        "config_mismatch",
        "architecture_unknown",
        "shard_of_set",
        "interrupted_download",
    )
    source = Path(__file__).read_text()
    assert all(f"def test_{kind}" in source for kind in PROBLEM_KINDS)


def test_bad_magic(tmp_path: Path, verify) -> None:
    """A .gguf file that is not GGUF at all is bad_magic showing its first bytes, exit 1."""
    path = tmp_path / "model.gguf"
    path.write_bytes(b"PK\x03\x04" + b"\0" * 64)
    result = verify(path, "--json")
    assert result.code == 1
    assert result.problem("bad_magic")["detail"] == (
        "it does not start with the GGUF magic: its first bytes are b'PK\\x03\\x04'"
    )


def test_config_mismatch(tmp_path: Path, verify) -> None:
    """config.json against the tensors, each mismatching key named (vLLM fails these at load)."""
    cases = {
        "num_hidden_layers": {"num_hidden_layers": 3},
        "vocab_size": {"vocab_size": 300},
        "hidden_size": {"hidden_size": 96},
        "num_key_value_heads": {"num_key_value_heads": 4},
        "tie_word_embeddings": {"tie_word_embeddings": False},
    }
    for key, change in cases.items():
        folder = tmp_path / key
        config = {**llama_config(), **change}
        tensors = llama_tensors()
        if key == "tie_word_embeddings":
            del tensors["lm_head.weight"]
        write_checkpoint(folder, n_shards=2, config=config, tensors=tensors)
        result = verify(folder, "--json")
        assert result.code == 1, key
        details = [p["detail"] for p in result.report["problems"] if p["kind"] == "config_mismatch"]
        assert details, key
        assert details[0].startswith(f"config.json says {key} "), details
    write_checkpoint(tmp_path / "moe", n_shards=1, config={**llama_config(), "num_local_experts": 4},
                     tensors={**llama_tensors(), **{f"model.layers.0.mlp.experts.{i}.w1.weight":
                                                     ("BF16", (8, 64)) for i in range(8)}})  # fmt: skip
    detail = verify(tmp_path / "moe", "--json").problem("config_mismatch")["detail"]
    assert detail == "config.json says num_local_experts 4, but the tensors hold 8 experts"


def test_config_mismatch_layers_names_both_counts(tmp_path: Path, verify) -> None:
    """A config of 32 layers over tensors of 2: both counts in the sentence."""
    write_checkpoint(tmp_path, n_shards=2, config={**llama_config(), "num_hidden_layers": 32})
    assert verify(tmp_path, "--json").problem("config_mismatch")["detail"] == (
        "config.json says num_hidden_layers 32, but the tensors hold 2 layers (0-1)"
    )


def test_mtp_layers_beside_the_stated_ones_are_not_a_mismatch(tmp_path: Path, verify) -> None:
    """DeepSeek-style num_nextn_predict_layers: one more layer in the tensors is expected."""
    tensors = {**llama_tensors(), "model.layers.2.eh_proj.weight": ("BF16", (64, 128))}
    config = {**llama_config(), "num_nextn_predict_layers": 1}
    write_checkpoint(tmp_path, n_shards=2, config=config, tensors=tensors)
    assert verify(tmp_path, "--json").code == 0


def test_architecture_unknown(tmp_path: Path, verify) -> None:
    """A name vLLM's registry does not list, with the close name it does list."""
    write_checkpoint(
        tmp_path, n_shards=2, config={**llama_config(), "architectures": ["LlamaForCasualLM"]}
    )
    result = verify(tmp_path, "--json")
    assert result.code == 1
    problem = result.problem("architecture_unknown")
    assert "did you mean 'LlamaForCausalLM'?" in problem["detail"]
    assert problem["fix"] == 'set "architectures": ["LlamaForCausalLM"] in config.json'


def test_architectures_vllm_converts_or_once_had(tmp_path: Path, verify) -> None:
    """XForSequenceClassification of a listed XForCausalLM is converted by vLLM (no problem);
    a name vLLM dropped is named with the last version that had it."""
    write_checkpoint(tmp_path / "a", n_shards=2,
                     config={**llama_config(), "architectures": ["LlamaForSequenceClassification"]})  # fmt: skip
    assert verify(tmp_path / "a", "--json").code == 0
    write_checkpoint(tmp_path / "b", n_shards=2,
                     config={**llama_config(), "architectures": ["Phi3SmallForCausalLM"]})  # fmt: skip
    detail = verify(tmp_path / "b", "--json").problem("architecture_unknown")["detail"]
    assert "until v0.9.2" in detail


def test_shard_of_set(tmp_path: Path, verify) -> None:
    """One shard of three given alone: "1 of 3 shards given", the rest named."""
    write_checkpoint(tmp_path, n_shards=3)
    result = verify(tmp_path / shard_name(1, 3), "--json")
    assert result.code == 1
    problem = result.problem("shard_of_set")
    assert problem["detail"] == (
        f"1 of 3 shards given; the rest: {shard_name(2, 3)}, {shard_name(3, 3)} (all beside it)"
    )
    assert problem["fix"] == f"verify the whole checkpoint: `bringup verify {tmp_path}`"


def test_shard_of_set_in_a_cache_gives_the_download_command(tmp_path: Path, verify) -> None:
    """The missing shards of a set in a Hugging Face cache: the exact `hf download` command."""
    write_checkpoint(tmp_path / "m", n_shards=3)
    (tmp_path / "m" / shard_name(3, 3)).unlink()
    repo = write_hf_cache(tmp_path / "hub", "org/model", tmp_path / "m")
    shard = repo / "snapshots" / ("0" * 40) / shard_name(1, 3)
    fix = verify(shard, "--json").problem("shard_of_set")["fix"]
    assert fix.endswith(
        f"`hf download org/model --include 'model-*-of-00003.safetensors' --cache-dir {tmp_path / 'hub'}`"
    )


def test_interrupted_download(tmp_path: Path, verify) -> None:
    """A missing shard and a *.incomplete blob: the blob is named as an interrupted download
    with the command that resumes it; the missing shard gets its `hf download` command."""
    write_checkpoint(tmp_path / "m", n_shards=2)
    repo = write_hf_cache(tmp_path / "hub", "org/model", tmp_path / "m")
    link = repo / "snapshots" / ("0" * 40) / SHARD2
    link.resolve().rename(repo / "blobs" / "abc123.incomplete")
    link.unlink()
    result = verify(repo, "--json")
    hub = tmp_path / "hub"
    blob = result.problem("interrupted_download")
    assert blob["file"] == str(repo / "blobs" / "abc123.incomplete")
    assert blob["detail"].startswith("an interrupted download: ")
    assert (
        blob["fix"]
        == f"resume it: run `hf download org/model --cache-dir {hub}` again; it continues the *.incomplete file"
    )
    missing = result.problem("missing_shard")["fix"]
    assert missing.endswith(f"`hf download org/model --include {SHARD2} --cache-dir {hub}`")


def test_mistral_layout_is_recognised_not_failed(tmp_path: Path, verify) -> None:
    """HF shards with the index beside consolidated.safetensors and params.json (Mistral's
    official repos): vLLM loads what the index names; recognised as a layout, exit 0."""
    write_checkpoint(tmp_path, n_shards=2)
    write_safetensors(tmp_path / "consolidated.safetensors", llama_tensors())
    (tmp_path / "params.json").write_text(json.dumps({"dim": 64, "n_layers": 2}))
    (tmp_path / "pytorch_model.bin").write_bytes(b"\0" * 64)
    (tmp_path / "original").mkdir()
    result = verify(tmp_path, "--json")
    assert result.code == 0, result.report["problems"]
    layouts = result.report["layouts"]
    assert any(note.startswith("Mistral format beside the Hugging Face shards") for note in layouts)
    assert any(note.startswith("original/") for note in layouts)
    assert any("PyTorch .bin" in note for note in layouts)


def test_mistral_format_alone_needs_no_config(tmp_path: Path, verify) -> None:
    """consolidated.safetensors + params.json + tekken.json: what vLLM's mistral format reads."""
    write_safetensors(tmp_path / "consolidated.safetensors", llama_tensors())
    (tmp_path / "params.json").write_text(json.dumps({"dim": 64}))
    (tmp_path / "tekken.json").write_text("{}")
    result = verify(tmp_path, "--json")
    assert result.code == 0, result.report["problems"]
    assert "--load-format mistral" in result.report["layouts"][0]
