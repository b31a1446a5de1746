"""The CPU build's weights phase with the repack measured in the engine's python: the modules'
init plus the copies, the repack at its own rate; the GPU corpus's model-init band is not
added on top (it holds the post-processing the repack term already counts)."""

from __future__ import annotations

import pytest

from bringup.core.startup_time import StartupSetup, Storage, predict
from bringup.core.startup_time import constants as c
from bringup.core.vocab import Phase

GB = 10**9


def _weights(**kw: object) -> tuple[float, float, float, float, str]:
    st = Storage(
        "local", "ext4", 1e9, 4e9, 0, 10 * GB, 256 * 2**20,
        fill_bytes_per_s=0.5e9, refill_bytes_per_s=2e9,
    )  # fmt: skip
    base: dict[str, object] = {
        "weights_bytes_per_rank": 10 * GB,
        "checkpoint_bytes": 10 * GB,
        "world_size": 1,
        "storage": st,
        "device": "cpu",
    }
    base.update(kw)
    w = predict(StartupSetup(**base)).phase(Phase.WEIGHTS_LOADING)  # type: ignore[arg-type]
    assert w is not None
    return w.seconds, w.low, w.high, w.tail_seconds, w.basis


def test_the_measured_repack_replaces_the_band_and_the_fresh_copy_guess() -> None:
    """10 GB: read 10 s, first touch 1/0.5 - 1/2 s a GB = 15 s, repack at 0.25 GB/s = 40 s;
    no model-init band (the old form: band + 10 s + 15 s + 10 GB / 0.5 GB/s)."""
    seconds, low, high, tail, basis = _weights(repack_bytes_per_s=0.25e9)
    assert seconds == pytest.approx(10.0 + 15.0 + 40.0, abs=0.01)
    assert tail == pytest.approx(40.0)
    assert low < seconds < high
    assert "repacked for the CPU GEMM at 0.25 GB/s" in basis
    old, *_ = _weights()
    assert old == pytest.approx(c.MODEL_INIT.seconds + 10.0 + 15.0 + 20.0, abs=0.01)


def test_a_slower_repack_predicts_a_longer_phase() -> None:
    fast, *_ = _weights(repack_bytes_per_s=2e9)
    slow, *_ = _weights(repack_bytes_per_s=1e9)
    assert slow - fast == pytest.approx(5.0, abs=0.01)


def test_on_a_gpu_a_repack_rate_changes_nothing() -> None:
    assert _weights(device="cuda", repack_bytes_per_s=0.25e9) == _weights(device="cuda")


def test_the_repack_alone_counts_without_a_fill_measurement() -> None:
    st = Storage("local", "ext4", 1e9, 4e9, 0, 10 * GB, 256 * 2**20)
    seconds, *_ = _weights(storage=st, repack_bytes_per_s=1e9)
    assert seconds == pytest.approx(10.0 + 10.0, abs=0.01)
