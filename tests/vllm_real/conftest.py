"""Real vLLM (CPU build) test setup: the venv check, the shared tiny models, one folder per run.

Tests marked ``vllm`` skip with one line when scripts/install-vllm.sh has not installed vLLM,
and fail instead under ``BRINGUP_REQUIRE_REAL=1``. Every process a test's vLLM starts carries
``BRINGUP_TEST_RUN=<its folder>`` in its environment; at the end of the test any such process
left alive is killed and the test fails.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from builders.vllm_env import (
    remove_environ,
    require_vllm,
    shared_folder,
    tiny_model,
    vllm_environ,
)

MARK = "BRINGUP_TEST_RUN"


@pytest.fixture(autouse=True)
def _require_vllm(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("vllm") is not None:
        require_vllm()


@pytest.fixture(scope="session")
def vllm_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny model with one shard and with two, built once for the whole run (all workers)."""
    require_vllm()
    shared = shared_folder(tmp_path_factory)
    return {"one": tiny_model(shared, 1), "two": tiny_model(shared, 2)}


def marked_processes(marker: str) -> list[psutil.Process]:
    """Live processes whose environment carries ``BRINGUP_TEST_RUN=marker``."""
    found = []
    for p in psutil.process_iter(["status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if p.environ().get(MARK) == marker:
                found.append(p)
        except psutil.Error:
            continue
    return found


@pytest.fixture
def vllm_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment for this test's vLLM runs; fails the test if any of their processes is left."""
    env = vllm_environ(tmp_path / "vllm")
    env[MARK] = str(tmp_path)
    yield env
    left = [p.pid for p in marked_processes(str(tmp_path))]
    for pid in left:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()
    remove_environ(tmp_path / "vllm")
    assert not left, f"vLLM processes left running: {left}"
