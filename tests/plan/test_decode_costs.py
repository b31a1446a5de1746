"""The fixed costs of a batch-1 decode step (core/plan/decode_costs.py) and the ceiling's bound."""

from __future__ import annotations

import dataclasses

import pytest

from bringup.core.plan import decode, decode_costs

GPU = decode.Processor("GPU", "gpu", 2e12)
NVLINK = decode.Link("nvlink", 450e9)
BASE = decode.Workload(
    weight_bytes_per_stage=(2_000_000_000,),
    kv_bytes_per_stage=(0,),
    num_layers=40,
    arch_class="moe",
    allreduces=82,
    payload_bytes=8192,
    tensor_parallel=4,
)


def test_a_layer_costs_its_kernels_at_the_graph_or_eager_time() -> None:
    graph = decode_costs.per_layer_seconds("dense", graphs=True)
    eager = decode_costs.per_layer_seconds("dense", graphs=False)
    assert graph == pytest.approx(11 * 3.4e-6)
    assert eager == pytest.approx(11 * 34e-6)
    assert decode_costs.per_layer_seconds("moe", graphs=True, shared_experts=True) == (
        pytest.approx(19 * 3.4e-6)
    )


def test_int4_experts_cost_their_kernels_like_any_other_experts_in_a_graph() -> None:
    """FlagGems' 0.13 ms per Marlin MoE call is host-launched time, not a cost inside a graph."""
    plain = decode_costs.per_layer_seconds("mla", graphs=True)
    assert decode_costs.per_layer_seconds("mla", graphs=True, weight_format="int4") == plain
    assert decode_costs.per_layer_seconds("dense", graphs=True, weight_format="awq") == (
        pytest.approx(11 * 3.4e-6)
    )


def test_quantized_activations_add_one_kernel_per_quantized_gemm() -> None:
    bf16 = decode_costs.kernels_per_layer("moe")
    assert decode_costs.kernels_per_layer("moe", weight_format="fp8") == bf16 + 4
    assert decode_costs.kernels_per_layer("moe", weight_format="nvfp4", shared_experts=True) == (
        bf16 + 3 + 4 + 2
    )
    assert decode_costs.kernels_per_layer("mla", weight_format="fp8") == 26 + 7
    # W4A16 and BF16 do not quantize their activations
    assert decode_costs.kernels_per_layer("mla", weight_format="int4") == 26
    assert decode_costs.kernels_per_layer("dense", weight_format="awq") == 11


def test_per_head_qk_norms_are_counted_for_the_families_that_have_them() -> None:
    assert decode_costs.kernels_per_layer("moe", model_type="qwen3_moe") == 18
    assert decode_costs.kernels_per_layer("dense", model_type="qwen3") == 13
    assert decode_costs.kernels_per_layer("dense", model_type="llama") == 11


def test_eager_mode_is_slower_than_graphs_and_the_ceiling_does_not_move() -> None:
    graphs = decode.predict(BASE, GPU, NVLINK)
    eager = decode.predict(dataclasses.replace(BASE, graphs=False), GPU, NVLINK)
    assert eager.expected_tokens_per_s < graphs.expected_tokens_per_s
    assert eager.ceiling_tokens_per_s == graphs.ceiling_tokens_per_s


def test_the_ceiling_is_bytes_over_peak_bandwidth_and_above_expected() -> None:
    d = decode.predict(BASE, GPU, NVLINK)
    assert d.ceiling_tokens_per_s == pytest.approx(2e12 / 2_000_000_000, rel=1e-3)
    assert d.expected_tokens_per_s < d.ceiling_tokens_per_s


def test_expert_parallel_ceiling_counts_the_fewest_experts_the_busiest_gpu_can_hold() -> None:
    """The expected busiest GPU (3.49 of 8 experts over 4) is slower than ceil(8 / 4) = 2."""
    w = dataclasses.replace(BASE, ceiling_weight_bytes_per_stage=(1_000_000_000,))
    d = decode.predict(w, GPU, NVLINK)
    assert d.ceiling_tokens_per_s == pytest.approx(2e12 / 1_000_000_000, rel=1e-3)


