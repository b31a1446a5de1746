"""The repack probe (adapters/repack.py): it runs in the engine's own interpreter with vLLM's
thread count and one layer's weight, fails in one line, and the follower uses it on the CPU
build only (a fake in place of the subprocess)."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from bringup.adapters import repack
from bringup.adapters.report_env import engine_interpreter
from bringup.follow.startup_time import ModelFacts, measure_cpu_repack


def _script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\nimport sys\n{body}\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_the_probe_runs_in_the_given_interpreter_with_its_shape_and_threads(tmp_path: Path) -> None:
    # the fake's argv: itself, -c, PROBE, rows, cols, threads, passes, count
    python = _script(tmp_path, "python", "print(int(sys.argv[4]) * int(sys.argv[5]) * 1e6)")
    assert repack.measure_repack(python, rows=8, cols=1024, threads=3) == pytest.approx(3072e6)


def test_the_probe_reorders_enough_weights_that_the_cache_cannot_serve_them(
    tmp_path: Path,
) -> None:
    python = _script(tmp_path, "python", "print(float(sys.argv[7]))")  # the weight count
    one = 8 * 1024 * 4  # bytes of one 8 x 1024 float32 weight
    assert repack.measure_repack(python, 8, 1024, 1) == repack.PROBE_BYTES // one
    big = repack.measure_repack(python, 8, 1024, 1, cache_bytes=64 * 2**20)
    assert big == 4 * 64 * 2**20 // one


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ('sys.exit("no vllm package in this interpreter")', "no vllm package"),
        ("print('nan?')", "printed"),
        ("print(0.0)", "measured nothing"),
    ],
)
def test_a_failed_probe_is_one_oserror_line(tmp_path: Path, body: str, match: str) -> None:
    python = _script(tmp_path, "python", body)
    with pytest.raises(OSError, match=match):
        repack.measure_repack(python, rows=8, cols=8, threads=1)


def test_a_missing_interpreter_is_an_oserror() -> None:
    with pytest.raises(OSError, match="did not run"):
        repack.measure_repack("/nonexistent/python", rows=8, cols=8, threads=1)


@pytest.mark.parametrize(
    ("bind", "threads"),
    [("0", 1), ("0-3|4-7", 4), ("0,2,5-6", 4), ("auto", None), ("nobind", None), ("", None)],
)
def test_threads_follow_vllm_s_core_binding(bind: str, threads: int | None) -> None:
    import os

    usable = len(os.sched_getaffinity(0))
    env = {"VLLM_CPU_OMP_THREADS_BIND": bind} if bind else {}
    assert repack.omp_threads(env) == (threads or usable)


def test_the_engine_python_is_the_console_script_s_interpreter(tmp_path: Path) -> None:
    vllm = _script(tmp_path, "vllm", "pass")
    assert engine_interpreter([vllm, "serve", "m"], {}) == sys.executable
    py = tmp_path / "python3.11"
    py.write_text("")
    py.chmod(0o755)  # an interpreter that can run
    assert engine_interpreter([str(py), "-m", "vllm.entrypoints.openai.api_server"], {}) == str(py)
    binary = tmp_path / "server"
    binary.write_bytes(b"\x7fELF...")
    assert engine_interpreter([str(binary)], {}) is None
    assert engine_interpreter([], {}) is None


def test_the_probe_weight_is_the_stacked_mlp_weight_cut_to_a_few_dozen_mb() -> None:
    assert repack.probe_shape(1024, 4096) == (8192, 1024)  # 32 MiB of float32
    rows, cols = repack.probe_shape(8192, 28672)
    assert cols == 8192
    assert rows * cols * 4 <= repack.PROBE_BYTES
    big_cache, _ = repack.probe_shape(8192, 28672, cache_bytes=64 * 2**20)
    assert big_cache * 8192 * 4 <= 4 * 64 * 2**20
    assert big_cache > rows


def _facts() -> ModelFacts:
    class Arch:
        intermediate_size = 4096

    return ModelFacts(("x.safetensors",), 10, 1024, 20, Arch())


def test_the_follower_measures_in_the_command_s_python(tmp_path: Path) -> None:
    vllm = _script(tmp_path, "vllm", "pass")
    fake = repack.FakeRepack(rate=1.5e9)
    env = {"VLLM_CPU_OMP_THREADS_BIND": "0-1"}
    got = measure_cpu_repack([vllm, "serve", "m"], env, _facts(), fake)
    assert got == pytest.approx(1.5e9)
    python, rows, cols, threads = fake.calls[0]
    assert (python, cols, threads) == (sys.executable, 1024, 2)
    assert rows >= 8192  # the whole stacked weight, under the probe's cap


def test_a_failed_probe_leaves_the_prediction_without_it(tmp_path: Path) -> None:
    vllm = _script(tmp_path, "vllm", "pass")
    assert measure_cpu_repack([vllm, "serve"], {}, _facts(), repack.FakeRepack(rate=None)) is None
    assert measure_cpu_repack(["/nonexistent/vllm"], {}, _facts(), repack.FakeRepack()) is None
