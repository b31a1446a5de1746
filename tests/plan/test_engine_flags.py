"""Engine flags after `--`: honoured where they change the plan, every other one named."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bringup.cli.main import Context, main
from bringup.core import engine_flags

ROOT = Path(__file__).resolve().parents[2]
GiB = 1024**3


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["plan", *argv], Context(stdout=out, stderr=err, environ={"NO_COLOR": "1"}))
    return code, out.getvalue(), err.getvalue()


def _plan(*serve_flags: str, model: str = "Llama-3.1-8B", gpu: str = "H100") -> dict[str, Any]:
    code, out, err = _run("--gpu", gpu, "--json", "--", "vllm", "serve", model, *serve_flags)
    assert code in (0, 1), err
    data: dict[str, Any] = json.loads(out)
    return data


def test_dtype_float32_plans_float32() -> None:
    """`-- vllm serve M --dtype float32` doubles a bf16 model's weights (it planned bf16)."""
    bf16 = _plan()["per_gpu"]["weights_bytes"]
    fp32 = _plan("--dtype", "float32")["per_gpu"]["weights_bytes"]
    assert fp32 == pytest.approx(2 * bf16, rel=0.001)
    assert _plan("--dtype", "float32")["kv_cache"]["bytes_per_token"] == 2 * 131072
    code, _, err = _run(
        "Llama-3.1-8B", "--gpu", "H100", "--", "vllm", "serve", "m", "--dtype", "fp7"
    )
    assert code == 2
    assert "--dtype" in err


def test_flags_that_change_the_plan_are_honoured() -> None:
    """Each of these flags, given only after --, changes the plan the way vLLM would."""
    base = _plan("--max-model-len", "8192")
    assert (
        _plan("--max-model-len", "8192", "--max-num-seqs", "64")["settings"]["max_num_seqs"] == 64
    )
    eager = _plan("--max-model-len", "8192", "--enforce-eager")
    assert eager["per_gpu"]["cuda_graph_bytes"] == 0 < base["per_gpu"]["cuda_graph_bytes"]
    fp8 = _plan("--max-model-len", "8192", "--kv-cache-dtype", "fp8")
    assert fp8["kv_cache"]["bytes_per_token"] * 2 == base["kv_cache"]["bytes_per_token"]
    blocks = _plan("--max-model-len", "8192", "--block-size", "128")
    assert blocks["settings"]["block_size"] == 128
    assert blocks["kv_cache"]["tokens"] % 128 == 0
    offload = _plan("--max-model-len", "8192", "--cpu-offload-gb", "4")
    assert offload["settings"]["cpu_offload_bytes"] == 4 * GiB
    assert offload["per_gpu"]["weights_bytes"] == base["per_gpu"]["weights_bytes"] - 4 * GiB
    tp = _plan("--max-model-len", "8192", "-tp", "2", "-dcp", "2", model="DeepSeek-V2-Lite")
    assert tp["settings"]["tensor_parallel_size"] == 2
    assert tp["settings"]["decode_context_parallel_size"] == 2
    moe = _plan("-ep", "-tp", "2", model="Qwen3-30B-A3B")
    assert moe["settings"]["enable_expert_parallel"] is True


def test_cpu_offload_makes_a_model_fit_and_warns_about_decode() -> None:
    """Llama-3.1-70B on 4 x RTX 4090 fits its weights only with --cpu-offload-gb."""
    serve = ["vllm", "serve", "Llama-3.1-70B", "-tp", "4", "--max-model-len", "4096"]
    code, out, _ = _run("--gpu", "RTX 4090", "--", *serve)
    assert code == 1
    assert "weights_loading" in out
    code, out, err = _run("--gpu", "RTX 4090", "--", *serve, "--cpu-offload-gb", "16")
    assert code == 0, out
    assert "crosses PCIe" in err


def test_unknown_and_misspelled_flags_are_named_in_one_warning_line() -> None:
    """--max-num-sqs 64 was dropped without a word: it is named with vLLM's nearest flag;
    a vLLM flag plan does not model is named as such; the front end's flags are not."""
    code, _, err = _run(
        "--gpu", "H100", "--", "vllm", "serve", "Llama-3.1-8B", "--max-num-sqs", "64",
        "--host", "0.0.0.0", "--port", "8000", "--served-model-name", "x",
        "--enable-lora", "--no-enable-prefix-caching", "--frobnicate",
        "-cc", "{}", "-O3",
    )  # fmt: skip
    assert code == 0
    lines = [line for line in err.splitlines() if "not planned" in line]
    assert len(lines) == 1
    line = lines[0]
    assert "--max-num-sqs (not a vLLM" in line
    assert "did you mean --max-num-seqs?" in line
    assert "--enable-lora (a vLLM flag this plan does not model)" in line
    assert "--frobnicate (not a vLLM" in line
    # the compilation config is planned (the graph pool: core.vllm_compile)
    for quiet in ("--host", "--port", "--served-model-name", "prefix-caching", "-cc", "-O3"):
        assert quiet not in line


def test_a_plain_command_has_no_flag_warning() -> None:
    """The flags plan reads and the harmless ones warn of nothing."""
    data = _plan("-tp", "1", "--host", "::", "--max-model-len", "8k", "--trust-remote-code")
    assert not [w for w in data["warnings"] if "not planned" in w]


