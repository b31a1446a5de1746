"""Server command lines: recognising engines and models, reading and rewriting flags."""

from __future__ import annotations

import pytest

from bringup.core.engine_args import get_flag, has_flag, parse_server_command, set_flag
from bringup.core.vocab import Engine


@pytest.mark.parametrize(
    ("argv", "engine", "model"),
    [
        (
            ["vllm", "serve", "MiniMaxAI/MiniMax-M2.5", "-tp", "4"],
            Engine.VLLM,
            "MiniMaxAI/MiniMax-M2.5",
        ),
        (["/opt/venv/bin/vllm", "serve", "--model", "m", "--port", "8001"], Engine.VLLM, "m"),
        (
            ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model=/models/x"],
            Engine.VLLM,
            "/models/x",
        ),
        (["env", "CUDA_VISIBLE_DEVICES=0,1", "vllm", "serve", "m"], Engine.VLLM, "m"),
        (["VLLM_LOGGING_LEVEL=DEBUG", "vllm", "serve", "m"], Engine.VLLM, "m"),
        (
            ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"],
            Engine.SGLANG,
            "Qwen/Qwen3-8B",
        ),
        (
            ["text-generation-launcher", "--model-id", "meta/llama", "--port", "80"],
            Engine.TGI,
            "meta/llama",
        ),
        (["llama-server", "-m", "tiny.gguf", "--port", "8080"], Engine.LLAMACPP, "tiny.gguf"),
        (
            [".venv/bin/python", "-m", "llama_cpp.server", "--model", "t.gguf"],
            Engine.LLAMACPP,
            "t.gguf",
        ),
        (["bringup", "twin", "vllm", "--model", "MiniMax", "--port", "9"], Engine.VLLM, "MiniMax"),
        (["python", "-m", "bringup", "twin", "vllm", "--scenario", "ready"], Engine.VLLM, None),
        (["my-server", "--port", "1"], None, None),
        # wrapped commands: each wrapper's options (and taskset's mask) are skipped
        (["numactl", "--cpunodebind=0", "--membind", "0", "vllm", "serve", "m"], Engine.VLLM, "m"),
        (["numactl", "-N", "1", "vllm", "serve", "m", "-tp", "2"], Engine.VLLM, "m"),
        (["taskset", "-c", "0-7", "vllm", "serve", "m"], Engine.VLLM, "m"),
        (["env", "-u", "HOME", "X=1", "vllm", "serve", "m"], Engine.VLLM, "m"),
        (["sudo", "-u", "svc", "VLLM_USE_V1=1", "vllm", "serve", "m"], Engine.VLLM, "m"),
        (
            ["env", "X=1", "numactl", "-N", "0", "nice", "-n", "5", "vllm", "serve", "m"],
            Engine.VLLM,
            "m",
        ),
        (
            [
                "numactl",
                "-N",
                "0",
                "python",
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model",
                "m",
            ],
            Engine.VLLM,
            "m",
        ),
        (["taskset", "-p", "1"], None, None),
    ],
)
def test_parse_server_command(argv: list[str], engine: Engine | None, model: str | None) -> None:
    """Each known entry point yields its engine and model; unknown ones yield None."""
    cmd = parse_server_command(argv)
    assert cmd.engine == engine
    assert cmd.model == model


def test_flags_exclude_the_model_positional() -> None:
    """The flags of `vllm serve MODEL ...` are the words after the model."""
    cmd = parse_server_command(["vllm", "serve", "m", "--port", "8001", "--enforce-eager"])
    assert cmd.flags == ("--port", "8001", "--enforce-eager")
    assert cmd.entry == ("vllm", "serve")


def test_wrapped_command_keeps_the_wrapper_in_entry_and_flags_after_the_model() -> None:
    """`numactl -N 0 vllm serve M -tp 2`: the wrapper is part of the entry, -tp 2 a flag."""
    cmd = parse_server_command(["numactl", "-N", "0", "vllm", "serve", "m", "-tp", "2"])
    assert cmd.entry == ("numactl", "-N", "0", "vllm", "serve")
    assert cmd.flags == ("-tp", "2")
    assert get_flag(cmd.flags, "--tensor-parallel-size") == "2"


@pytest.mark.parametrize(
    ("argv", "names", "expected"),
    [
        (["--port", "8001"], ("--port",), "8001"),
        (["--port=8002"], ("--port",), "8002"),
        (["-tp", "4"], ("--tensor-parallel-size",), "4"),
        (["--tensor-parallel-size", "2", "-tp", "8"], ("-tp",), "8"),
        (["--max_num_seqs", "64"], ("--max-num-seqs",), "64"),
        (["--max-model-len", "-1"], ("--max-model-len",), "-1"),
        (["--enforce-eager", "--port", "1"], ("--enforce-eager",), None),
        (["--host"], ("--host",), None),
        (["--port", "1", "--", "--port", "2"], ("--port",), "1"),
        (["--portable", "1"], ("--port",), None),
    ],
)
def test_get_flag(argv: list[str], names: tuple[str, ...], expected: str | None) -> None:
    """Values are read in both forms, through aliases and spellings; the last one wins."""
    assert get_flag(argv, *names) == expected


def test_has_flag() -> None:
    """Boolean and valued flags are both seen; similar names are not."""
    argv = ["vllm", "serve", "m", "--enforce-eager", "-tp=2"]
    assert has_flag(argv, "--enforce-eager")
    assert has_flag(argv, "--tensor-parallel-size")
    assert not has_flag(argv, "--enforce")


@pytest.mark.parametrize(
    ("argv", "flag", "value", "expected"),
    [
        (
            ["vllm", "serve", "m", "--max-num-seqs", "1024"],
            "--max-num-seqs",
            "256",
            ["vllm", "serve", "m", "--max-num-seqs", "256"],
        ),
        (
            ["vllm", "serve", "m", "--max-num-seqs=1024", "--port", "1"],
            "--max-num-seqs",
            "256",
            ["vllm", "serve", "m", "--max-num-seqs=256", "--port", "1"],
        ),
        (
            ["vllm", "serve", "m"],
            "--max-num-seqs",
            "256",
            ["vllm", "serve", "m", "--max-num-seqs", "256"],
        ),
        (
            ["vllm", "serve", "m", "-tp", "4", "--tensor-parallel-size=2"],
            "--tensor-parallel-size",
            "8",
            ["vllm", "serve", "m", "-tp", "8"],
        ),
        (
            ["vllm", "serve", "m"],
            "--enforce-eager",
            None,
            ["vllm", "serve", "m", "--enforce-eager"],
        ),
        (
            ["vllm", "serve", "m", "--enforce-eager", "--port", "1"],
            "--enforce-eager",
            None,
            ["vllm", "serve", "m", "--enforce-eager", "--port", "1"],
        ),
    ],
)
def test_set_flag(argv: list[str], flag: str, value: str | None, expected: list[str]) -> None:
    """Setting a flag replaces it in place (either form, any alias) or appends it."""
    assert set_flag(argv, flag, value) == expected


def test_set_flag_then_get_flag_round_trips() -> None:
    """Whatever was set is what is read back, and the input list is not modified."""
    argv = ["vllm", "serve", "m", "--gpu-memory-utilization", "0.95"]
    out = set_flag(argv, "--gpu-memory-utilization", "0.88")
    assert get_flag(out, "--gpu-memory-utilization") == "0.88"
    assert argv[-1] == "0.95"
