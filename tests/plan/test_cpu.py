"""`plan --device cpu`: vLLM 0.32's CPU KV pool and its "CPU KV cache size" (rules in core.plan.cpu)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from bringup.cli.main import Context, main
from bringup.core.plan import parse_architecture
from bringup.core.plan.cpu import GiB, cpu_kv, kv_groups, page_bytes

TINY: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "max_position_embeddings": 2048,
    "torch_dtype": "float32",
    "vocab_size": 512,
}


def test_full_attention_pool_in_whole_blocks() -> None:
    """1 GiB, 2 layers x 2 KV heads x 32 x fp32: 8192 blocks of 128, reported as 1,048,576 tokens
    (the figure real vLLM 0.32 printed for this model, real-parts.md)."""
    kv = cpu_kv(parse_architecture(TINY), GiB, max_model_len=512, max_num_batched_tokens=2048)
    assert kv.num_blocks == 8192
    assert kv.tokens == 1_048_576
    assert kv.max_concurrency == 2048.0


def test_sliding_window_requests_take_the_window_not_the_length() -> None:
    """All-sliding (Mistral-like): a request holds cdiv(min(window-1+mnbt, len), block)+1 blocks."""
    cfg = {**TINY, "sliding_window": 256, "max_position_embeddings": 8192}
    kv = cpu_kv(parse_architecture(cfg), GiB, max_model_len=8192, max_num_batched_tokens=2048)
    assert kv.blocks_per_request == -(-(256 - 1 + 2048) // 128) + 1
    assert kv.tokens == int(8192 / kv.blocks_per_request * 8192)


def test_hybrid_groups_pad_to_the_fewest_layers() -> None:
    """5 sliding + 1 full: groups of 1 layer (5 sliding groups, 1 full)."""
    cfg = {**TINY, "num_hidden_layers": 6, "sliding_window": 256, "sliding_window_pattern": 6}
    arch = parse_architecture(cfg)
    groups = kv_groups(arch, page_bytes(arch, 1, 128, 4))
    assert [g.kind for g in groups].count("sliding") == 5
    assert all(g.layers == 1 for g in groups)


def test_kv_heads_replicate_past_tp() -> None:
    """MQA under TP 2 keeps one KV head per rank."""
    arch = parse_architecture({**TINY, "num_key_value_heads": 1})
    assert page_bytes(arch, 2, 128, 4) == page_bytes(arch, 1, 128, 4)


def _plan(tmp_path: Path, environ: dict[str, str], *cmd: str) -> tuple[int, dict[str, Any]]:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(TINY))
    out = io.StringIO()
    code = main(
        ["plan", str(cfg), "--device", "cpu", "--json", "--", "vllm", "serve", "m", *cmd],
        Context(stdout=out, stderr=io.StringIO(), environ=environ),
    )
    return code, json.loads(out.getvalue())


def test_cli_reads_the_env_var(tmp_path: Path) -> None:
    """VLLM_CPU_KVCACHE_SPACE=2 is a 2 GiB pool; the CPU defaults are vLLM 0.32's."""
    code, data = _plan(tmp_path, {"VLLM_CPU_KVCACHE_SPACE": "2"}, "--max-model-len", "512")
    assert code == 0
    assert data["per_gpu"]["kv_cache_bytes"] == 2 * GiB
    assert data["kv_cache"]["tokens"] == 2 * 1_048_576
    assert data["settings"]["device"] == "cpu"
    assert data["settings"]["max_num_batched_tokens"] == 2048
    assert data["settings"]["max_num_seqs"] == 128


def test_zero_space_is_no_cache(tmp_path: Path) -> None:
    """VLLM_CPU_KVCACHE_SPACE=0: vLLM stops ("No available memory for the cache blocks")."""
    code, data = _plan(tmp_path, {"VLLM_CPU_KVCACHE_SPACE": "0"})
    assert code == 1
    assert data["verdict"]["failure_class"] == "kv_cache_insufficient"


def test_tiny_pool_cannot_hold_one_request(tmp_path: Path) -> None:
    """--kv-cache-memory-bytes 262144 at max_model_len 2048: one request does not fit."""
    code, data = _plan(tmp_path, {}, "--kv-cache-memory-bytes", "262144", "--max-model-len", "2048")
    assert code == 1
    assert data["verdict"]["phase"] == "kv_cache_alloc"