def test_speculative_config_is_read() -> None:
    """Speculative decoding is named on the plan (decode can pass the ceiling); bad JSON is
    one line, exit 2."""
    data = _plan("--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}')
    assert any("ngram, 3 tokens" in w and "up to 4 tokens" in w for w in data["warnings"])
    code, _, err = _run(
        "Llama-3.1-8B", "--gpu", "H100", "--", "vllm", "serve", "m", "--speculative-config", "{x"
    )
    assert code == 2
    assert err.count("\n") == 1


def test_warning_function_directly() -> None:
    """Numbers are values, `=` forms and underscores are the flag, --no-X is X."""
    known = frozenset({"--max-num-seqs", "--enable-chunked-prefill", "--seed"})
    argv = ["--max_num_seqs=4", "--no-enable-chunked-prefill", "--seed", "-1", "--typo=3"]
    line = engine_flags.unplanned_warning(argv, known, "0.32.0")
    assert line == (
        "flags after -- not planned: --no-enable-chunked-prefill (a vLLM flag this plan does "
        "not model), --typo (not a vLLM 0.32.0 flag)"
    )


def test_flag_names_script_reads_a_vllm_tree(tmp_path: Path) -> None:
    """scripts/vllm_flag_names.py reads add_argument names and front-end dataclass fields."""
    engine = tmp_path / "vllm/engine"
    engine.mkdir(parents=True)
    (engine / "arg_utils.py").write_text(
        "def add(g, kw):\n"
        "    g.add_argument('--max-num-seqs', **kw)\n"
        "    g.add_argument('--tensor-parallel-size', '-tp', **kw)\n"
    )
    launchers = tmp_path / "vllm/entrypoints/launchers"
    launchers.mkdir(parents=True)
    (launchers / "cli_args.py").write_text(
        "class BaseFrontendArgs:\n    host: str = ''\n    api_key: str = ''\n    _private: int = 0\n"
    )
    out = tmp_path / "flags.json"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts/vllm_flag_names.py"),
            str(tmp_path),
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    data = json.loads(out.read_text())
    assert data["flags"] == [
        "--api-key",
        "--host",
        "--max-num-seqs",
        "--tensor-parallel-size",
        "-tp",
    ]
    assert data["frontend_flags"] == ["--api-key", "--host"]


def test_shipped_flag_names_are_vllms() -> None:
    """The shipped list is vLLM 0.32's, and holds the flags plan plans with."""
    data = json.loads((ROOT / "src/bringup/data/vllm_flags.json").read_text())
    assert data["version"].startswith("0.32")
    flags = set(data["flags"])
    assert {f for f in engine_flags.PLANNED if f != "--model"} <= flags | {"--model"}
    assert "--host" in data["frontend_flags"]


@pytest.mark.parametrize(
    "wrapped",
    [
        ["numactl", "--cpunodebind=0", "--membind=0", "vllm", "serve", "Llama-3.1-8B"],
        ["env", "VLLM_USE_V1=1", "vllm", "serve", "Llama-3.1-8B"],
        ["taskset", "-c", "0-15", "vllm", "serve", "Llama-3.1-8B"],
        ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "Llama-3.1-8B"],
    ],
)
def test_wrapped_commands_are_planned_with_their_flags(wrapped: list[str]) -> None:
    """A command behind numactl/env/taskset or vLLM's module entry point is read like
    `vllm serve`: its model is planned and its flags honoured (numactl's were dropped)."""
    code, out, err = _run("--gpu", "H100", "--json", "--", *wrapped, "--max-num-seqs", "64")
    assert code in (0, 1), err
    data = json.loads(out)
    assert data["settings"]["max_num_seqs"] == 64
    assert data["model"]["architecture"] == "LlamaForCausalLM"


@pytest.mark.parametrize(
    "flags",
    [
        ("--max-model-len", "32k", "--max-num-batched-tokens", "8k"),
        ("--max-model-len", "32K", "--max-num-batched-tokens", "8K", "-tp", "1"),
    ],
)
def test_own_number_flags_read_as_the_server_commands(flags: tuple[str, ...]) -> None:
    """bringup's own --max-model-len/--max-num-batched-tokens/-tp read their values as the
    same flags after ``--`` do (``8k`` was argparse's "invalid int value" on the own flag)."""
    code, out, err = _run("Llama-3.1-8B", "--gpu", "H100", "--json", *flags)
    assert code in (0, 1), err
    assert json.loads(out)["settings"] == _plan(*flags)["settings"]


def test_number_suffixes_are_read_as_vllm_reads_them() -> None:
    """vLLM's human_readable_int: `k` is 1000 and `K` 1024 for --max-model-len and
    --max-num-batched-tokens (``32k`` planned 32,768 tokens, where vLLM serves 32,000);
    other whole numbers are digits only, and a decimal with a binary suffix is refused."""
    settings = _plan("--max-model-len", "8k", "--max-num-batched-tokens", "4K")["settings"]
    assert (settings["max_model_len"], settings["max_num_batched_tokens"]) == (8000, 4096)
    assert _plan("--max-model-len", "2.5k")["settings"]["max_model_len"] == 2500
    for flags in (("--max-model-len", "2.5K"), ("--max-num-seqs", "1k")):
        code, _, err = _run("Llama-3.1-8B", "--gpu", "H100", "--", "vllm", "serve", "m", *flags)
        assert code == 2
        assert err.count("\n") == 1
        assert flags[0] in err
