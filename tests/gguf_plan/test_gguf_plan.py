"""The GGUF memory model: KV cache, weights and compute buffer, checked against llama.cpp's own numbers."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bringup.adapters.checkpoint import scan_checkpoint
from bringup.core.checkpoint import TensorInfo
from bringup.core.gguf_plan import plan_gguf, read_shape, row_bytes
from bringup.errors import InputError

from builders.gguf import write_tiny_llama_gguf

MiB = 1024 * 1024
REAL = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "llamacpp_real"


def meta(**over: Any) -> dict[str, Any]:
    """Metadata of a llama-style model (the tiny test model's shape unless overridden)."""
    base: dict[str, Any] = {
        "general.architecture": "llama",
        "llama.block_count": 2,
        "llama.embedding_length": 64,
        "llama.attention.head_count": 4,
        "llama.attention.head_count_kv": 2,
        "llama.feed_forward_length": 128,
        "llama.vocab_size": 267,
        "llama.context_length": 512,
    }
    base.update(over)
    return base


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The tiny GGUF the real-engine tests serve, scanned like `bringup plan` will scan it."""
    path = tmp_path_factory.mktemp("plan") / "tiny.gguf"
    write_tiny_llama_gguf(path)
    return scan_checkpoint(path)


def test_row_bytes_follow_ggml_block_sizes() -> None:
    """f16 is 2 bytes a value; q8_0 34 and q4_0 18 bytes per block of 32; case does not matter."""
    assert row_bytes("f16", 128) == 256
    assert row_bytes("q8_0", 128) == 4 * 34
    assert row_bytes("Q4_0", 128) == 4 * 18
    assert row_bytes("q5_1", 64) == 2 * 24


def test_weights_are_the_exact_tensor_bytes_by_type() -> None:
    """Weights are summed from the tensor table per GGML type, largest first."""
    tensors = [
        TensorInfo("a", "Q4_K", (256, 256), 36864, "m.gguf"),
        TensorInfo("b", "F32", (256,), 1024, "m.gguf"),
        TensorInfo("c", "Q4_K", (256, 512), 73728, "m.gguf"),
    ]
    plan = plan_gguf(meta(), tensors, n_ctx=512)
    assert plan.weights_by_type == {"Q4_K": 110592, "F32": 1024}
    assert plan.weights_bytes == 111616


def test_kv_cache_pads_the_context_to_256_cells() -> None:
    """n_ctx 1000 becomes 1024 cells: 2 layers x 32 values x 2 bytes x (K + V) per cell."""
    plan = plan_gguf(meta(), [], n_ctx=1000)
    assert (plan.n_ctx, plan.kv_cells) == (1024, 1024)
    assert plan.kv_cache_bytes == 1024 * 2 * 32 * 2 * 2


def test_quantized_kv_types_shrink_the_cache() -> None:
    """q8_0 K and V take 34/64 of f16; q4_0 takes 18/64 (flash attention, head size 32)."""
    m = meta(**{"llama.embedding_length": 128})
    f16 = plan_gguf(m, [], n_ctx=8192, flash_attn=True).kv_cache_bytes
    q8 = plan_gguf(m, [], n_ctx=8192, cache_type_k="q8_0", cache_type_v="q8_0", flash_attn=True)
    q4 = plan_gguf(m, [], n_ctx=8192, cache_type_k="q4_0", cache_type_v="q4_0", flash_attn=True)
    assert q8.kv_cache_bytes * 64 == f16 * 34
    assert q4.kv_cache_bytes * 64 == f16 * 18


def test_parallel_sequences_split_the_context() -> None:
    """With -np 3 and no unified cache, each sequence gets pad256(1024 / 3) = 512 cells."""
    plan = plan_gguf(meta(), [], n_ctx=1000, n_parallel=3)
    assert (plan.n_ctx_seq, plan.kv_cells, plan.n_ctx) == (512, 1536, 1536)
    unified = plan_gguf(meta(), [], n_ctx=1000, n_parallel=3, kv_unified=True)
    assert unified.kv_cells == 1024


def test_sliding_window_layers_keep_only_the_window() -> None:
    """gemma2-style: every other layer keeps pad256(n_swa + n_ubatch) cells, not the whole context."""
    m = {
        "general.architecture": "gemma2",
        "gemma2.block_count": 4,
        "gemma2.embedding_length": 256,
        "gemma2.attention.head_count": 8,
        "gemma2.attention.head_count_kv": 4,
        "gemma2.attention.key_length": 32,
        "gemma2.attention.value_length": 32,
        "gemma2.feed_forward_length": 512,
        "gemma2.vocab_size": 1000,
        "gemma2.context_length": 8192,
        "gemma2.attention.sliding_window": 4096,
    }
    assert read_shape(m, []).swa_layers == (True, False, True, False)
    plan = plan_gguf(m, [], n_ctx=32768)
    assert plan.swa_cells == 4608
    per_cell = 4 * 32 * 2 * 2  # heads x head size x bytes x (K + V)
    assert plan.kv_cache_bytes == 2 * 32768 * per_cell + 2 * 4608 * per_cell
    assert plan_gguf(m, [], n_ctx=32768, swa_full=True).kv_cache_bytes == 4 * 32768 * per_cell


def test_per_layer_kv_heads_skip_layers_without_attention() -> None:
    """A head_count_kv array gives each layer its own KV width; 0 means no KV for that layer."""
    plan = plan_gguf(meta(**{"llama.attention.head_count_kv": [2, 0]}), [], n_ctx=512)
    assert plan.kv_cache_bytes == 512 * 32 * 2 * 2


@pytest.mark.parametrize(
    ("settings_", "needle"),
    [
        ({"cache_type_v": "q8_0"}, "needs flash attention"),
        ({"cache_type_k": "q3_k"}, "unknown KV cache type"),
        ({"cache_type_k": "q8_0", "flash_attn": True}, "do not divide the head size 16"),
        ({"n_parallel": 0}, "parallel"),
        ({"n_ctx": -1}, "bad context size"),
    ],
)
def test_settings_llama_cpp_refuses_are_refused(settings_: dict[str, Any], needle: str) -> None:
    """Settings the engine would refuse raise InputError naming the problem."""
    kwargs: dict[str, Any] = {"n_ctx": 512, **settings_}
    with pytest.raises(InputError, match=needle):
        plan_gguf(meta(), [], **kwargs)


def test_missing_metadata_is_one_clear_error() -> None:
    """Metadata without the block count says which key is missing."""
    m = meta()
    del m["llama.block_count"]
    with pytest.raises(InputError, match=r"llama\.block_count"):
        plan_gguf(m, [], n_ctx=512)


def test_zero_context_means_the_training_context() -> None:
    """n_ctx 0 takes the model's context_length, as llama.cpp does."""
    assert plan_gguf(meta(), [], n_ctx=0).n_ctx == 512


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 200_000), st.integers(1, 8))
def test_kv_cache_grows_with_the_context(n_ctx: int, n_parallel: int) -> None:
    """More context never needs less KV cache, and the cells cover the request."""
    a = plan_gguf(meta(), [], n_ctx=n_ctx, n_parallel=n_parallel)
    b = plan_gguf(meta(), [], n_ctx=n_ctx + 256, n_parallel=n_parallel)
    assert b.kv_cache_bytes >= a.kv_cache_bytes
    assert a.kv_cells >= n_ctx - 256 * n_parallel
    assert (
        a.total_bytes
        == a.weights_bytes + a.kv_cache_bytes + a.compute_buffer_bytes + a.output_buffer_bytes
    )


