"""Real Ray (2.60, over the vLLM CPU venv) for the multi-node tests with the Ray backend.

scripts/install-ray.sh makes a venv of its own layered over vLLM's (a .pth names the vLLM venv's
site-packages; ``ray`` and ``vllm`` in its bin), default
``~/.cache/bringup/ray-2.60.0-on-vllm-0.32.0`` (``BRINGUP_RAY_VENV`` overrides it). Tests that
need it call ``require_ray()``: without it they skip with one line saying what to install, and
under ``BRINGUP_REQUIRE_REAL=1`` (CI) they fail instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from builders.vllm_env import VLLM_VERSION, vllm_venv

RAY_VERSION = "2.60.0"
INSTALL_HINT = (
    f"install it with scripts/install-ray.sh (ray {RAY_VERSION} layered over the vLLM CPU venv)"
)


def ray_venv() -> Path:
    """Where scripts/install-ray.sh puts (or put) the Ray venv."""
    configured = os.environ.get("BRINGUP_RAY_VENV")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "bringup" / f"ray-{RAY_VERSION}-on-vllm-{VLLM_VERSION}"


def ray_problem() -> str | None:
    """Why real Ray cannot run here (one phrase), or None. Cheap: no import of Ray."""
    venv = ray_venv()
    stamp = venv / ".bringup-ray-ok"
    if not (venv / "bin" / "ray").exists() or not (venv / "bin" / "vllm").exists():
        return f"no Ray venv at {venv}"
    if not stamp.exists() or stamp.read_text().strip() != f"{RAY_VERSION} on {vllm_venv()}":
        return f"the Ray venv at {venv} is incomplete (scripts/install-ray.sh did not finish)"
    return None


def require_ray() -> None:
    """Skip (one line) without real Ray; fail under BRINGUP_REQUIRE_REAL=1."""
    problem = ray_problem()
    if problem is None:
        return
    if os.environ.get("BRINGUP_REQUIRE_REAL") == "1":
        pytest.fail(f"BRINGUP_REQUIRE_REAL=1 but {problem}; {INSTALL_HINT}", pytrace=False)
    pytest.skip(f"real Ray absent: {problem}; {INSTALL_HINT}")
