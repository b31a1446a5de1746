"""Batch-1 decode speed: what a GPU reads per token, the collectives, ceiling and expected."""

from __future__ import annotations

import doctest
import io
import itertools
import json
from collections import Counter
from typing import Any

import pytest

from bringup.cli.main import Context, main
from bringup.core import gpu_catalog
from bringup.core.checkpoint import TensorInfo
from bringup.core.plan import decode, weights
from bringup.core.plan.arch import parse_architecture
from bringup.core.plan.decode import DecodeSetup, Link, Processor, Workload, predict
from bringup.errors import UsageError
from plan.helpers import DECODE_KEYS, bundled_config, planner_for

H100 = Processor("H100", "gpu", 3.35e12)


def _workload(name: str, gpu: str = "H100", count: int = 1, **req: Any) -> Workload:
    setup = req.pop("setup", DecodeSetup())
    planner, s = planner_for(bundled_config(name), gpu, count, **req)
    return decode.workload_for(planner.arch, planner.tensors, s, setup)


def _speed(name: str, gpu: str, count: int, interconnect: str | None = None, **req: Any):  # type: ignore[no-untyped-def]
    model = gpu_catalog.lookup(gpu)
    w = _workload(name, gpu, count, tensor_parallel_size=count, **req)
    return predict(w, decode.gpu_processor(model), decode.gpu_link(model, interconnect))


def _t(name: str, shape: tuple[int, ...], dtype: str = "BF16") -> TensorInfo:
    size = {"BF16": 2, "F32": 4, "F8_E4M3": 1}[dtype]
    n = 1
    for d in shape:
        n *= d
    return TensorInfo(name, dtype, shape, n * size, "model.safetensors")


def test_one_gpu_reads_every_weight_but_the_input_embedding() -> None:
    """Dense, one GPU: the ceiling is bandwidth over the tensors a token reads; the embedding
    lookup reads one row, so an untied embedding matrix is not counted."""
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "num_hidden_layers": 1,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "intermediate_size": 128,
        "vocab_size": 1024,
    }
    tensors = [
        _t("model.embed_tokens.weight", (1024, 64)),
        _t("lm_head.weight", (1024, 64)),
        _t("model.layers.0.self_attn.q_proj.weight", (64, 64)),
        _t("model.layers.0.mlp.down_proj.weight", (64, 128)),
        _t("model.norm.weight", (64,)),
    ]
    arch = parse_architecture(cfg)
    w = decode.vllm_workload(
        arch,
        tensors,
        tensor_parallel=1,
        pipeline_parallel=1,
        expert_parallel=False,
        kv_cache_dtype="auto",
        setup=DecodeSetup(),
    )
    read = (1024 * 64 + 64 * 64 + 64 * 128 + 64) * 2
    assert w.weight_bytes_per_stage == (read,)
    speed = predict(w, H100, None)
    assert speed.ceiling_tokens_per_s == pytest.approx(3.35e12 / read, rel=1e-3)
    assert speed.collectives_per_token == 0
    assert speed.collective_latency_seconds == 0.0
    # tied embeddings: no lm_head tensor, the embedding matrix is read as the head
    tied = decode.vllm_workload(
        parse_architecture({**cfg, "tie_word_embeddings": True}),
        [t for t in tensors if "lm_head" not in t.name],
        tensor_parallel=1,
        pipeline_parallel=1,
        expert_parallel=False,
        kv_cache_dtype="auto",
        setup=DecodeSetup(),
    )
    assert tied.weight_bytes_per_stage == (read,)


def test_tensor_parallel_adds_two_allreduces_per_layer_and_two_for_the_vocabulary() -> None:
    """Llama-3.1-70B at tp 4: 2 x 80 + 2 collectives, each at the link's latency."""
    speed = _speed("Llama-3.1-70B", "H100", 4)
    assert speed.collectives_per_token == 162
    assert speed.collective_latency_seconds == decode.COLLECTIVE_LATENCY_SECONDS["nvlink"]
    one = _speed("Llama-3.1-70B", "H100", 1)
    assert speed.bytes_per_token_per_gpu < one.bytes_per_token_per_gpu / 3.9  # a quarter, +norms
    # the ceiling is a bound: bytes over the peak bandwidth, nothing else
    assert speed.ceiling_tokens_per_s == pytest.approx(
        3.35e12 / speed.bytes_per_token_per_gpu, rel=1e-3
    )
    # "expected" pays the collectives: 162 at the link's latency plus their payload
    payload = 8192 * 2 * 2 * 3 / 4 / 450e9
    bare = speed.bytes_per_token_per_gpu / (3.35e12 * speed.bandwidth_efficiency)
    fixed = 80 * speed.per_layer_seconds
    assert speed.expected_tokens_per_s == pytest.approx(
        1 / (bare + fixed + 162 * (8e-6 + payload)), rel=1e-3
    )


