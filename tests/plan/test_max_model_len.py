"""--max-model-len above the model's own: vLLM's config error unless
VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, with the length derived as vLLM derives it."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from bringup.cli.main import Context, main
from bringup.core.plan.arch import derived_max_len


def _run(*argv: str, environ: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    out, err = io.StringIO(), io.StringIO()
    env = {"NO_COLOR": "1", **(environ or {})}
    code = main(["plan", "--json", *argv], Context(stdout=out, stderr=err, environ=env))
    return code, json.loads(out.getvalue()), err.getvalue()


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"max_position_embeddings": 4096}, (4096, "max_position_embeddings")),
        # linear and dynamic RoPE scaling multiply the length; llama3 and yarn do not
        (
            {"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 4}},
            (16384, "max_position_embeddings"),
        ),
        (
            {
                "max_position_embeddings": 131072,
                "rope_scaling": {"rope_type": "llama3", "factor": 8.0},
            },
            (131072, "max_position_embeddings"),
        ),
        (
            {"max_position_embeddings": 40960, "rope_scaling": {"rope_type": "yarn", "factor": 4}},
            (40960, "max_position_embeddings"),
        ),
        # the smallest key wins; model_max_length (Command-R) replaces it
        ({"n_positions": 1024, "max_position_embeddings": 2048}, (1024, "n_positions")),
        (
            {"max_position_embeddings": 8192, "model_max_length": 131072},
            (131072, "model_max_length"),
        ),
        ({}, (2048, "none (vLLM assumes 2048)")),
    ],
)
def test_derived_max_len_follows_vllm(config: dict[str, Any], expected: tuple[int, str]) -> None:
    """vLLM's _get_and_verify_max_len, key by key."""
    assert derived_max_len(config) == expected


def test_a_longer_max_model_len_is_refused_with_the_env_var_named() -> None:
    """Qwen3-8B has 40,960 positions: 100,000 is vLLM's config error, not FITS, and what
    fits offers the model's own length."""
    code, plan, _ = _run("Qwen3-8B", "--gpu", "H100", "--max-model-len", "100000")
    assert code == 1
    assert plan["verdict"]["fits"] is False
    assert plan["verdict"]["failure_class"] == "config_error"
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in plan["verdict"]["reason"]
    assert "40960" in plan["verdict"]["reason"]
    assert ["--max-model-len", "40960"] in [c["flags"] for c in plan["what_fits"]]


@pytest.mark.parametrize(
    ("environ", "command_env"),
    [
        ({"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}, []),
        ({}, ["env", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"]),
    ],
)
def test_the_env_var_lets_it_plan_with_a_warning(
    environ: dict[str, str], command_env: list[str]
) -> None:
    """With VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (bringup's environment or the command's own),
    vLLM starts: the plan is made for the length asked, and warns."""
    code, plan, _ = _run(
        "Qwen3-8B",
        "--gpu",
        "H100",
        "--",
        *command_env,
        "vllm",
        "serve",
        "m",
        "--max-model-len",
        "100000",
        environ=environ,
    )
    assert code == 0
    assert plan["verdict"]["fits"] is True
    assert plan["settings"]["max_model_len"] == 100000
    assert any("VLLM_ALLOW_LONG_MAX_MODEL_LEN" in w for w in plan["warnings"])


def test_linear_rope_scaling_lengthens_what_is_accepted(tmp_path: Path) -> None:
    """A config with linear RoPE scaling x2 accepts twice its positions, not one more."""
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_hidden_layers": 4,
        "hidden_size": 1024,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "intermediate_size": 2816,
        "vocab_size": 32000,
        "max_position_embeddings": 4096,
        "rope_scaling": {"type": "linear", "factor": 2.0},
        "torch_dtype": "bfloat16",
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    ok, plan, _ = _run(str(path), "--gpu", "H100", "--max-model-len", "8192")
    assert ok == 0
    assert plan["verdict"]["fits"] is True
    refused, plan, _ = _run(str(path), "--gpu", "H100", "--max-model-len", "8193")
    assert refused == 1
    assert plan["verdict"]["failure_class"] == "config_error"
