"""The startup prediction's arithmetic: phases present or absent, weights from the storage
and the page cache, compile cold and warm, capture from the graph count."""

from __future__ import annotations

import pytest

from bringup.core.startup_time import CompileCache, StartupSetup, Storage, predict
from bringup.core.startup_time import constants as c
from bringup.core.vocab import Phase

GB = 10**9


def _storage(cached: int = 0, total: int = 10 * GB, rate: float = 1e9) -> Storage:
    return Storage("local", "ext4", rate, 4e9, cached, total, 256 * 2**20)


def _setup(**kw: object) -> StartupSetup:
    base: dict[str, object] = {
        "weights_bytes_per_rank": 10 * GB,
        "checkpoint_bytes": 10 * GB,
        "world_size": 1,
        "storage": _storage(),
        "graphs": 51,
    }
    base.update(kw)
    return StartupSetup(**base)  # type: ignore[arg-type]


def test_phases_in_startup_order_and_total_is_their_sum() -> None:
    p = predict(_setup())
    phases = [e.phase for e in p.phases]
    assert phases == sorted(phases, key=lambda ph: ph.order)
    assert p.total_seconds == pytest.approx(sum(e.seconds for e in p.phases), abs=0.05)
    assert all(e.low <= e.seconds <= e.high for e in p.phases)


def test_cold_weights_read_at_the_storage_rate() -> None:
    w = predict(_setup()).phase(Phase.WEIGHTS_LOADING)
    assert w is not None
    assert w.seconds == pytest.approx(c.MODEL_INIT.seconds + 10.0, abs=0.01)
    assert "1.00 GB/s" in w.basis


def test_cached_bytes_read_at_the_page_cache_rate() -> None:
    cold = predict(_setup()).phase(Phase.WEIGHTS_LOADING)
    warm = predict(_setup(storage=_storage(cached=10 * GB))).phase(Phase.WEIGHTS_LOADING)
    assert cold is not None
    assert warm is not None
    assert warm.seconds == pytest.approx(c.MODEL_INIT.seconds + 2.5, abs=0.01)
    assert "100% already in the page cache" in warm.basis


def _filled(fill: float, refill: float | None) -> Storage:
    return Storage(
        "local",
        "ext4",
        1e9,
        4e9,
        0,
        10 * GB,
        256 * 2**20,
        fill_bytes_per_s=fill,
        refill_bytes_per_s=refill,
    )


def test_cpu_build_adds_the_first_touch_and_the_repacking() -> None:
    """On the CPU build the loader copies each tensor into fresh parameters (their first
    touch: 1/0.5 - 1/2 s per GB beyond the read) and the CPU GEMM repacks every weight into
    fresh memory (1/0.5 s per GB): 10 GB -> 15 s + 20 s on top of the 10 s read."""
    st = _filled(0.5e9, 2e9)
    cpu = predict(_setup(storage=st, device="cpu", graphs=0)).phase(Phase.WEIGHTS_LOADING)
    gpu = predict(_setup(storage=st)).phase(Phase.WEIGHTS_LOADING)
    assert cpu is not None
    assert gpu is not None
    assert gpu.seconds == pytest.approx(c.MODEL_INIT.seconds + 10.0, abs=0.01)
    assert cpu.seconds == pytest.approx(c.MODEL_INIT.seconds + 10.0 + 15.0 + 20.0, abs=0.01)
    assert cpu.low < cpu.seconds < cpu.high
    assert "copied twice into fresh memory" in cpu.basis
    assert cpu.tail_seconds == pytest.approx(20.0)  # the repack, after the last shard
    assert gpu.tail_seconds == 0.0
    assert "copied twice" not in gpu.basis


def test_first_touch_without_a_faster_refill_is_the_whole_fresh_copy() -> None:
    """A refill no faster than the fill (or none) says nothing about the first touch alone:
    the whole fresh copy counts."""
    for refill in (None, 0.4e9):
        st = _filled(0.5e9, refill)
        w = predict(_setup(storage=st, device="cpu", graphs=0)).phase(Phase.WEIGHTS_LOADING)
        assert w is not None
        assert w.seconds == pytest.approx(c.MODEL_INIT.seconds + 10.0 + 20.0 + 20.0, abs=0.01)


def test_no_fill_measured_adds_nothing_on_the_cpu_build() -> None:
    w = predict(_setup(device="cpu", graphs=0)).phase(Phase.WEIGHTS_LOADING)
    assert w is not None
    assert w.seconds == pytest.approx(c.MODEL_INIT.seconds + 10.0, abs=0.01)


def test_every_rank_reads_every_shard_with_the_default_loader() -> None:
    """tp 4: 2.5 GB of weights per rank, but vLLM's safetensors loader reads all 10 GB."""
    one = predict(_setup(weights_bytes_per_rank=int(2.5 * GB), world_size=4))
    streamed = predict(
        _setup(weights_bytes_per_rank=int(2.5 * GB), world_size=4, load_format="fastsafetensors")
    )
    a, b = one.phase(Phase.WEIGHTS_LOADING), streamed.phase(Phase.WEIGHTS_LOADING)
    assert a is not None
    assert b is not None
    assert a.seconds > b.seconds
    assert "every rank reads every shard" in a.basis


def test_no_shards_here_assumes_a_local_ssd_and_says_so() -> None:
    w = predict(_setup(storage=None)).phase(Phase.WEIGHTS_LOADING)
    assert w is not None
    assert "assumed" in w.basis
    assert "no shard on this machine" in w.basis
    assert w.high > 3 * w.seconds  # a wide band: nothing was measured