def test_the_interconnect_orders_the_same_setup() -> None:
    """nvlink > pcie > pcie-numa for the same model and GPUs; pcie-numa is what --interconnect sets."""
    speeds = [
        _speed("Llama-3.1-70B", "RTX PRO 6000", 4, k) for k in ("nvlink", "pcie", "pcie-numa")
    ]
    rates = [s.expected_tokens_per_s for s in speeds]
    assert rates[0] > rates[1] > rates[2]
    assert len({s.ceiling_tokens_per_s for s in speeds}) == 1  # the bound has no link term
    assert _speed("Llama-3.1-70B", "RTX PRO 6000", 4).collective_latency_seconds == 20e-6


def test_moe_reads_the_top_k_experts_only() -> None:
    """Qwen3-30B-A3B (128 experts, top 8): far fewer bytes per token than its weights."""
    planner, _ = planner_for(bundled_config("Qwen3-30B-A3B"), "H100", 1)
    total = sum(t.nbytes for t in planner.tensors)
    w = _workload("Qwen3-30B-A3B")
    assert w.arch_class == "moe"
    assert w.weight_bytes_per_stage[0] < total / 4  # about 3B of 30B parameters are active
    experts = sum(t.nbytes for t in planner.tensors if ".experts." in t.name)
    dense = sum(
        t.nbytes
        for t in planner.tensors
        if ".experts." not in t.name and "embed_tokens" not in t.name
    )
    assert w.weight_bytes_per_stage[0] == pytest.approx(dense + experts * 8 / 128, rel=1e-6)


def test_expert_parallel_turns_the_moe_allreduce_into_two_all_to_alls() -> None:
    """Each MoE layer: one attention all-reduce plus dispatch and combine."""
    tp = _workload("Qwen3-30B-A3B", "H100", 4, tensor_parallel_size=4)
    ep = _workload("Qwen3-30B-A3B", "H100", 4, tensor_parallel_size=4, enable_expert_parallel=True)
    layers = 48
    assert tp.allreduces == 2 * layers + 2
    assert tp.all_to_alls == 0
    assert ep.allreduces == layers + 2
    assert ep.all_to_alls == 2 * layers
    assert ep.weight_bytes_per_stage[0] > tp.weight_bytes_per_stage[0]  # the busiest GPU


def test_experts_are_placed_as_vllm_places_them() -> None:
    """vLLM's determine_expert_map: E // EP each, the first E % EP ranks one more."""
    assert decode.expert_counts(128, 4) == (32, 32, 32, 32)
    assert decode.expert_counts(10, 4) == (3, 3, 2, 2)
    assert decode.expert_counts(3, 4) == (1, 1, 1, 0)


@pytest.mark.parametrize(("experts", "k", "ranks"), [(10, 4, 4), (8, 3, 3), (12, 2, 5), (6, 6, 4)])
def test_the_busiest_gpu_count_is_the_mean_over_every_draw(
    experts: int, k: int, ranks: int
) -> None:
    """Against brute force: every k-subset of the experts, the most on one rank, averaged."""
    owner = [r for r, n in enumerate(decode.expert_counts(experts, ranks)) for _ in range(n)]
    draws = list(itertools.combinations(range(experts), k))
    mean = sum(max(Counter(owner[e] for e in d).values()) for d in draws) / len(draws)
    assert decode.busiest_experts(experts, k, ranks) == pytest.approx(mean, rel=1e-12)


