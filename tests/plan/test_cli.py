"""`bringup plan` through the real CLI: JSON shape, exit codes, folders, bad input."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.cli.main import Context, main
from bringup.core.plan.flags import EXAMPLES, VLLM_FLAGS, convert
from bringup.errors import UsageError
from plan.helpers import DECODE_KEYS

from builders.safetensors import write_checkpoint


def _run(*argv: str, environ: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["plan", *argv], Context(stdout=out, stderr=err, environ=environ or {"NO_COLOR": "1"})
    )
    return code, out.getvalue(), err.getvalue()


def test_json_has_exactly_the_issue_fields() -> None:
    """--json prints the issue's object with its exact keys."""
    code, out, _ = _run(
        "MiniMax-M2.5",
        "--gpu",
        "rtx pro 6000",
        "--gpus",
        "4",
        "--json",
        "--",
        "vllm",
        "serve",
        "MiniMaxAI/MiniMax-M2.5",
        "-tp",
        "4",
        "--gpu-memory-utilization",
        "0.97",
    )
    data = json.loads(out)
    assert code == 1
    assert set(data) == {
        "schema_version",
        "model",
        "settings",
        "per_gpu",
        "kv_cache",
        "verdict",
        "recommendations",
        "decode",
        "warnings",
        "calibration",
        "sampler_warmup",
        "startup",
        "what_fits",
    }
    assert set(data["decode"]) == DECODE_KEYS
    assert set(data["model"]) == {"architecture", "parameters", "weights_bytes_total"}
    assert set(data["per_gpu"]) == {
        "total_bytes",
        "weights_bytes",
        "activation_peak_bytes",
        "non_torch_bytes",
        "cuda_graph_bytes",
        "kv_cache_bytes",
        "sampler_warmup_bytes",
        "headroom_bytes",
        # the graphs the pool is planned for (issue 25: the flags' capture sizes and mode)
        "cuda_graph_mode",
        "cuda_graph_capture_sizes",
    }
    # the issue's three, the DCP group the tokens are counted across (issue 15, -dcp), and
    # the tokens at the low end of the error bar (issue 25, core.plan.confidence)
    assert set(data["kv_cache"]) == {
        "bytes_per_token",
        "tokens",
        "max_concurrency",
        "dcp_group_size",
        "tokens_low",
    }
    assert set(data["verdict"]) == {
        "fits",
        "failure_class",
        "phase",
        "reason",
        "confidence",
        "uncertain_because",
    }
    assert data["verdict"]["failure_class"] == "cuda_oom"
    assert data["verdict"]["phase"] == "warmup"
    assert data["settings"]["tensor_parallel_size"] == 4
    assert all(set(r) == {"flag", "value", "why"} for r in data["recommendations"])


def test_model_can_come_from_the_server_command() -> None:
    """Without MODEL, the model named by `vllm serve` is used (a bundled config here)."""
    code, out, _ = _run("--gpu", "H100", "--json", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B")
    assert code == 0
    assert json.loads(out)["model"]["architecture"] == "LlamaForCausalLM"


def test_human_output_is_plain_without_a_terminal() -> None:
    """Human output has the per-GPU table, KV line, verdict and flags, without colour codes."""
    code, out, _ = _run(
        "MiniMax-M2.5",
        "--gpu",
        "rtx pro 6000",
        "--gpus",
        "4",
        "-tp",
        "4",
        "--gpu-memory-utilization",
        "0.97",
    )
    assert code == 1
    assert "\x1b[" not in out
    for text in ("sampler warmup", "headroom", "KV cache:", "cuda_oom at warmup", "--max-num-seqs"):
        assert text in out


def test_bare_config_path(tmp_path: Path) -> None:
    """A config.json alone is planned (with --quantization when the config does not say)."""
    from plan.helpers import bundled_config

    cfg = bundled_config("Llama-3.1-8B")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    code, out, _ = _run(
        str(tmp_path / "config.json"),
        "--gpu",
        "L40S",
        "--quantization",
        "fp8",
        "--json",
        "--max-model-len",
        "8192",
    )
    data = json.loads(out)
    assert code == 0
    assert data["per_gpu"]["weights_bytes"] < 9 * 1024**3  # fp8 roughly halves the 15 GiB


def test_folder_uses_exact_header_bytes(tmp_path: Path) -> None:
    """A safetensors folder is planned from its headers: weights equal the stored bytes at tp 1."""
    folder = write_checkpoint(
        tmp_path / "m", n_shards=3, hidden=1024, layers=4, heads=8, kv_heads=2, vocab=4096
    )
    code, out, _ = _run(str(folder), "--gpu-memory", "24GiB", "--json", "--max-num-seqs", "16")
    data = json.loads(out)
    stored = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
    assert code == 0
    assert data["model"]["weights_bytes_total"] <= stored
    assert data["model"]["weights_bytes_total"] > stored * 0.99
    assert data["per_gpu"]["weights_bytes"] == data["model"]["weights_bytes_total"]


# bringup plan's flags, then a server command after --
_SERVE = ["Llama-3.1-8B", "--gpu", "H100", "--", "vllm", "serve", "m"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["MiniMax-M2.5", "--gpu", "Voodoo 5"], "unknown GPU"),
        (["no-such-model", "--gpu", "H100"], "no such model"),
        (["MiniMax-M2.5"], "no GPU detected"),
        ([], "no model given"),
        (
            ["Llama-3.1-8B", "--gpu", "H100", "--gpu-memory-utilization", "1.5"],
            "gpu-memory-utilization",
        ),
        # an engine flag's number from the server command, and the decode flags' (-dcp,
        # --nnodes): one converter (core.plan.flags.convert), one wording
        (
            [*_SERVE, "-tp", "two"],
            (
                "--tensor-parallel-size: 'two' is not a whole number "
                "(give e.g. --tensor-parallel-size 2)"
            ),
        ),
        (
            [*_SERVE, "--max-num-seqs", "abc"],
            "--max-num-seqs: 'abc' is not a whole number (give e.g. --max-num-seqs 64)",
        ),
        (
            [*_SERVE, "--gpu-memory-utilization", "high"],
            (
                "--gpu-memory-utilization: 'high' is not a number "
                "(give e.g. --gpu-memory-utilization 0.9)"
            ),
        ),
        (
            [*_SERVE, "-dcp", "x"],
            (
                "--decode-context-parallel-size: 'x' is not a whole number "
                "(give e.g. --decode-context-parallel-size 2)"
            ),
        ),
        (
            [*_SERVE, "--nnodes", "two"],
            "--nnodes: 'two' is not a whole number (give e.g. --nnodes 2)",
        ),
        (["Llama-3.1-8B", "--gpu", "H100", "--quantization", "zip"], "unknown quantization"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv: list[str], message: str) -> None:
    """Bad input prints one error line naming the problem, and exits 2."""
    code, out, err = _run(*argv)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1
    assert out == ""


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--max-num-seqs", "abc"),
        ("-tp", "x"),
        ("--gpu-memory-utilization", "high"),
        ("--max-num-batched-tokens", "8x"),
        ("--max-model-len", "2.5K"),
        ("-dcp", "x"),
        ("--nnodes", "two"),
    ],
)
def test_own_number_flag_fails_as_the_server_commands(flag: str, value: str) -> None:
    """bringup's own engine flag with a bad number prints the line the same flag after
    ``--`` prints (core.plan.flags.convert's), not argparse's "invalid int value"."""
    own = _run("Llama-3.1-8B", "--gpu", "H100", flag, value)
    served = _run(*_SERVE, flag, value)
    assert own == served
    assert own[0] == 2
    assert "invalid" not in own[2]


