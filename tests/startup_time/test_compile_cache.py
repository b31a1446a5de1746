"""Finding this model's graphs in vLLM's compile cache (the layout vLLM writes)."""

from __future__ import annotations

from pathlib import Path

from bringup.adapters.compile_cache import cache_root, find
from bringup.core.startup_time import CompileCache

GRAPH = (
    "class GraphModule(torch.nn.Module):\n"
    '    def forward(self, L_input_ids_: "i64[s0]", '
    'L_self_modules_embed_tokens_parameters_weight_: "f32[512, 64]", '
    'L_self_modules_layers_modules_0_input_layernorm_parameters_weight_: "f32[64]", '
    'L_self_modules_layers_modules_1_input_layernorm_parameters_weight_: "f32[64]"):\n'
)


def _entry(root: Path, digest: str, graph: str | None) -> Path:
    entry = root / "torch_compile_cache" / digest / "rank_0_0" / "backbone"
    entry.mkdir(parents=True)
    (entry / "vllm_compile_cache.py").write_text("{}\n")
    if graph is not None:
        (entry / "computation_graph.py").write_text(graph)
    return entry


def test_root_follows_vllm_envs(tmp_path: Path) -> None:
    assert cache_root({"VLLM_CACHE_ROOT": str(tmp_path)}) == tmp_path
    assert cache_root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "vllm"
    assert cache_root({"HOME": str(tmp_path)}) == tmp_path / ".cache" / "vllm"


def test_empty_cache_is_cold(tmp_path: Path) -> None:
    state, why = find({"VLLM_CACHE_ROOT": str(tmp_path)}, hidden_size=64, layers=2)
    assert state is CompileCache.COLD
    assert why == "vLLM's compile cache holds no graph of this model's shape"


def test_this_models_shape_is_warm_another_is_cold(tmp_path: Path) -> None:
    env = {"VLLM_CACHE_ROOT": str(tmp_path)}
    _entry(tmp_path, "0123456789", GRAPH)
    assert find(env, hidden_size=64, layers=2)[0] is CompileCache.WARM
    assert find(env, hidden_size=64, layers=3)[0] is CompileCache.COLD  # a layer more
    assert find(env, hidden_size=64, layers=1)[0] is CompileCache.COLD  # a layer fewer
    assert find(env, hidden_size=128, layers=2)[0] is CompileCache.COLD


def test_unreadable_graph_is_unknown_and_disabled_cache_is_cold(tmp_path: Path) -> None:
    env = {"VLLM_CACHE_ROOT": str(tmp_path)}
    _entry(tmp_path, "abcdefabcd", None)
    assert find(env, hidden_size=64, layers=2)[0] is CompileCache.UNKNOWN
    _entry(tmp_path, "0123456789", GRAPH)
    off = find({**env, "VLLM_DISABLE_COMPILE_CACHE": "1"}, hidden_size=64, layers=2)
    assert off == (CompileCache.COLD, "VLLM_DISABLE_COMPILE_CACHE is set")


def test_aot_artifacts_are_unknown_never_warm(tmp_path: Path) -> None:
    """vLLM's AOT layout (torch_aot_compile/<sha256>/rank_0_0/model) prints no graph: an
    artifact there may be this model's or another's. A hash folder without rank 0's
    artifact (a compile that did not finish) is nothing."""
    env = {"VLLM_CACHE_ROOT": str(tmp_path)}
    base = tmp_path / "torch_compile_cache" / "torch_aot_compile"
    (base / ("a" * 64) / "inductor_cache").mkdir(parents=True)
    assert find(env, hidden_size=64, layers=2)[0] is CompileCache.COLD
    rank = base / ("b" * 64) / "rank_0_0"
    rank.mkdir(parents=True)
    (rank / "model").write_bytes(b"\x80\x04")
    state, why = find(env, hidden_size=64, layers=2)
    assert state is CompileCache.UNKNOWN
    assert why.startswith("1 AOT-compiled entry under ")
    # with AOT compile off vLLM reads no torch_aot_compile/ entry: cold again
    off = find({**env, "VLLM_USE_AOT_COMPILE": "0"}, hidden_size=64, layers=2)
    assert off[0] is CompileCache.COLD
    _entry(tmp_path, "0123456789", GRAPH)  # a readable graph of this shape still says warm
    assert find(env, hidden_size=64, layers=2)[0] is CompileCache.WARM
