"""The GGUF memory model against what the real llama.cpp server reports when it starts."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from bringup.adapters.checkpoint import scan_checkpoint
from bringup.core.gguf_plan import plan_gguf
from engine.real_engine import free_port, server_argv

from builders.gguf import write_tiny_llama_gguf

pytestmark = pytest.mark.engine

MiB = 1024 * 1024
LINES = {
    "weights_bytes": r"model buffer size =\s+([\d.]+) MiB",
    "kv_cache_bytes": r"KV buffer size =\s+([\d.]+) MiB",
    "compute_buffer_bytes": r"compute buffer size =\s+([\d.]+) MiB",
}
GGML_TYPES = {"f16": "1", "q8_0": "8", "q4_0": "2"}  # llama-cpp-python takes ggml type numbers

# (model n_embd, n_ctx, K type, V type, flash attention); n_embd 128 gives head size 32 for q*_0
CONFIGS = [
    (64, 512, "f16", "f16", False),
    (64, 1000, "f16", "f16", False),
    (64, 8192, "q8_0", "f16", False),
    (128, 4096, "q8_0", "q8_0", True),
    (128, 4096, "q4_0", "q4_0", True),
]


@pytest.mark.parametrize(("n_embd", "n_ctx", "type_k", "type_v", "fa"), CONFIGS)
def test_plan_matches_the_server_log(
    n_embd: int, n_ctx: int, type_k: str, type_v: str, fa: bool, tmp_path: Path, start_server: Any
) -> None:
    """Weights, KV cache and compute buffer agree with the server's log (to its 0.01 MiB; 2 % with flash attention)."""
    model = tmp_path / f"m{n_embd}.gguf"
    write_tiny_llama_gguf(model, n_embd=n_embd)
    ckpt = scan_checkpoint(model)
    plan = plan_gguf(
        ckpt.gguf_metadata or {},
        ckpt.tensors,
        n_ctx=n_ctx,
        n_batch=512,
        cache_type_k=type_k,
        cache_type_v=type_v,
        flash_attn=fa,
    )
    server = start_server(
        server_argv(
            model,
            free_port(),
            "--n_ctx",
            str(n_ctx),
            "--type_k",
            GGML_TYPES[type_k],
            "--type_v",
            GGML_TYPES[type_v],
            "--flash_attn",
            str(fa).lower(),
        )
    )
    assert server.wait_for("Uvicorn running on"), server.text()[-3000:]
    log = server.text()
    for field, pattern in LINES.items():
        found = re.search(pattern, log)
        assert found, pattern
        reported, predicted = found.group(1), getattr(plan, field) / MiB
        if fa and field == "compute_buffer_bytes":
            assert predicted == pytest.approx(float(reported), rel=0.02), (
                field,
                predicted,
                reported,
            )
        else:  # printed with %.2f, which Python's format rounds the same way
            assert f"{predicted:.2f}" == reported, (field, predicted, reported)