def test_the_busiest_gpu_holds_more_than_the_mean_and_no_more_than_k() -> None:
    for experts, k, ranks in [(128, 8, 4), (256, 8, 8), (384, 8, 8), (160, 6, 8), (256, 8, 64)]:
        busiest = decode.busiest_experts(experts, k, ranks)
        assert max(k / ranks, 1.0) < busiest <= k
    assert decode.busiest_experts(8, 2, 8) == 1.0  # one expert per GPU: never two on one
    assert decode.busiest_experts(64, 6, 1) == 6.0


def test_expert_parallel_reads_the_busiest_gpus_experts() -> None:
    """Qwen3-30B-A3B under EP 4: the step waits for the GPU holding most of the token's 8 experts."""
    planner, _ = planner_for(bundled_config("Qwen3-30B-A3B"), "H100", 4, tensor_parallel_size=4)
    ep = _workload("Qwen3-30B-A3B", "H100", 4, tensor_parallel_size=4, enable_expert_parallel=True)
    par = weights.Parallel(4, 1, True)
    (stage,) = weights.weights_per_stage(decode._read_tensors(planner.tensors), planner.arch, par)
    others = stage.vocab_bytes + stage.sharded_bytes + stage.replicated_bytes
    busiest = decode.busiest_experts(128, 8, 4)  # 3.49 of the 32 experts a GPU holds
    assert ep.weight_bytes_per_stage[0] == pytest.approx(
        others + stage.expert_bytes * busiest / 32, rel=1e-6
    )
    uniform = others + stage.expert_bytes * 2 / 32  # k / EP: the mean, which no step waits for
    assert ep.weight_bytes_per_stage[0] > uniform * 1.2


def test_the_module_examples_hold() -> None:
    failed, _ = doctest.testmod(decode, optionflags=doctest.ELLIPSIS)
    assert failed == 0


def test_mla_down_projections_are_read_in_full_on_every_gpu() -> None:
    """DeepSeek-V3 at tp 8 reads more than an eighth of its tp-1 bytes: q_a/kv_a are replicated."""
    one = _workload("DeepSeek-V3", "H200", 1)
    eight = _workload("DeepSeek-V3", "H200", 8, tensor_parallel_size=8)
    assert one.arch_class == "mla"
    assert eight.weight_bytes_per_stage[0] > one.weight_bytes_per_stage[0] / 8 * 1.1


