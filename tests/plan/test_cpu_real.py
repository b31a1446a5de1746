"""`plan --device cpu` against real vLLM (the CPU build, 0.32): the same KV tokens, exactly.

Five tiny architectures are written offline as config.json files (GQA, MQA, an all-sliding-window
Mistral, a hybrid Gemma-2 with alternating sliding/full layers, a Mixtral MoE); real vLLM builds
each engine with dummy weights in one process (tests/plan/vllm_cpu_kv_probe.py) and prints
``CPU KV cache size: N tokens``; bringup's plan of the same config and flags must give N.
Without the vLLM venv the test skips with one line (fails under BRINGUP_REQUIRE_REAL=1).
"""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bringup.cli.main import Context, main

from builders.vllm_env import require_vllm, vllm_environ, vllm_python

pytestmark = pytest.mark.vllm

PROBE = Path(__file__).with_name("vllm_cpu_kv_probe.py")
SPACE_GIB = "1"

_BASE: dict[str, Any] = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "head_dim": 32,
    "max_position_embeddings": 4096,
    "torch_dtype": "float32",
    "vocab_size": 512,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "rms_norm_eps": 1e-6,
}
ARCHS: dict[str, dict[str, Any]] = {
    "gqa": {
        **_BASE,
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_key_value_heads": 2,
    },
    "mqa": {
        **_BASE,
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_key_value_heads": 1,
    },
    "sliding": {
        **_BASE,
        "architectures": ["MistralForCausalLM"],
        "model_type": "mistral",
        "num_key_value_heads": 2,
        "sliding_window": 256,
    },
    "hybrid": {
        **_BASE,
        "architectures": ["Gemma2ForCausalLM"],
        "model_type": "gemma2",
        "num_hidden_layers": 6,
        "num_key_value_heads": 2,
        "sliding_window": 256,
        "query_pre_attn_scalar": 32,
        "hidden_activation": "gelu_pytorch_tanh",
        "final_logit_softcapping": 30.0,
        "attn_logit_softcapping": 50.0,
    },
    "moe": {
        **_BASE,
        "architectures": ["MixtralForCausalLM"],
        "model_type": "mixtral",
        "num_key_value_heads": 4,  # MHA, and a figure of its own (vLLM logs a repeated line once)
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
    },
}
MAX_MODEL_LEN = 2048
BATCHED = 2048


def _environ(folder: Path) -> dict[str, str]:
    env = vllm_environ(folder)
    env.update(VLLM_CPU_KVCACHE_SPACE=SPACE_GIB, VLLM_ENABLE_V1_MULTIPROCESSING="0")
    return env


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """What real vLLM printed for each architecture (one vLLM process for all)."""
    require_vllm()
    root = tmp_path_factory.mktemp("cpu-kv")
    specs = []
    for name, cfg in ARCHS.items():
        folder = root / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(cfg))
        specs.append(
            {
                "name": name,
                "dir": str(folder),
                "max_model_len": MAX_MODEL_LEN,
                "max_num_batched_tokens": BATCHED,
            }
        )
    (root / "specs.json").write_text(json.dumps(specs))
    done = subprocess.run(
        [str(vllm_python()), str(PROBE), str(root / "specs.json")],
        capture_output=True,
        text=True,
        env=_environ(root / "env"),
        timeout=540,
        check=False,
    )
    rows = {r["name"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert set(rows) == set(ARCHS), done.stderr[-2000:]
    for name in ARCHS:
        rows[name]["dir"] = str(root / name)
    return rows


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", list(ARCHS))
def test_plan_matches_real_vllm_cpu_kv_tokens(real: dict[str, dict[str, Any]], name: str) -> None:
    """bringup's `CPU KV cache size` equals the one real vLLM printed, for each architecture."""
    row = real[name]
    assert row.get("error") is None, row.get("error")
    assert "CPU KV cache size" in row["line"]
    out = io.StringIO()
    code = main(
        [
            "plan",
            str(Path(row["dir"]) / "config.json"),
            "--device",
            "cpu",
            "--json",
            "--",
            "vllm",
            "serve",
            row["dir"],
            "--max-model-len",
            str(MAX_MODEL_LEN),
            "--max-num-batched-tokens",
            str(BATCHED),
        ],
        Context(stdout=out, stderr=io.StringIO(), environ={"VLLM_CPU_KVCACHE_SPACE": SPACE_GIB}),
    )
    assert code == 0
    assert json.loads(out.getvalue())["kv_cache"]["tokens"] == row["tokens"]
