"""Finding and scanning checkpoints: every accepted input, and the API the planner uses."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bringup.adapters.checkpoint import resolve_model_path, scan_checkpoint
from bringup.core.checkpoint import TensorInfo
from bringup.errors import InputError

from builders.gguf import write_tiny_llama_gguf
from builders.safetensors import (
    llama_tensors,
    shard_name,
    write_checkpoint,
    write_hf_cache,
    write_safetensors,
)


def test_folder_scan_gives_tensors_config_and_files(tmp_path: Path) -> None:
    """A model folder scans to its shards, every tensor with its shard, and the parsed config."""
    write_checkpoint(tmp_path, n_shards=2, hidden=128, layers=3)
    ckpt = scan_checkpoint(tmp_path)
    assert ckpt.root == str(tmp_path)
    assert ckpt.format == "safetensors"
    assert ckpt.files == (shard_name(1, 2), shard_name(2, 2))
    assert ckpt.config is not None
    assert ckpt.config["num_hidden_layers"] == 3
    assert ckpt.gguf_metadata is None
    assert ckpt.problems == ()
    q = next(t for t in ckpt.tensors if t.name == "model.layers.0.self_attn.q_proj.weight")
    assert q == TensorInfo(
        "model.layers.0.self_attn.q_proj.weight", "BF16", (128, 128), 128 * 128 * 2, q.file
    )
    assert q.file in ckpt.files
    assert {t.name for t in ckpt.tensors} == set(llama_tensors(hidden=128, layers=3))


def test_hf_cache_repo_resolves_to_the_ref_snapshot(tmp_path: Path) -> None:
    """models--org--name resolves to the snapshot refs/main names, even when it is not the newest."""
    write_checkpoint(tmp_path / "a", n_shards=2)
    repo = write_hf_cache(tmp_path / "hub", "org/m", tmp_path / "a", revision="a" * 40)
    write_checkpoint(tmp_path / "b", n_shards=2)
    write_hf_cache(tmp_path / "hub", "org/m", tmp_path / "b", revision="b" * 40, ref=None)
    assert resolve_model_path(repo) == repo / "snapshots" / ("a" * 40)
    (repo / "refs" / "main").unlink()
    os.utime(repo / "snapshots" / ("a" * 40), (1, 1))
    assert resolve_model_path(repo) == repo / "snapshots" / ("b" * 40)


def test_hf_cache_snapshot_scans_through_symlinks(tmp_path: Path) -> None:
    """A cache snapshot (all symlinks to blobs) scans with the snapshot's file names."""
    write_checkpoint(tmp_path / "m", n_shards=2)
    repo = write_hf_cache(tmp_path / "hub", "org/m", tmp_path / "m")
    ckpt = scan_checkpoint(repo / "snapshots" / ("0" * 40))
    assert ckpt.files == (shard_name(1, 2), shard_name(2, 2))
    assert ckpt.problems == ()


def test_dangling_cache_symlink_is_missing_shard(tmp_path: Path) -> None:
    """A snapshot link whose blob is gone (interrupted download) is missing_shard, with or without index."""
    write_checkpoint(tmp_path / "m", n_shards=2)
    repo = write_hf_cache(tmp_path / "hub", "org/m", tmp_path / "m")
    snap = repo / "snapshots" / ("0" * 40)
    (snap / shard_name(2, 2)).resolve().unlink()
    assert [(p.kind, p.file) for p in scan_checkpoint(repo).problems] == [
        ("missing_shard", shard_name(2, 2))
    ]
    (snap / "model.safetensors.index.json").unlink()
    assert [(p.kind, p.file) for p in scan_checkpoint(repo).problems] == [
        ("missing_shard", shard_name(2, 2))
    ]


def test_single_safetensors_file(tmp_path: Path) -> None:
    """A single .safetensors file is its own root; no config checks apply."""
    path = write_safetensors(tmp_path / "adapter.safetensors", {"w": ("F16", (8, 8))})
    ckpt = scan_checkpoint(path)
    assert (ckpt.root, ckpt.files, ckpt.problems) == (str(path), ("adapter.safetensors",), ())
    assert ckpt.parameters == 64
    assert ckpt.bytes_by_dtype == {"F16": 128}


def test_gguf_scan_reads_metadata_without_vocab_arrays(tmp_path: Path) -> None:
    """A GGUF scans to its 21 tensors and scalar metadata; the vocabulary arrays are left out."""
    (path,) = write_tiny_llama_gguf(tmp_path / "tiny.gguf")
    ckpt = scan_checkpoint(path)
    assert (ckpt.format, ckpt.files, len(ckpt.tensors), ckpt.problems) == (
        "gguf",
        ("tiny.gguf",),
        21,
        (),
    )
    meta = ckpt.gguf_metadata
    assert meta is not None
    assert meta["general.architecture"] == "llama"
    assert meta["llama.block_count"] == 2
    assert "tokenizer.ggml.tokens" not in meta
    emb = next(t for t in ckpt.tensors if t.name == "token_embd.weight")
    assert (emb.dtype, emb.shape, emb.nbytes) == ("F32", (267, 64), 267 * 64 * 4)


def test_split_gguf_from_any_part(tmp_path: Path) -> None:
    """Any part of a split GGUF resolves to part 1 and scans all parts."""
    parts = write_tiny_llama_gguf(tmp_path / "tiny.gguf", split_max_tensors=8)
    assert resolve_model_path(parts[2]) == parts[0]
    ckpt = scan_checkpoint(parts[1])
    assert ckpt.files == tuple(p.name for p in parts)
    assert len(ckpt.tensors) == 21
    assert ckpt.problems == ()


def test_folder_with_one_gguf(tmp_path: Path) -> None:
    """A folder holding one GGUF model (split or not) verifies that model."""
    write_tiny_llama_gguf(tmp_path / "tiny.gguf", split_max_tensors=8)
    assert scan_checkpoint(tmp_path).files[0] == "tiny-00001-of-00003.gguf"


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: None, "no .safetensors or .gguf weights"),
        (lambda p: (p / "pytorch_model.bin").write_bytes(b"x"), "found pytorch_model.bin"),
        (
            lambda p: [write_tiny_llama_gguf(p / n) for n in ("a.gguf", "b.gguf")],
            "holds 2 GGUF models",
        ),
        (
            lambda p: (p / "models--a--b" / "snapshots").mkdir(parents=True),
            "pick one of: models--a--b",
        ),
    ],
)
def test_folders_that_are_not_one_checkpoint_raise_input_error(
    tmp_path: Path, setup, message: str
) -> None:
    """Folders with no weights, only .bin, several GGUFs, or a whole cache say what to give instead."""
    setup(tmp_path)
    with pytest.raises(InputError) as err:
        scan_checkpoint(tmp_path)
    assert message in str(err.value)


def test_other_paths_raise_input_error(tmp_path: Path) -> None:
    """A missing path, a non-weight file and a cache repo without snapshots are InputError."""
    (tmp_path / "notes.txt").write_text("hi")
    (tmp_path / "models--x--y" / "snapshots").mkdir(parents=True)
    for path in (
        tmp_path / "absent",
        tmp_path / "notes.txt",
        tmp_path / "absent.gguf",
        tmp_path / "models--x--y",
    ):
        with pytest.raises(InputError):
            scan_checkpoint(path)