# Compute buffers the real llama-cpp-python 0.3.36 server reported on this machine
# ("~llama_context: CPU compute buffer size is X MiB", 4 decimals), for tiny models of several
# shapes: (n_embd, n_head, n_head_kv, n_ff, n_vocab_extra, n_ctx, n_ubatch, flash_attn, MiB).
MEASURED = [
    (64, 4, 2, 128, 0, 512, 512, False, 5.7598),
    (64, 4, 2, 128, 0, 8192, 512, False, 80.7598),
    (64, 4, 2, 128, 0, 8192, 256, False, 40.3799),
    (64, 4, 2, 128, 0, 4096, 512, True, 5.0137),
    (128, 4, 2, 128, 0, 4096, 512, True, 5.2637),
    (64, 8, 2, 128, 0, 512, 512, False, 9.6973),
    (64, 4, 2, 4096, 0, 512, 512, False, 25.5098),
    (64, 4, 2, 4096, 0, 4096, 512, True, 28.5137),
]


@pytest.mark.parametrize(
    ("n_embd", "n_head", "n_kv", "n_ff", "extra", "n_ctx", "ub", "fa", "mib"), MEASURED
)
def test_compute_buffer_matches_the_server_report(
    n_embd: int,
    n_head: int,
    n_kv: int,
    n_ff: int,
    extra: int,
    n_ctx: int,
    ub: int,
    fa: bool,
    mib: float,
) -> None:
    """Without flash attention the prediction is exact; with it, within 2 % of the server's figure."""
    m = meta(
        **{
            "llama.embedding_length": n_embd,
            "llama.attention.head_count": n_head,
            "llama.attention.head_count_kv": n_kv,
            "llama.feed_forward_length": n_ff,
        }
    )
    got = (
        plan_gguf(m, [], n_ctx=n_ctx, n_batch=512, n_ubatch=ub, flash_attn=fa).compute_buffer_bytes
        / MiB
    )
    expected = pytest.approx(mib, rel=0.02) if fa else pytest.approx(mib, abs=0.00005)
    assert got == expected


