"""What a vLLM command says about compile and the loader."""

from __future__ import annotations

import pytest

from bringup.core.startup_time.flags import compile_off, load_format


@pytest.mark.parametrize(
    ("flags", "off"),
    [
        (["--enforce-eager"], "--enforce-eager"),
        (["-O0"], "-O0"),
        (["-O", "0"], "-O 0"),
        (["--compilation-config", '{"level": 0}'], '--compilation-config {"level": 0}'),
        (["-O", '{"mode": 0}'], '--compilation-config {"mode": 0}'),
        (["-cc.mode=0"], "-cc.mode=0"),
        (["-O3"], None),
        (["--compilation-config", '{"level": 3}'], None),
        ([], None),
    ],
)
def test_compile_off(flags: list[str], off: str | None) -> None:
    assert compile_off(flags) == off


def test_load_format() -> None:
    assert load_format([]) == "auto"
    assert load_format(["--load-format", "runai_streamer"]) == "runai_streamer"
    assert load_format(["--load-format=fastsafetensors"]) == "fastsafetensors"
