"""The CPU bandwidth probe with the engine's own kernel: PyTorch's F.linear in the engine's python
(adapters/membw.py), and bench's --engine-python that asks for it."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from bringup.adapters import membw
from bringup.cli.commands.plan_shared import cpu_processor
from bringup.errors import UsageError


def _interpreter(tmp_path: Path, body: str) -> str:
    """A stand-in for the engine's python: a script that ignores its probe and does ``body``."""
    path = tmp_path / "python"
    path.write_text(f"#!{sys.executable}\nimport sys\n{body}\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_the_probe_runs_in_the_given_interpreter_with_the_thread_count(tmp_path: Path) -> None:
    python = _interpreter(tmp_path, "print(float(sys.argv[3]) * 1e9)")  # argv: -c, probe, threads
    assert membw.measure_torch_linear_bandwidth(python, threads=3) == pytest.approx(3e9)


def test_an_interpreter_without_torch_is_refused_in_one_line(tmp_path: Path) -> None:
    python = _interpreter(tmp_path, "sys.exit(\"ModuleNotFoundError: No module named 'torch'\")")
    with pytest.raises(OSError, match="torch"):
        membw.measure_torch_linear_bandwidth(python, threads=1)
    with pytest.raises(UsageError, match="the PyTorch probe failed"):
        cpu_processor(None, 1, engine_python=python)


def test_the_cpu_says_which_kernel_measured_it(tmp_path: Path) -> None:
    python = _interpreter(tmp_path, "print(12.5e9)")
    cpu = cpu_processor(None, 2, engine_python=python)
    assert cpu.memory_bandwidth_bytes_per_second == pytest.approx(12.5e9)
    assert cpu.bandwidth_source == "measured, 2 threads, PyTorch's linear"


def test_a_missing_interpreter_is_an_oserror() -> None:
    with pytest.raises(OSError, match="did not run"):
        membw.measure_torch_linear_bandwidth("/nonexistent/python", threads=1)