def test_compile_absent_when_off_warm_shorter_than_cold() -> None:
    off = predict(_setup(compile=False, graphs=0))
    assert off.phase(Phase.TORCH_COMPILE) is None
    assert off.phase(Phase.CUDA_GRAPH_CAPTURE) is None
    cold = predict(_setup()).phase(Phase.TORCH_COMPILE)
    warm = predict(_setup(compile_cache=CompileCache.WARM)).phase(Phase.TORCH_COMPILE)
    assert cold is not None
    assert warm is not None
    assert warm.seconds < cold.seconds
    assert warm.basis.startswith("warm compile cache")


def test_capture_scales_with_graphs_and_is_absent_on_cpu() -> None:
    few = predict(_setup(graphs=10)).phase(Phase.CUDA_GRAPH_CAPTURE)
    many = predict(_setup(graphs=83)).phase(Phase.CUDA_GRAPH_CAPTURE)
    assert few is not None
    assert many is not None
    assert many.seconds == pytest.approx(few.seconds * 8.3, rel=0.01)
    assert predict(_setup(device="cpu")).phase(Phase.CUDA_GRAPH_CAPTURE) is None


def test_warm_compile_scales_with_the_layers_dynamo_traces() -> None:
    def warm(layers: int) -> float:
        e = predict(_setup(compile_cache=CompileCache.WARM, layers=layers))
        got = e.phase(Phase.TORCH_COMPILE)
        assert got is not None
        return got.seconds

    assert warm(64) == pytest.approx(2 * warm(32), rel=0.01)
    assert warm(32) == pytest.approx(32 * c.COMPILE_WARM_PER_LAYER.seconds, rel=0.01)
    assert warm(0) == c.COMPILE_WARM.seconds  # layers unknown: the constant
    e = predict(_setup(compile_cache=CompileCache.WARM, layers=32)).phase(Phase.TORCH_COMPILE)
    assert e is not None
    assert "32 layers x" in e.basis


def test_cold_compile_is_never_shorter_than_the_warm_one() -> None:
    for layers in (8, 32, 200):
        cold = predict(_setup(layers=layers)).phase(Phase.TORCH_COMPILE)
        warm = predict(_setup(layers=layers, compile_cache=CompileCache.WARM))
        w = warm.phase(Phase.TORCH_COMPILE)
        assert cold is not None
        assert w is not None
        assert cold.seconds >= w.seconds
    small = predict(_setup(layers=8)).phase(Phase.TORCH_COMPILE)
    assert small is not None
    assert small.seconds == c.COMPILE_COLD.seconds  # Inductor's distinct pieces, not layers


def test_capture_with_known_layers_scales_with_sizes_times_layers() -> None:
    def capture(layers: int, graphs: int) -> float:
        e = predict(_setup(layers=layers, graphs=graphs)).phase(Phase.CUDA_GRAPH_CAPTURE)
        assert e is not None
        return e.seconds

    assert capture(64, 51) == pytest.approx(2 * capture(32, 51), rel=0.01)
    assert capture(32, 102) == pytest.approx(2 * capture(32, 51), rel=0.01)
    assert capture(32, 51) == pytest.approx(51 * 32 * c.GRAPH_PER_LAYER.seconds, rel=0.01)
    assert predict(_setup(layers=32, graphs=0)).phase(Phase.CUDA_GRAPH_CAPTURE) is None


def test_bound_by_is_the_longest_phase() -> None:
    slow = predict(_setup(storage=_storage(rate=0.05e9)))
    assert slow.bound_by is Phase.WEIGHTS_LOADING
    network = predict(_setup(storage=Storage("nfs", "nfs4", 0.05e9, 4e9, 0, 10 * GB, 1)))
    w = network.phase(Phase.WEIGHTS_LOADING)
    assert w is not None
    assert "network file system (nfs4)" in w.basis


def test_each_further_inductor_compile_adds_a_compile_cold_and_a_load_warm() -> None:
    def compile_phase(**kw: object) -> tuple[float, str]:
        e = predict(_setup(**kw)).phase(Phase.TORCH_COMPILE)
        assert e is not None
        return e.seconds, e.basis

    one, _ = compile_phase()
    three, basis = compile_phase(inductor_compiles=3, compile_note="3 Inductor compiles")
    assert three == pytest.approx(one + 2 * c.INDUCTOR_PER_COMPILE.seconds, abs=0.01)
    assert "3 Inductor compiles" in basis
    assert "+ 2 x " in basis
    warm_one, _ = compile_phase(compile_cache=CompileCache.WARM, layers=32)
    warm_three, _ = compile_phase(compile_cache=CompileCache.WARM, layers=32, inductor_compiles=3)
    assert warm_three == pytest.approx(warm_one + 2 * c.LOAD_PER_COMPILE.seconds, abs=0.01)


def test_the_legacy_adaptor_is_named_and_a_slow_cold_compile_says_why() -> None:
    legacy = predict(_setup(adaptor="legacy")).phase(Phase.TORCH_COMPILE)
    standalone = predict(_setup(adaptor="standalone")).phase(Phase.TORCH_COMPILE)
    assert legacy is not None
    assert standalone is not None
    assert "legacy InductorAdaptor (AOTAutograd cache off)" in legacy.basis
    assert "AOTAutograd cache off" in legacy.slow_reason
    assert "AOTAutograd" not in standalone.basis + standalone.slow_reason
    # the adaptor is named, not priced: no constant separates the two (bench/RESULTS.md)
    assert legacy.seconds == standalone.seconds