@pytest.mark.parametrize(
    ("flag", "kind"),
    [
        *((names[0], kind) for names, _, kind in VLLM_FLAGS if kind in (int, float)),
        ("--max-model-len", int),
        ("--decode-context-parallel-size", int),
        ("--nnodes", int),
    ],
)
def test_each_number_flag_hints_a_value_that_reads(flag: str, kind: type) -> None:
    """Every engine flag read as a number has an example in the error for a value that is
    not one, and the example reads."""
    assert isinstance(convert(flag, EXAMPLES[flag], kind), kind)
    with pytest.raises(UsageError) as caught:
        convert(flag, "lots", kind)
    assert str(caught.value).endswith(f"(give e.g. {flag} {EXAMPLES[flag]})")


def test_gpus_from_readings_file_counts_other_processes(tmp_path: Path) -> None:
    """GPUs from a readings file: memory held by others fails the start-up gate."""
    readings = {
        "gpus": [
            {
                "index": 0,
                "name": "NVIDIA H100 80GB HBM3",
                "uuid": "GPU-0",
                "memory_total_bytes": 85_029_158_912,
                "memory_used_bytes": 30 * 1024**3,
            }
        ]
    }
    path = tmp_path / "gpus.json"
    path.write_text(json.dumps(readings))
    code, out, _ = _run("Llama-3.1-8B", "--gpus-from", str(path), "--json")
    data = json.loads(out)
    assert code == 1
    assert (data["verdict"]["failure_class"], data["verdict"]["phase"]) == (
        "gpu_memory_utilization",
        "distributed_init",
    )
    assert data["recommendations"][0]["flag"] == "--gpu-memory-utilization"


def test_real_subprocess() -> None:
    """`python -m bringup plan` runs as a process and exits with the verdict's code."""
    proc = subprocess.run(
        [sys.executable, "-m", "bringup", "plan", "Llama-3.1-8B", "--gpu", "H100", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["verdict"]["fits"] is True


def test_on_an_80_column_terminal_long_lines_hang() -> None:
    """On a colour terminal at COLUMNS=80, plan's long lines (the model line, decode, the
    verdict) wrap with continuations 4 columns deeper, never back at column 0; outside the
    table the words are the plain output's, and no line is wider than 80."""
    import re

    def run(environ: dict[str, str]) -> list[str]:
        out = io.StringIO()
        argv = ["plan", "Llama-3.1-70B", "--gpu", "H100", "-tp", "4"]
        main(argv, Context(stdout=out, stderr=io.StringIO(), environ=environ))
        text = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())
        text = text.split("time to ready (predicted):")[0]  # its own table-like rows
        return [r for r in text.splitlines() if not r.startswith(tuple("┃│┏┡└┗"))]  # the table

    plain = run({})
    rows = run({"FORCE_COLOR": "1", "COLUMNS": "80"})
    assert max(len(r) for r in rows) <= 80
    assert "".join("".join(rows).split()) == "".join("".join(plain).split())
    assert len(rows) > len(plain)
    assert rows[0].startswith("LlamaForCausalLM: 70.6B parameters")
    assert rows[1].startswith("    pp 1")  # the model line's continuation
    decode = rows.index(next(r for r in rows if r.startswith("decode expected:")))
    assert re.match(r"    \S", rows[decode + 1])
