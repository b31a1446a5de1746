"""Checks vLLM itself makes, and flags out of range: no plan vLLM would refuse."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from bringup.cli.main import Context, main
from bringup.core.plan import parse_architecture
from bringup.core.plan.checks import accepted_tp_sizes, parallel_problem
from plan.helpers import bundled_config


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["plan", *argv], Context(stdout=out, stderr=err, environ={"NO_COLOR": "1"}))
    return code, out.getvalue(), err.getvalue()


def test_minimax_kv_heads_refuse_tp_3_and_6() -> None:
    """MiniMax-M2.5: 48 heads divide by 3 and 6, its 8 KV heads do not: vLLM refuses both."""
    arch = parse_architecture(bundled_config("MiniMax-M2.5"))
    assert accepted_tp_sizes(arch, 8) == [1, 2, 4, 8]
    assert "KV heads" in (parallel_problem(arch, 3) or "")


def test_kv_heads_replicate_when_tp_is_a_multiple() -> None:
    """TP 16 over 8 KV heads is accepted (each head on two ranks)."""
    arch = parse_architecture(bundled_config("MiniMax-M2.5"))
    assert parallel_problem(arch, 16) is None


def test_recommendations_name_only_sizes_vllm_accepts() -> None:
    """The 8-GPU recommendation for MiniMax-M2.5 on H200 never names TP 3 or 6."""
    code, out, _ = _run("MiniMax-M2.5", "--gpu", "H200", "--gpus", "8", "-tp", "1", "--json")
    assert code == 1
    recs = [r for r in json.loads(out)["recommendations"] if r["flag"] == "--tensor-parallel-size"]
    assert recs
    named = [recs[0]["value"]]
    if "also fit:" in recs[0]["why"]:
        named += recs[0]["why"].split("also fit:")[1].strip().split(", ")
    assert not {"3", "6", "5", "7"} & set(named)


def test_tp_3_is_a_config_error() -> None:
    """`-tp 3` on 3 GPUs is refused like vLLM refuses it, not FITS."""
    code, out, _ = _run("MiniMax-M2.5", "--gpu", "H200", "--gpus", "3", "-tp", "3", "--json")
    verdict = json.loads(out)["verdict"]
    assert code == 1
    assert verdict["failure_class"] == "config_error"
    assert "KV heads" in verdict["reason"]


@pytest.mark.parametrize(
    ("flag", "value", "words"),
    [
        ("-tp", "0", "at least 1"),
        ("--max-num-seqs", "0", "at least 1"),
        ("--max-num-batched-tokens", "-5", "at least 1"),
        ("--gpu-memory-utilization", "1.5", "(0, 1]"),
        ("--kv-cache-dtype", "int3", "fp8_e4m3"),
        ("--max-model-len", "0", "-1/auto"),
    ],
)
def test_flags_out_of_range_are_usage_errors(flag: str, value: str, words: str) -> None:
    """Exit 2 with one line naming the allowed values, never a silent default."""
    code, out, err = _run("Llama-3.1-8B", "--gpu", "H100", flag, value)
    assert code == 2
    assert out == ""
    assert words in err
    assert "Traceback" not in err


def test_unknown_engine_version_plans_with_the_nearest_and_says_so() -> None:
    """--engine-version 9.9 plans with 0.33's rules and a warning (stderr and JSON)."""
    code, out, err = _run("Llama-3.1-8B", "--gpu", "H100", "--engine-version", "9.9", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["settings"]["engine_version"] == "0.33"
    assert any("9.9" in w and "0.33" in w for w in data["warnings"])
    code, _, err = _run("Llama-3.1-8B", "--gpu", "H100", "--engine-version", "0.2")
    assert "warning:" in err
    assert "0.5" in err


def _cfg(tmp_path: Path, **changes: Any) -> str:
    cfg = {**bundled_config("Llama-3.1-8B"), **changes}
    for key in [k for k, v in changes.items() if v is None]:
        del cfg[key]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def test_unknown_architecture_is_planned_generically_with_a_warning(tmp_path: Path) -> None:
    """An architecture bringup does not know is planned from its fields, and says so."""
    code, out, _ = _run(
        _cfg(tmp_path, architectures=["FooBarForCausalLM"]), "--gpu", "H100", "--json"
    )
    data = json.loads(out)
    assert code == 0
    assert data["model"]["architecture"] == "FooBarForCausalLM"
    assert any("FooBarForCausalLM" in w and "generically" in w for w in data["warnings"])


def test_missing_config_key_is_one_line_naming_it(tmp_path: Path) -> None:
    """No num_hidden_layers (nor n_layer): exit 2, one line naming the key, no KeyError."""
    code, _, err = _run(_cfg(tmp_path, num_hidden_layers=None), "--gpu", "H100")
    assert code == 2
    assert "num_hidden_layers" in err
    assert "KeyError" not in err
    assert len(err.strip().splitlines()) == 1
