"""How many batch sizes vLLM captures CUDA graphs for, per version (``vllm_graphs.capture_sizes``):
the rules of vLLM's code, with the counts its startups print."""

from __future__ import annotations

import pytest

from bringup.core.plan import parse_architecture
from bringup.core.plan.peaks import capture_ceiling, cuda_graph_bytes
from bringup.core.plan.settings import Requested, resolve
from bringup.core.vllm_graphs import capture_sizes
from plan.helpers import bundled_config


@pytest.mark.parametrize(
    ("seqs", "version", "v0", "expected"),
    [
        (16, (0, 7), True, 5),  # V0: 1, 2, 4, 8, 16 (up to max_num_seqs)
        (64, (0, 8), True, 11),
        (256, (0, 7), True, 35),  # V0's list ends at 256
        (1, (0, 8), False, 67),  # V1 before 0.10: to 512 whatever max_num_seqs
        (32, (0, 9), False, 67),
        (1, (0, 10), False, 3),  # 0.10-0.11: min(2 x max_num_seqs, 512), 1, 2, 4 always
        (128, (0, 11), False, 35),  # steps of 8 to 256
        (256, (0, 11), False, 67),  # steps of 8 to 512
        (256, (0, 13), False, 51),  # from 0.12: steps of 16 from 256
        (64, (0, 22), False, 19),
        (16, (0, 26), False, 7),
        (1, (0, 33), False, 2),  # 1, 2
    ],
)
def test_capture_sizes_per_version(seqs: int, version: tuple[int, int], v0: bool, expected: int):
    assert capture_sizes(seqs, version, v0_engine=v0) == expected


def test_capture_sizes_are_cut_at_the_batched_tokens():
    assert capture_sizes(256, (0, 33), max_num_batched_tokens=128) == 3 + 16  # 1, 2, 4, 8..128
    assert capture_sizes(1, (0, 8), max_num_batched_tokens=64) == 3 + 8


def test_gpt_oss_captures_to_1024_from_0_10():
    """vLLM's gpt-oss config raises the largest size to 1024: 83 sizes at any max_num_seqs."""
    arch = parse_architecture(bundled_config("gpt-oss-120b"))
    assert capture_ceiling(arch) == 1024
    assert capture_sizes(256, (0, 13), ceiling=1024) == 83
    assert capture_sizes(16, (0, 10), ceiling=1024) == 83
    assert capture_sizes(256, (0, 8), ceiling=1024) == 67  # before 0.10: the V1 list
    dense = parse_architecture(bundled_config("Llama-3.1-8B"))
    assert capture_ceiling(dense) is None


def test_the_pool_follows_the_count():
    """More captured sizes, a larger pool (the per-size cost is one fixed number)."""
    arch = parse_architecture(bundled_config("Llama-3.1-8B"))
    at = {
        v: cuda_graph_bytes(arch, 32, 256, enforce_eager=False, version=v)
        for v in ((0, 9), (0, 11), (0, 13))
    }
    assert at[(0, 9)] == at[(0, 11)] > at[(0, 13)]  # 67, 67, 51 sizes
    assert cuda_graph_bytes(arch, 32, 256, enforce_eager=True, version=(0, 13)) == 0


def test_vllm_0_7_runs_v1_when_asked():
    """0.7 ran the V1 engine on VLLM_USE_V1=1; without it, V0."""
    kw = {"memory_bytes": 80 << 30, "treats_as_a100": False, "max_position_embeddings": 32768}
    kw["default_quantization"] = None
    assert resolve(Requested(engine_version="0.7"), **kw).v0_engine
    assert not resolve(Requested(engine_version="0.7", use_v1=True), **kw).v0_engine
