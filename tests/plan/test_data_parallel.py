"""Data-parallel layouts (-dp, DP + EP, --data-parallel-size-local) planned as vLLM places
them: each DP engine its own dense weights (over its TP ranks) and KV cache, the MoE layers'
experts over TP x DP ranks, the MoE layer working on every DP rank's tokens."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from bringup.cli.main import Context, main
from bringup.core.plan import parse_architecture
from bringup.core.plan.peaks import activation_peak_bytes
from bringup.core.plan.quant import format_from_config
from bringup.core.plan.synth import synthesize
from bringup.core.plan.weights import Parallel, weights_per_stage
from plan.helpers import bundled_config


def _run(*argv: str) -> tuple[int, dict[str, Any], str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["plan", "--json", *argv], Context(stdout=out, stderr=err, environ={}))
    return code, json.loads(out.getvalue()) if out.getvalue() else {}, err.getvalue()


def _stage(parallel: Parallel) -> Any:
    arch = parse_architecture(bundled_config("Qwen3-30B-A3B"))
    tensors = synthesize(arch, format_from_config(None, None))
    return weights_per_stage(tensors, arch, parallel)[0]


@pytest.mark.parametrize("ep", [False, True])
def test_experts_split_over_tp_times_dp_dense_over_tp(ep: bool) -> None:
    """-tp 2 -dp 4: attention and embeddings as at TP 2, experts as at TP 8 (sliced without
    EP, whole experts with it)."""
    dp = _stage(Parallel(tp=2, expert_parallel=ep, dp=4))
    assert dp.expert_bytes == _stage(Parallel(tp=8, expert_parallel=ep)).expert_bytes
    tp2 = _stage(Parallel(tp=2, expert_parallel=ep))
    assert (dp.sharded_bytes, dp.vocab_bytes) == (tp2.sharded_bytes, tp2.vocab_bytes)


def test_moe_activation_grows_with_dp_dense_does_not() -> None:
    """The MoE layer sees every DP rank's tokens (all-gathered); a dense model's forward is
    its own engine's."""
    moe = parse_architecture(bundled_config("Qwen3-30B-A3B"))
    dense = parse_architecture(bundled_config("Llama-3.1-8B"))
    one, four = (
        activation_peak_bytes(moe, 1, 256, 8192, expert_parallel=True, dp=dp) for dp in (1, 4)
    )
    assert four > 2 * one
    assert activation_peak_bytes(dense, 1, 256, 8192, dp=4) == activation_peak_bytes(
        dense, 1, 256, 8192
    )


def test_dp_plan_counts_gpus_and_kv_per_engine() -> None:
    """-tp 2 -dp 4 needs 8 GPUs; each engine has its own KV cache (the text says how many
    tokens in all); --data-parallel-size-local 2 needs 4 here."""
    code, plan, _ = _run(
        "Qwen3-30B-A3B", "--gpu", "H100", "--gpus", "8", "-tp", "2", "-dp", "4",
        "--max-model-len", "32768",
    )  # fmt: skip
    assert code == 0
    assert plan["settings"]["data_parallel_size"] == 4
    assert plan["kv_cache"]["tokens"] > 0
    code, plan, _ = _run(
        "Qwen3-30B-A3B", "--gpu", "H100", "--gpus", "4", "-tp", "2", "-dp", "4",
        "--max-model-len", "32768",
    )  # fmt: skip
    assert code == 1
    assert plan["verdict"]["failure_class"] == "config_error"
    assert "data parallel" in plan["verdict"]["reason"]
    code, plan, _ = _run(
        "Qwen3-30B-A3B", "--gpu", "H100", "--gpus", "4", "--", "vllm", "serve", "m",
        "-tp", "2", "-dp", "4", "--data-parallel-size-local", "2", "--max-model-len", "32768",
    )  # fmt: skip
    assert code == 0
    assert plan["settings"]["data_parallel_size_local"] == 2
    assert not any("not planned" in w for w in plan["warnings"])


def test_dp_text_says_tokens_in_all() -> None:
    """The KV line says the tokens are per engine and how many there are in all."""
    out, err = io.StringIO(), io.StringIO()
    argv = ["plan", "Qwen3-30B-A3B", "--gpu", "H100", "--gpus", "8", "-dp", "8",
            "--enable-expert-parallel", "--max-model-len", "32768"]  # fmt: skip
    assert main(argv, Context(stdout=out, stderr=err, environ={"NO_COLOR": "1"})) == 0
    text = out.getvalue()
    assert "dp 8" in text
    assert "in each of the 8 data-parallel engines" in text


def test_local_dp_above_dp_is_refused() -> None:
    """vLLM refuses --data-parallel-size-local above --data-parallel-size."""
    code, _, err = _run("Qwen3-30B-A3B", "--gpu", "H100", "-dp", "2", "-dpl", "4")
    assert code == 2
    assert "--data-parallel-size-local" in err
