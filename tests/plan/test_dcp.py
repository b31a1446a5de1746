"""Decode context parallelism in the memory plan (vLLM 0.32 ``v1/core/kv_cache_utils.py``,
``v1/kv_cache_interface.py``, ``config/parallel.py``, ``config/model.py``).

Under ``-dcp N`` a rank's pages and its bytes per token are unchanged, the pool holds the same
blocks, but a request needs ``cdiv(cdiv(max_model_len, N), block)`` blocks per rank: the
reported tokens and the max concurrency are counted across the DCP group. vLLM refuses N
that does not divide TP, exceeds TP // KV heads (GQA), does not divide the query heads per KV
head, or meets a sliding-window layer.
"""

from __future__ import annotations

import io
import json

import pytest

from bringup.cli.main import Context, main
from bringup.core.plan import assemble
from bringup.core.plan.checks import accepted_dcp_sizes, dcp_problem
from bringup.core.plan.kv import group_layout
from bringup.core.plan.planner import kv_cache
from plan.helpers import bundled_config, planner_for


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["plan", *argv], Context(stdout=out, stderr=err, environ={"NO_COLOR": "1"}))
    return code, out.getvalue(), err.getvalue()


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@pytest.mark.parametrize("dcp", [2, 4, 8])
def test_mla_kv_tokens_are_counted_across_the_dcp_group(dcp: int) -> None:
    """DeepSeek-V3 (MLA, block 64) at TP 8 on H200: the same pool and bytes per token per
    rank, and tokens = int(blocks / cdiv(cdiv(len, N), 64) x len), about N times TP 8 alone."""
    config = bundled_config("DeepSeek-V3")
    planner, one = planner_for(config, "H200", 8, tensor_parallel_size=8, max_model_len=32768)
    _, sharded = planner_for(
        config,
        "H200",
        8,
        tensor_parallel_size=8,
        max_model_len=32768,
        decode_context_parallel_size=dcp,
    )
    r1, rn = planner.evaluate(one).rank, planner.evaluate(sharded).rank
    assert rn.kv == r1.kv > 0
    assert rn.spec.bytes_per_token == r1.spec.bytes_per_token
    kv1, kvn = kv_cache(r1, one), kv_cache(rn, sharded)
    layers = rn.spec.full_layers
    size, groups, _ = group_layout(layers, 0)
    blocks = rn.kv // (size * rn.spec.bytes_per_token // layers * 64)
    assert kvn.tokens == int(blocks / (groups * _cdiv(_cdiv(32768, dcp), 64)) * 32768)
    assert kvn.tokens == pytest.approx(dcp * kv1.tokens, rel=1e-6)
    assert kvn.max_concurrency == pytest.approx(dcp * kv1.max_concurrency, rel=1e-3)
    assert (kv1.dcp_group_size, kvn.dcp_group_size) == (1, dcp)


def test_before_0_21_the_reported_tokens_are_multiplied_by_dcp() -> None:
    """0.9-0.20 (``_report_kv_cache_config``): num_blocks // groups x block x dcp."""
    config = bundled_config("DeepSeek-V3")
    planner, one = planner_for(config, "H200", 8, tensor_parallel_size=8, engine_version="0.11")
    _, two = planner_for(
        config,
        "H200",
        8,
        tensor_parallel_size=8,
        engine_version="0.11",
        decode_context_parallel_size=2,
    )
    r1, r2 = planner.evaluate(one).rank, planner.evaluate(two).rank
    assert kv_cache(r2, two).tokens == 2 * kv_cache(r1, one).tokens > 0