def test_int4_weights_stream_at_marlins_share_of_the_bandwidth() -> None:
    dense = dataclasses.replace(BASE, arch_class="dense", allreduces=0, tensor_parallel=1)
    bf16 = decode.predict(dense, GPU, None)
    int4 = decode.predict(dataclasses.replace(dense, weight_format="int4"), GPU, None)
    fixed = 40 * decode_costs.per_layer_seconds("dense", graphs=True)
    assert 1 / int4.expected_tokens_per_s - fixed == pytest.approx(
        (1 / bf16.expected_tokens_per_s - fixed) / 0.97, rel=1e-3
    )


def test_pcie_latency_grows_with_the_tp_size_by_ncclS_ring_step_and_nvlink_does_not() -> None:
    pcie = decode.Link("pcie", 64e9)
    assert pcie.latency_at(4) == pytest.approx(20e-6)  # measured at 4 ranks
    assert pcie.latency_at(8) == pytest.approx(28e-6)
    assert pcie.latency_at(2) == pytest.approx(16e-6)
    assert decode.Link("pcie-numa", 64e9).latency_at(8) == pytest.approx(55e-6)
    assert decode.Link("nvlink", 450e9).latency_at(8) == NVLINK.latency_at(2) == 8e-6
    tp8 = dataclasses.replace(BASE, tensor_parallel=8)
    assert decode.predict(tp8, GPU, pcie).collective_latency_seconds == pytest.approx(28e-6)


def test_nemotron_h_blocks_launch_their_own_kernels_and_one_all_reduce_each() -> None:
    """A Nemotron-H layer is one block (a Mamba-2 mixer, attention, an MLP or the experts): it
    launches that block's kernels and, under TP, one all-reduce, not a decoder layer's two."""
    from plan.helpers import planner_for
    from plan.test_families import NEMOTRON_H

    planner, s = planner_for(NEMOTRON_H, "H100", 2, tensor_parallel_size=2)
    w = decode.workload_for(planner.arch, planner.tensors, s, decode.DecodeSetup())
    assert w.blocks == ("mamba", "mlp", "mamba", "attention", "mlp", "moe", "mlp")
    assert w.allreduces == 7 + 2  # one per block, + the vocabulary embedding and logits
    # mamba 6 x 2, mlp 4 x 3, attention 6, moe 8 + its shared expert's 3
    assert decode_costs.block_kernels(w.blocks, shared_experts=True) == 12 + 12 + 6 + 11
    speed = decode.predict(w, GPU, NVLINK)
    assert speed.per_layer_seconds * 7 == pytest.approx(41 * decode_costs.GRAPH_KERNEL_SECONDS)
    # quantized activations: one more kernel per quantized GEMM of each block
    assert decode_costs.block_kernels(("mamba", "mlp"), weight_format="fp8") == 6 + 2 + 4 + 2


def test_only_attention_blocks_add_decode_context_parallel_collectives() -> None:
    """-dcp adds two collectives per attention layer: Nemotron-H has one, not seven."""
    from plan.helpers import planner_for
    from plan.test_families import NEMOTRON_H

    planner, s = planner_for(NEMOTRON_H, "H100", 2, tensor_parallel_size=2)
    plain = decode.workload_for(planner.arch, planner.tensors, s, decode.DecodeSetup())
    dcp = decode.workload_for(
        planner.arch, planner.tensors, s, decode.DecodeSetup(decode_context_parallel_size=2)
    )
    assert dcp.allreduces - plain.allreduces == 2


def test_an_eager_collective_costs_at_least_one_eager_operator() -> None:
    """Under --enforce-eager a small all-reduce is one more operator Python dispatches."""
    graph = decode.predict(BASE, GPU, NVLINK)
    eager = decode.predict(dataclasses.replace(BASE, graphs=False), GPU, NVLINK)
    assert graph.collective_latency_seconds == pytest.approx(8e-6)
    assert eager.collective_latency_seconds == pytest.approx(decode_costs.EAGER_KERNEL_SECONDS)
    # a link slower than the dispatch keeps its own latency
    assert decode_costs.collective_seconds(55e-6, graphs=False) == 55e-6
    fixed = BASE.num_layers * (eager.per_layer_seconds - graph.per_layer_seconds)
    extra = 82 * (decode_costs.EAGER_KERNEL_SECONDS - 8e-6)
    assert 1 / eager.expected_tokens_per_s - 1 / graph.expected_tokens_per_s == pytest.approx(
        fixed + extra, rel=1e-3
    )
