"""`plan --compare`: several setups side by side, each planned as `plan` alone would."""

from __future__ import annotations

import io
import json

import pytest

from bringup.cli.main import Context, main
from plan.helpers import DECODE_KEYS

SEED = (
    "Kimi-K2",
    "--quantization",
    "nvfp4",
    "-tp",
    "8",
    "--compare",
    "MiniMax-M2.5",
    "-tp",
    "4",
    "--gpu",
    "RTX PRO 6000",
    "--interconnect",
    "pcie-numa",
)


def _plan(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["plan", *argv], Context(stdout=out, stderr=err, environ={"NO_COLOR": "1"}))
    return code, out.getvalue(), err.getvalue()


def test_the_seed_decision_in_one_table() -> None:
    """Kimi-K2 NVFP4 on 8 GPUs beside MiniMax-M2.5 on 4, PCIe across sockets: fits, KV, speed."""
    code, out, _ = _plan(*SEED)
    assert code == 0
    for needle in (
        "Kimi-K2 nvfp4 tp 8",
        "MiniMax-M2.5 as stored tp 4",
        "fits",
        "KV cache tokens",
        "decode ceiling",
        "decode expected",
        "collectives",
    ):
        assert needle in out
    assert out.count("8 x RTX PRO 6000") == 1
    assert out.count("4 x RTX PRO 6000") == 1


def test_each_setup_is_the_plan_it_would_be_alone() -> None:
    """The shared flags given after the second setup reach the first; per-setup flags do not."""
    code, out, _ = _plan(*SEED, "--json")
    setups = json.loads(out)["setups"]
    assert code == 0
    assert [s["setup"] for s in setups] == ["Kimi-K2 nvfp4 tp 8", "MiniMax-M2.5 as stored tp 4"]
    _, alone, _ = _plan(
        "Kimi-K2",
        "--quantization",
        "nvfp4",
        "-tp",
        "8",
        "--gpu",
        "RTX PRO 6000",
        "--interconnect",
        "pcie-numa",
        "--json",
    )
    alone_plan = json.loads(alone)
    assert alone_plan.pop("schema_version") == 1  # the top object has it, not the nested plans
    assert setups[0]["plan"] == alone_plan
    minimax = setups[1]["plan"]
    assert minimax["settings"]["quantization"] != "nvfp4"
    assert minimax["settings"]["tensor_parallel_size"] == 4
    assert set(minimax["decode"]) == DECODE_KEYS
    assert minimax["decode"]["collective_latency_seconds"] == pytest.approx(55e-6 - 8e-6)  # TP 4


def test_any_setup_that_does_not_fit_makes_it_exit_1() -> None:
    """Kimi-K2 in its own FP8 does not fit 8 x 96 GB: the comparison exits 1 and says why."""
    code, out, _ = _plan(
        "Kimi-K2", "-tp", "8", "--compare", "MiniMax-M2.5", "-tp", "4", "--gpu", "RTX PRO 6000"
    )
    assert code == 1
    assert "NO: cuda_oom at weights_loading" in out


def test_compare_needs_a_model_first() -> None:
    """`--compare -tp 2` (no model) is one line and exit 2."""
    code, _, err = _plan("Llama-3.1-8B", "--gpu", "H100", "--compare", "-tp", "2")
    assert code == 2
    assert "--compare needs a model first" in err
    assert err.count("\n") == 1


def test_setups_that_differ_only_in_flags_are_labelled_by_them() -> None:
    """Two setups of one model differing in one flag had identical column labels: each is now
    named by what differs, in the table and in the JSON, and the table ends with the pick."""
    argv = ("Llama-3.1-8B", "--gpu", "H100", "--max-model-len", "8192", "--compare",
            "Llama-3.1-8B", "--max-model-len", "8192", "--kv-cache-dtype", "fp8")  # fmt: skip
    code, out, _ = _plan(*argv)
    assert code == 0
    assert "kv auto" in out
    assert "kv fp8" in out
    last = out.strip().splitlines()[-1]
    assert last.startswith("pick: kv fp8: fits")
    assert "most KV cache tokens" in last
    code, out, _ = _plan(*argv, "--json")
    data = json.loads(out)
    assert [s["setup"] for s in data["setups"]] == ["kv auto", "kv fp8"]
    assert data["pick"]["setup"] == "kv fp8"
    assert "KV cache tokens" in data["pick"]["why"]


def test_flags_after_the_server_command_label_the_first_setup() -> None:
    """A setup set apart by a flag after -- is named by it; identical setups by position."""
    code, out, _ = _plan(
        "--gpu", "H100", "--compare", "Llama-3.1-8B", "--max-model-len", "8192", "--json",
        "--", "vllm", "serve", "Llama-3.1-8B", "--max-model-len", "8192", "--enforce-eager",
    )  # fmt: skip
    assert code == 0
    data = json.loads(out)
    assert [s["setup"] for s in data["setups"]] == ["eager", "graphs"]
    code, out, _ = _plan("Llama-3.1-8B", "--gpu", "H100", "--compare", "Llama-3.1-8B", "--json")
    assert [s["setup"] for s in json.loads(out)["setups"]] == ["Llama-3.1-8B #1", "Llama-3.1-8B #2"]


def test_the_pick_is_the_fastest_that_fits() -> None:
    """Of the setups that fit, the fastest expected decode wins and the why says by how much;
    one that does not fit is never the pick."""
    code, out, _ = _plan(
        "Llama-3.1-70B", "--gpu", "H100", "-tp", "2", "--max-model-len", "8192",
        "--compare", "Llama-3.1-70B", "-tp", "4", "--max-model-len", "8192",
        "--compare", "Llama-3.1-70B", "-tp", "1", "--max-model-len", "8192", "--json",
    )  # fmt: skip
    assert code == 1
    data = json.loads(out)
    assert data["pick"]["setup"] == "tp 4"
    assert "fastest expected decode" in data["pick"]["why"]