def test_the_kv_cache_at_the_context_is_read_and_dcp_shards_it() -> None:
    """--context-tokens adds bytes per token x context; -dcp divides them and adds collectives."""
    base = _workload("DeepSeek-V3", "H200", 8, tensor_parallel_size=8)
    ctx = _workload(
        "DeepSeek-V3", "H200", 8, tensor_parallel_size=8, setup=DecodeSetup(None, 1, 100_000)
    )
    dcp = _workload(
        "DeepSeek-V3", "H200", 8, tensor_parallel_size=8, setup=DecodeSetup(None, 8, 100_000)
    )
    per_token = (512 + 64) * 2 * 61  # the latent, every layer, the same on every GPU
    assert base.kv_bytes_per_stage == (0,)
    assert ctx.kv_bytes_per_stage == (per_token * 100_000,)
    assert dcp.kv_bytes_per_stage == (per_token * 100_000 // 8,)
    assert dcp.allreduces == ctx.allreduces + 2 * 61
    with pytest.raises(UsageError, match="must divide"):
        decode.check_setup(DecodeSetup(None, 3, 0), 8)


def test_what_bounds_the_speed() -> None:
    """Weights on one GPU; collectives for a big MLA MoE over PCIe across sockets; the KV cache
    for a small model at a very long context."""
    assert _speed("Llama-3.1-8B", "H100", 1).bound_by == "weights"
    kimi = _speed("Kimi-K2", "RTX PRO 6000", 8, "pcie-numa", quantization="nvfp4")
    assert kimi.bound_by == "collectives"
    model = gpu_catalog.lookup("H100")
    long = _workload("Llama-3.1-8B", setup=DecodeSetup(None, 1, 400_000))
    assert predict(long, decode.gpu_processor(model), None).bound_by == "kv_cache"


def test_one_device_is_never_bound_by_collectives() -> None:
    """A tiny model on one GPU waits for its layers' kernels, not for collectives (none):
    issue 29's 'bound by collectives' on a one-device plan."""
    tiny = Workload(
        weight_bytes_per_stage=(50_000_000,),
        kv_bytes_per_stage=(0,),
        num_layers=24,
        arch_class="dense",
        allreduces=0,
        payload_bytes=2048,
        tensor_parallel=1,
    )
    speed = predict(tiny, decode.gpu_processor(gpu_catalog.lookup("H100")), None)
    assert speed.collectives_per_token == 0
    assert speed.bound_by == "per_layer_latency"
    assert "bound by per-layer latency (" in speed.expected_line()
    assert "collectives" not in speed.expected_line()


@pytest.mark.parametrize("name", ["Llama-3.1-8B", "Qwen3-30B-A3B", "DeepSeek-V3", "gpt-oss-120b"])
def test_expected_is_below_the_ceiling(name: str) -> None:
    """The expected speed derates the ceiling; it never exceeds it."""
    speed = _speed(name, "H200", 8)
    assert 0 < speed.expected_tokens_per_s < speed.ceiling_tokens_per_s


def test_cpu_costs_apply_on_a_cpu() -> None:
    """A CPU processor uses the CPU efficiency and per-layer cost, and no link."""
    w = Workload((1_000_000_000,), (0,), 16, "dense", 0, 4096, 1)
    cpu = predict(w, Processor("CPU", "cpu", 10e9, "given"), None)
    assert cpu.ceiling_tokens_per_s == pytest.approx(10.0)
    seconds = 1e9 / (10e9 * decode.CPU_CLASSES["dense"].bandwidth_efficiency) + 16 * 50e-6
    assert cpu.expected_tokens_per_s == pytest.approx(1 / seconds, rel=1e-3)
    assert "per CPU per token" in cpu.ceiling_line()


def test_the_link_latency_comes_from_its_kind() -> None:
    """Unknown kinds fall back to PCIe; a PCIe link of an NVLink GPU is its slot's bandwidth."""
    assert Link("nvlink", 1e9).latency_seconds == 8e-6
    assert Link("weird", 1e9).latency_seconds == 20e-6
    h100 = gpu_catalog.lookup("H100")
    assert decode.gpu_link(h100, "pcie").bandwidth_bytes_per_second == 64e9
    assert decode.gpu_link(h100, None).kind == "nvlink"


def _plan(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["plan", *argv], Context(stdout=out, stderr=err, environ={"NO_COLOR": "1"}))
    return code, out.getvalue(), err.getvalue()


def test_plan_prints_one_line_each_for_ceiling_and_expected() -> None:
    """Human output: the ceiling line and the expected line, with what bounds it."""
    code, out, _ = _plan("Llama-3.1-70B", "--gpu", "H100", "-tp", "4", "--context-tokens", "8192")
    assert code == 0
    ceiling = [line for line in out.splitlines() if line.startswith("decode ceiling:")]
    expected = [line for line in out.splitlines() if line.startswith("decode expected:")]
    assert len(ceiling) == 1
    assert "collectives" not in ceiling[0]  # the bound: bytes over bandwidth only
    assert len(expected) == 1
    assert "162 collectives x 8 us over NVLink" in expected[0]
    assert "bound by weights" in expected[0]


def test_plan_json_decode_follows_the_flags() -> None:
    """--interconnect, --context-tokens, -dcp and --memory-bandwidth reach the decode object."""
    code, out, _ = _plan(
        "DeepSeek-V3",
        "--gpu",
        "H200",
        "-tp",
        "8",
        "--interconnect",
        "pcie-numa",
        "--context-tokens",
        "10000",
        "--memory-bandwidth",
        "4TB/s",
        "--json",
        "--",
        "vllm",
        "serve",
        "deepseek-ai/DeepSeek-V3",
        "-dcp",
        "8",
    )
    d = json.loads(out)["decode"]
    assert code in (0, 1)
    assert d["collective_latency_seconds"] == pytest.approx(55e-6)
    assert d["collectives_per_token"] == 2 * 61 + 2 + 2 * 61
    assert d["bound_by"] == "collectives"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--interconnect", "carrier-pigeon"], "invalid choice"),
        (["-tp", "8", "-dcp", "3"], "must divide"),
        (["--memory-bandwidth", "fast"], "not a size"),
        (["--context-tokens", "-1"], "--context-tokens"),
    ],
)
def test_bad_decode_flags_are_one_line_exit_2(argv: list[str], needle: str) -> None:
    """Bad decode flags are refused with one line on stderr and exit 2."""
    code, _, err = _plan("Llama-3.1-8B", "--gpu", "H100", *argv)
    assert code == 2
    assert needle in err


