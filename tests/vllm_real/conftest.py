"""Real vLLM (CPU build) test setup: the venv check, the shared tiny models, one folder per run.

Tests marked ``vllm`` skip with one line when scripts/install-vllm.sh has not installed vLLM,
and fail instead under ``BRINGUP_REQUIRE_REAL=1``. Every process a test's vLLM starts carries
``BRINGUP_TEST_RUN=<its folder>`` in its environment; at the end of the test any such process
left alive is killed and the test fails.
"""

from __future__ import annotations

import contextlib
import subprocess
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
    vllm_python,
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


# vLLM's CPU platform imports the kernels built for this CPU (platforms/cpu.py import_kernels:
# _C with AVX-512 BF16, _C_AVX512, else _C_AVX2); the AVX2 build has no init_shm_manager, and
# then CpuCommunicator keeps torch.distributed (gloo) for -tp and maps no *-cpushm_* object.
_HAS_SHM = """
import torch
from vllm.platforms import current_platform
current_platform.import_kernels()
print(hasattr(torch.ops._C, "init_shm_manager"))
"""


@pytest.fixture(scope="session")
def vllm_cpushm() -> bool:
    """Whether real vLLM's -tp workers on this CPU share tensors through /dev/shm objects
    (asked of vLLM itself, once a run)."""
    require_vllm()
    p = subprocess.run(
        [str(vllm_python()), "-c", _HAS_SHM], capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout.strip().splitlines()[-1] == "True"


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