def test_gqa_dcp_shards_the_replicated_kv_heads() -> None:
    """Qwen3-235B (4 KV heads, 64 heads) at TP 8: two ranks hold each head, DCP 2 splits
    its tokens; the one-request check needs half the blocks, so a longer max_model_len fits."""
    config = bundled_config("Qwen3-235B-A22B")
    planner, one = planner_for(config, "H200", 8, tensor_parallel_size=8)
    _, two = planner_for(config, "H200", 8, tensor_parallel_size=8, decode_context_parallel_size=2)
    r1, r2 = planner.evaluate(one).rank, planner.evaluate(two).rank
    assert r1.spec.bytes_per_token == r2.spec.bytes_per_token
    assert kv_cache(r2, two).tokens == pytest.approx(2 * kv_cache(r1, one).tokens, rel=1e-4)
    plan = assemble.make_plan(planner, two)
    assert plan.kv_cache.dcp_group_size == 2


@pytest.mark.parametrize(
    ("model", "tp", "allowed"),
    [
        ("DeepSeek-V3", 8, [1, 2, 4, 8]),  # MLA: any divisor of TP
        ("Qwen3-235B-A22B", 8, [1, 2]),  # 4 KV heads: N <= 8 // 4
        ("Qwen3-235B-A22B", 4, [1]),  # TP must exceed the KV heads
        ("gpt-oss-120b", 8, [1]),  # sliding-window layers refuse DCP
    ],
)
def test_the_dcp_sizes_vllm_accepts(model: str, tp: int, allowed: list[int]) -> None:
    """The sizes follow vLLM 0.32's checks (parallel.py, model.py, SlidingWindowSpec)."""
    from bringup.core.plan import parse_architecture

    arch = parse_architecture(bundled_config(model))
    assert accepted_dcp_sizes(arch, tp) == allowed
    assert dcp_problem(arch, tp, 1) is None


@pytest.mark.parametrize(
    ("model", "tp", "dcp", "needle", "allowed"),
    [
        ("DeepSeek-V3", "8", "3", "must divide the tensor parallel size 8", "1, 2, 4, 8"),
        ("Qwen3-235B-A22B", "8", "4", "exceeds the maximum (2)", "1, 2"),
        ("Qwen3-235B-A22B", "4", "2", "greater than the model's 4 KV heads", "1"),
        ("gpt-oss-120b", "8", "2", "sliding-window", "1"),
    ],
)
def test_an_invalid_dcp_is_a_usage_error_naming_the_allowed_values(
    model: str, tp: str, dcp: str, needle: str, allowed: str
) -> None:
    """Exit 2, one line saying why, and the sizes vLLM would accept at that TP."""
    code, out, err = _run(model, "--gpu", "H200", "--gpus", "8", "-tp", tp, "-dcp", dcp)
    assert code == 2
    assert out == ""
    assert needle in err
    assert f"allowed at --tensor-parallel-size {tp}: {allowed}" in err
    assert "Traceback" not in err


def test_dcp_from_the_server_command_reaches_json_and_text() -> None:
    """-dcp after -- counts: JSON settings and kv_cache say the group; the text says that the
    tokens are counted across it."""
    argv = ("Kimi-K2", "--gpu", "H200", "--gpus", "8", "-tp", "8")
    server = ("--", "vllm", "serve", "moonshotai/Kimi-K2", "-dcp", "4")
    code, out, _ = _run(*argv, "--json", *server)
    assert code in (0, 1)
    d = json.loads(out)
    assert d["settings"]["decode_context_parallel_size"] == 4
    assert d["kv_cache"]["dcp_group_size"] == 4
    _, base, _ = _run(*argv, "--json")
    assert json.loads(base)["kv_cache"]["dcp_group_size"] == 1
    assert d["kv_cache"]["tokens"] == pytest.approx(
        4 * json.loads(base)["kv_cache"]["tokens"], rel=1e-4
    )
    _, text, _ = _run(*argv, *server)
    assert "counted across the DCP group of 4 GPUs" in text
    _, plain, _ = _run(*argv)
    assert "DCP group" not in plain


def test_dcp_on_the_cpu_build_is_refused() -> None:
    """The CPU plan does not model DCP: a usage error, not a silently ignored flag."""
    code, _, err = _run("Qwen3-8B", "--device", "cpu", "--gpu-memory", "64GiB", "-dcp", "2")
    assert code == 2
    assert "GPUs only" in err