def test_gguf_plan_decodes_on_the_cpu_with_the_given_bandwidth(tmp_path: Any) -> None:
    """A GGUF without --gpu decodes on this CPU: every tensor but the token embedding (the
    model has an output.weight), over the bandwidth given; with --gpu-memory alone, unknown."""
    from bringup.adapters.checkpoint import scan_checkpoint

    from builders.gguf import write_tiny_llama_gguf

    path = write_tiny_llama_gguf(tmp_path / "tiny.gguf")[0]
    tensors = scan_checkpoint(path).tensors
    read = sum(t.nbytes for t in tensors if t.name != "token_embd.weight")
    code, out, _ = _plan(str(path), "--memory-bandwidth", "10GB/s", "--json")
    d = json.loads(out)["decode"]
    assert code == 0
    assert d["bytes_per_token_per_gpu"] == read
    assert d["ceiling_tokens_per_s"] == pytest.approx(10e9 / read, rel=1e-3)
    assert d["collectives_per_token"] == 0
    code, out, _ = _plan(str(path), "--gpu-memory", "1GiB", "--json")
    assert json.loads(out)["decode"] is None
    code, out, _ = _plan(str(path), "--gpu", "L4", "--json")
    assert json.loads(out)["decode"]["ceiling_tokens_per_s"] == pytest.approx(
        300e9 / read, rel=1e-3
    )


def test_the_bandwidth_probe_reads_memory() -> None:
    """The read-bandwidth probe returns a positive rate (a small buffer: a functional check,
    not a measurement) and knows this machine's cores."""
    from bringup.adapters.membw import measure_read_bandwidth, usable_cores

    assert usable_cores() >= 1
    assert measure_read_bandwidth(buffer_bytes=8 * 1024 * 1024, passes=1, threads=2) > 0


@pytest.mark.parametrize(
    ("words", "threads"),
    [
        (["llama-server", "-m", "x.gguf", "-t", "3"], 3),
        (["python", "-m", "llama_cpp.server", "--n_threads", "2"], 2),
    ],
)
def test_llamacpp_threads_come_from_the_command(words: list[str], threads: int) -> None:
    """-t / --n_threads set the threads the CPU bandwidth is measured with."""
    from bringup.cli.commands.plan_gguf import llamacpp_threads

    assert llamacpp_threads(words) == threads


def test_the_ceiling_line_says_how_many_experts_the_busiest_gpu_reads() -> None:
    """Under EP the human line shows the expected experts on the busiest GPU; JSON keeps its keys."""
    argv = ["plan", "Qwen3-30B-A3B", "--gpu", "H100", "-tp", "4", "--enable-expert-parallel"]
    out, err = io.StringIO(), io.StringIO()
    assert main(argv, Context(stdout=out, stderr=err, environ={"NO_COLOR": "1"})) in (0, 1)
    expected = f"the busiest GPU holds {decode.busiest_experts(128, 8, 4):.2f} of the token's 8"
    assert expected in out.getvalue()
    out = io.StringIO()
    main([*argv, "--json"], Context(stdout=out, stderr=err, environ={}))
    assert set(json.loads(out.getvalue())["decode"]) == DECODE_KEYS


def test_minimax_m2_all_reduces_its_qk_norm_variance_once_per_layer_under_tp() -> None:
    """vLLM's MiniMax-M2 normalizes q and k over all heads: one more all-reduce per layer."""
    minimax = _workload("MiniMax-M2.5", "H100", 4, tensor_parallel_size=4)
    layers = minimax.num_layers
    assert minimax.allreduces == 2 * layers + 2 + layers
    assert minimax.model_type == "minimax_m2"
    single = _workload("MiniMax-M2.5", "H200", 1, tensor_parallel_size=1)
    assert single.allreduces == 0
    qwen = _workload("Qwen3-30B-A3B", "H100", 2, tensor_parallel_size=2)
    assert qwen.allreduces == 2 * qwen.num_layers + 2