def _log_number(log: str, pattern: str) -> float:
    found = re.search(pattern, (REAL / log).read_text())
    assert found, pattern
    return float(found.group(1))


def test_recorded_startup_buffers_match(tiny: Any) -> None:
    """The recorded ready start (n_ctx 512, n_batch 512) shows the predicted buffers (2-decimal MiB)."""
    plan = plan_gguf(tiny.gguf_metadata, tiny.tensors, n_ctx=512, n_batch=512)
    log = "ready_sigterm.log"
    assert round(plan.weights_bytes / MiB, 2) == _log_number(
        log, r"model buffer size =\s+([\d.]+) MiB"
    )
    assert round(plan.kv_cache_bytes / MiB, 2) == _log_number(
        log, r"KV buffer size =\s+([\d.]+) MiB"
    )
    assert round(plan.compute_buffer_bytes / MiB, 2) == _log_number(
        log, r"compute buffer size =\s+([\d.]+) MiB"
    )


def test_recorded_failed_allocations_are_predicted_to_the_byte(tiny: Any) -> None:
    """The sizes llama.cpp failed to allocate at n_ctx 100M (KV) and 10M (compute) are the plan's."""
    huge = plan_gguf(tiny.gguf_metadata, tiny.tensors, n_ctx=100_000_000, n_batch=512)
    assert huge.kv_cache_bytes == _log_number(
        "ctx_too_large.log", r"failed to allocate buffer of size (\d+)"
    )
    big = plan_gguf(tiny.gguf_metadata, tiny.tensors, n_ctx=10_000_000, n_batch=512)
    assert big.compute_buffer_bytes == _log_number(
        "ctx_compute_too_large.log", r"failed to allocate buffer of size (\d+)"
    )
    assert round(big.kv_cache_bytes / MiB, 2) == _log_number(
        "ctx_compute_too_large.log", r"KV buffer size =\s+([\d.]+) MiB"
    )
