"""The verdict's confidence (core/plan/confidence.py): each rule on self-written configs.

Every setup is placed near the boundary the rule is about by computing it from the plan
itself (the KV pool, the graph pool, the headroom), never from hard-coded results.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from bringup.cli.main import Context, main
from bringup.core import gpu_catalog
from bringup.core.plan import Requested, assemble, decode, parse_architecture
from bringup.core.plan import confidence as conf
from bringup.core.plan.result import Plan
from bringup.core.plan.settings import resolve
from plan.helpers import catalog_gpus

GiB = 1024**3

# a Llama-like dense decoder of about 8B parameters (written for these tests)
DENSE: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 1048576,
    "vocab_size": 128256,
    "rms_norm_eps": 1e-05,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def _moe(hidden: int, layers: int, experts: int, expert_size: int) -> dict[str, Any]:
    """A Qwen3-MoE-like config (written for these tests)."""
    return {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "hidden_size": hidden,
        "intermediate_size": 4 * hidden,
        "moe_intermediate_size": expert_size,
        "num_experts": experts,
        "num_experts_per_tok": 8,
        "num_hidden_layers": layers,
        "num_attention_heads": 64,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "max_position_embeddings": 1048576,
        "vocab_size": 151936,
        "mlp_only_layers": [],
        "decoder_sparse_step": 1,
        "norm_topk_prob": True,
        "rms_norm_eps": 1e-06,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }


MOE_145B = _moe(4096, 60, 128, 1536)  # 60 x 128 x 3 x 4096 x 1536 = 145B in the experts
MOE_20B = _moe(2048, 40, 64, 1024)


def gpu_plan(
    config: dict[str, Any], gpu: str, count: int = 1, *, free_known: bool = False, **req: Any
) -> Plan:
    """The plan ``bringup plan`` makes, through the library (no tensors: synthesized)."""
    model = gpu_catalog.lookup(gpu)
    return assemble.gpu_plan(
        parse_architecture(config),
        None,
        catalog_gpus(model, count),
        Requested(**req),
        setup=decode.DecodeSetup(),
        gpu=model,
        free_known=free_known,
    )


def _len_for(plan: Plan, need_bytes: float) -> int:
    """A max_model_len (a multiple of the 16-token block) whose request needs about
    ``need_bytes`` of KV cache on this plan's GPUs."""
    return max(16, int(need_bytes / plan.kv_cache.bytes_per_token) // 16 * 16)


def _labels(plan: Plan) -> tuple[str, ...]:
    return plan.verdict.uncertain_labels


# (a) the engine version


def test_an_unknown_version_is_uncertain_when_the_versions_disagree() -> None:
    """Between 0.20 and 0.21 only the graph pool moves into the budget: a request sized
    between the two pools fits under one and not the other; without --engine-version the
    verdict says so, naming the ranges; with it, that doubt is gone."""
    common = {"gpu_memory_utilization": 0.9, "max_model_len": 4096}
    old = gpu_plan(DENSE, "H100", engine_version="0.20", **common).per_gpu
    new = gpu_plan(DENSE, "H100", engine_version="0.21", **common).per_gpu
    assert old.kv_cache_bytes - new.kv_cache_bytes == new.cuda_graph_bytes > 0
    probe = gpu_plan(DENSE, "H100", engine_version="0.21", **common)
    length = _len_for(probe, (old.kv_cache_bytes + new.kv_cache_bytes) / 2)

    unknown = gpu_plan(DENSE, "H100", gpu_memory_utilization=0.9, max_model_len=length)
    assert unknown.verdict.confidence == "uncertain"
    assert "version not given" in _labels(unknown)
    why = next(w for w in unknown.verdict.uncertain_because if "version" in w)
    assert "0.20 fits" in why
    assert "0.21 kv_cache_insufficient" in why
    assert "--engine-version" in why

    given = gpu_plan(
        DENSE, "H100", engine_version="0.33", gpu_memory_utilization=0.9, max_model_len=length
    )
    assert "version not given" not in _labels(given)


def test_a_plan_far_from_every_boundary_is_certain_under_every_version() -> None:
    """A small request on a large GPU fits under all known versions' rules: certain."""
    plan = gpu_plan(DENSE, "H200", max_model_len=8192)
    assert plan.verdict.fits
    assert (plan.verdict.confidence, plan.verdict.uncertain_because) == ("certain", ())
    assert plan.kv_cache.tokens_low is None


def test_every_known_minor_version_is_weighed() -> None:
    """The alternatives are the releases bringup has rules for, oldest to newest."""
    versions = conf.known_versions()
    assert versions[0] == "0.5.0"
    assert versions[-1] == "0.33"
    assert {"0.5.5", "0.6.4", "0.7", "0.20", "0.21"} <= set(versions)
    assert len(versions) == len(set(versions)) == 6 + 7 + 27


# (b) the model class the plan under-counts


def test_large_fp8_moe_is_uncertain_when_its_residual_would_break_the_verdict() -> None:
    """An FP8 MoE of 145B parameters whose KV margin lies between the plan's own KV error
    and the class's measured residual: only the class rule doubts it, and the KV tokens at
    the low end are given."""
    base = gpu_plan(
        MOE_145B, "H200", 2, tensor_parallel_size=2, quantization="fp8", engine_version="0.20"
    )
    total = base.per_gpu.total_bytes
    # a pool of about 30 GiB, where (KV error x pool) < residual is possible
    util = 0.9 - (base.per_gpu.kv_cache_bytes - 30 * GiB) / total
    req = {"tensor_parallel_size": 2, "quantization": "fp8", "engine_version": "0.20"}
    sized = gpu_plan(MOE_145B, "H200", 2, gpu_memory_utilization=round(util, 4), **req)
    pool = sized.per_gpu.kv_cache_bytes
    margin = (conf.KV_MEDIAN_ERROR * pool + conf.LARGE_MOE_RESIDUAL_BYTES) / 2
    length = _len_for(sized, pool - margin)
    plan = gpu_plan(
        MOE_145B, "H200", 2, gpu_memory_utilization=round(util, 4), max_model_len=length, **req
    )
    assert plan.verdict.fits
    assert _labels(plan) == ("model class",)
    assert "kv_cache_insufficient" in plan.verdict.uncertain_because[0]
    low = plan.kv_cache.tokens_low
    assert low is not None
    assert 0 < low < plan.kv_cache.tokens

    roomy = gpu_plan(MOE_145B, "H200", 2, max_model_len=4096, **req)
    assert roomy.verdict.confidence == "certain"
    assert roomy.kv_cache.tokens_low is not None  # the class applies; the verdict holds


def test_the_class_is_large_moe_in_fp8_or_int4() -> None:
    """MoE, at least 100B parameters, FP8 or INT4 weights; not bf16, MXFP4, small or dense."""

    def member(config: dict[str, Any], quant: str | None, params: int) -> bool:
        arch = parse_architecture(config)
        s = resolve(
            Requested(quantization=quant),
            memory_bytes=80 * GiB,
            treats_as_a100=False,
            max_position_embeddings=arch.max_position_embeddings,
            default_quantization=None,
            dense=arch.dense,
        )
        return conf.undercounted_class(arch, s, params) is not None

    big = 145 * 10**9
    assert member(MOE_145B, "fp8", big)
    assert member(MOE_145B, "awq", big)
    assert not member(MOE_145B, None, big)
    assert not member(MOE_145B, "mxfp4", big)
    assert not member(MOE_20B, "fp8", 20 * 10**9)
    assert not member(DENSE, "fp8", big)


def test_the_residual_is_the_largest_shortfall_measured() -> None:
    """The error bar is the evidence's largest per-GPU shortfall, not a fitted figure."""
    assert round(max(conf.LARGE_MOE_POOL_SHORTFALLS_GIB) * GiB) == conf.LARGE_MOE_RESIDUAL_BYTES
    assert min(conf.LARGE_MOE_POOL_SHORTFALLS_GIB) < 1 < conf.LARGE_MOE_RESIDUAL_BYTES / GiB


# (c) unified memory


def test_unified_memory_at_the_default_utilization_is_uncertain() -> None:
    """On GB10 at vLLM 0.33's 0.92, a start that must find 92 % free is in doubt when the
    OS holds its share; --gpu-free settles it; a low utilization with room to spare holds."""
    plan = gpu_plan(DENSE, "GB10", engine_version="0.33", max_model_len=8192)
    assert plan.verdict.fits
    assert _labels(plan) == ("unified memory",)
    assert "gpu_memory_utilization at distributed_init" in plan.verdict.uncertain_because[0]
    assert "--gpu-free" in plan.verdict.uncertain_because[0]

    told = gpu_plan(DENSE, "GB10", engine_version="0.33", max_model_len=8192, free_known=True)
    assert told.verdict.confidence == "certain"

    low = gpu_plan(
        DENSE, "GB10", engine_version="0.33", max_model_len=8192, gpu_memory_utilization=0.6
    )
    assert low.verdict.confidence == "certain"
    assert low.kv_cache.tokens_low is not None
    assert low.kv_cache.tokens_low < low.kv_cache.tokens


def test_two_error_bars_that_only_together_break_the_verdict_are_both_named() -> None:
    """A large FP8 MoE on two GB10s with a margin above each error bar alone and below the
    two together: both named, "together"; the KV tokens at the low end charge both."""
    req = {"tensor_parallel_size": 2, "quantization": "fp8", "engine_version": "0.33"}
    probe = gpu_plan(MOE_145B, "GB10", 2, gpu_memory_utilization=0.82, max_model_len=4096, **req)
    requested = 0.82 * probe.per_gpu.total_bytes
    taken = conf.UNIFIED_HELD_SHARE * requested
    margin = taken + conf.LARGE_MOE_RESIDUAL_BYTES / 2
    need = probe.per_gpu.kv_cache_bytes - margin
    assert need > 0
    plan = gpu_plan(
        MOE_145B,
        "GB10",
        2,
        gpu_memory_utilization=0.82,
        max_model_len=_len_for(probe, need),
        **req,
    )
    assert plan.verdict.fits
    assert _labels(plan) == ("model class", "unified memory")
    assert all(
        "with the 2 together: kv_cache_insufficient" in w for w in plan.verdict.uncertain_because
    )
    assert plan.kv_cache.tokens_low == 0 or plan.kv_cache.tokens_low < plan.kv_cache.tokens


def test_a_discrete_gpu_has_no_unified_doubt() -> None:
    """The same request on a discrete GPU of about the same size: no such doubt."""
    plan = gpu_plan(DENSE, "H200", engine_version="0.33", max_model_len=8192)
    assert "unified memory" not in _labels(plan)


# (d) margins within the plan's measured error


def test_a_kv_margin_within_the_kv_error_is_uncertain_either_way() -> None:
    """A request needing 95 % of the pool fits, 105 % does not: both uncertain; 50 % is
    certain."""
    req = {"engine_version": "0.33"}
    probe = gpu_plan(DENSE, "H100", max_model_len=4096, **req)
    pool = probe.per_gpu.kv_cache_bytes
    near = gpu_plan(DENSE, "H100", max_model_len=_len_for(probe, 0.95 * pool), **req)
    over = gpu_plan(DENSE, "H100", max_model_len=_len_for(probe, 1.05 * pool), **req)
    far = gpu_plan(DENSE, "H100", max_model_len=_len_for(probe, 0.5 * pool), **req)
    assert near.verdict.fits
    assert _labels(near) == ("KV margin",)
    assert not over.verdict.fits
    assert _labels(over) == ("KV margin",)
    assert str(over.verdict.failure_class) == "kv_cache_insufficient"
    assert "below what one" in over.verdict.uncertain_because[0]
    assert far.verdict.confidence == "certain"


def test_headroom_within_the_graph_pools_error_is_uncertain_before_0_21() -> None:
    """Graphs captured outside the budget (0.20): a headroom at the sampler warmup of a
    quarter of the graph pool, either side of zero, is in doubt; twice the pool is not."""
    req = {"engine_version": "0.20", "max_model_len": 4096}
    probe = gpu_plan(DENSE, "H100", gpu_memory_utilization=0.9, **req)
    g, total = probe.per_gpu, probe.per_gpu.total_bytes
    assert g.cuda_graph_bytes > 0

    def at(headroom: float) -> Plan:
        util = 0.9 + (g.headroom_bytes - headroom) / total
        return gpu_plan(DENSE, "H100", gpu_memory_utilization=round(util, 6), **req)

    above, below = at(0.25 * g.cuda_graph_bytes), at(-0.25 * g.cuda_graph_bytes)
    assert above.verdict.fits
    assert "warmup margin" in _labels(above)
    assert not below.verdict.fits
    assert str(below.verdict.phase) == "warmup"
    assert "warmup margin" in _labels(below)
    assert "warmup margin" not in _labels(at(2.0 * g.cuda_graph_bytes))


def test_graphs_inside_the_budget_have_no_graph_doubt() -> None:
    """From 0.21 the graph pool is charged to the KV budget: its error is the KV error's."""
    plan = gpu_plan(DENSE, "H100", engine_version="0.33", max_model_len=4096)
    assert not {"warmup margin", "capture margin"} & set(_labels(plan))


# the CLI: JSON, the verdict line, the exit code


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(
        ["plan", *argv], Context(stdout=out, stderr=io.StringIO(), environ={"NO_COLOR": "1"})
    )
    return code, out.getvalue()


def test_an_uncertain_fit_exits_0_and_says_why(tmp_path: Path) -> None:
    """JSON carries confidence and uncertain_because; the text's verdict line says
    FITS (uncertain: ...) and a line per reason; the exit code is the nominal verdict's."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps(DENSE))
    argv = (str(config), "--gpu", "GB10", "--engine-version", "0.33", "--max-model-len", "8192")
    code, out = _cli(*argv, "--json")
    verdict = json.loads(out)["verdict"]
    assert code == 0
    assert verdict["fits"] is True
    assert verdict["confidence"] == "uncertain"
    assert len(verdict["uncertain_because"]) == 1
    code, text = _cli(*argv)
    assert code == 0
    assert "verdict: FITS (uncertain: unified memory) - " in text
    assert "  uncertain: GB10's memory is shared with the CPU" in text


def test_an_uncertain_failure_exits_1(tmp_path: Path) -> None:
    """A request just over the KV pool: does not fit, uncertain, exit 1."""
    probe = gpu_plan(DENSE, "H100", engine_version="0.33", max_model_len=4096)
    length = _len_for(probe, 1.05 * probe.per_gpu.kv_cache_bytes)
    config = tmp_path / "config.json"
    config.write_text(json.dumps(DENSE))
    argv = [str(config), "--gpu", "H100", "--engine-version", "0.33"]
    code, out = _cli(*argv, "--max-model-len", str(length), "--json")
    verdict = json.loads(out)["verdict"]
    assert code == 1
    assert (verdict["fits"], verdict["confidence"]) == (False, "uncertain")
    code, text = _cli(*argv, "--max-model-len", str(length))
    assert code == 1
    assert "verdict: DOES NOT FIT (uncertain: KV margin) - " in text


def test_compare_marks_an_uncertain_setup() -> None:
    """In --compare, the fits cell of an uncertain setup says so; a certain one does not."""
    code, text = _cli(
        "Llama-3.1-8B",
        "--max-model-len",
        "8192",
        "--gpu",
        "GB10",
        "--engine-version",
        "0.33",
        "--compare",
        "Llama-3.1-8B",
        "--max-model-len",
        "8192",
        "--gpu-memory-utilization",
        "0.5",
    )
    fits = next(line for line in text.splitlines() if "│ fits" in line)
    assert code == 0
    assert fits.count("yes (uncertain)") == 1
    assert fits.count("yes") == 2
