"""``bringup plan`` prints the startup prediction: the issue's JSON fields, one human line
per phase and the total, compile absent with --enforce-eager, capture absent on a CPU."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from bringup.cli.main import Context, main

from builders.safetensors import write_checkpoint


def _plan(*argv: str, tmp_path: Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    env = {"NO_COLOR": "1", "VLLM_CACHE_ROOT": str(tmp_path / "vllm-cache")}
    code = main(["plan", *argv], Context(stdout=out, stderr=err, environ=env))
    return code, out.getvalue()


def _model(tmp_path: Path) -> Path:
    return write_checkpoint(tmp_path / "m", n_shards=2)


def test_json_startup_has_the_issue_fields(tmp_path: Path) -> None:
    code, out = _plan(str(_model(tmp_path)), "--gpu", "H100", "--json", tmp_path=tmp_path)
    startup = json.loads(out)["startup"]
    assert code == 0
    assert set(startup) == {"phases", "total_seconds", "bound_by", "service"}
    for phase in startup["phases"]:
        assert set(phase) == {"phase", "seconds", "low", "high", "basis"}
        assert phase["low"] <= phase["seconds"] <= phase["high"]
    names = [p["phase"] for p in startup["phases"]]
    assert names == [
        "start",
        "weights_loading",
        "torch_compile",
        "memory_profiling",
        "cuda_graph_capture",
        "api_server_starting",
    ]
    assert startup["total_seconds"] == round(sum(p["seconds"] for p in startup["phases"]), 2)
    compile_basis = startup["phases"][2]["basis"]
    # the model's own layers reach the per-layer capture term
    assert " layers x " in startup["phases"][4]["basis"]
    assert compile_basis.startswith("cold compile cache (vLLM's compile cache holds no graph")


def test_enforce_eager_drops_compile_and_capture(tmp_path: Path) -> None:
    _, out = _plan(
        "--gpu", "H100", "--json", "--", "vllm", "serve", str(_model(tmp_path)),
        "--enforce-eager", tmp_path=tmp_path,
    )  # fmt: skip
    names = [p["phase"] for p in json.loads(out)["startup"]["phases"]]
    assert "torch_compile" not in names
    assert "cuda_graph_capture" not in names


def test_human_output_is_one_line_per_phase_the_total_and_the_timeout(tmp_path: Path) -> None:
    _, out = _plan(str(_model(tmp_path)), "--gpu", "H100", tmp_path=tmp_path)
    block = out[out.index("time to ready (predicted):") :].splitlines()
    assert [line.split()[0] for line in block[1:]] == [
        "start",
        "weights_loading",
        "torch_compile",
        "memory_profiling",
        "cuda_graph_capture",
        "api_server_starting",
        "total",
        "start",  # start timeout: what a service manager should allow (test_service_timeout)
    ]
    assert "bound by" in block[-2]
    assert block[-1].startswith("  start timeout ")


def _capture_layers(out: str) -> int:
    phases = json.loads(out)["startup"]["phases"]
    basis = next(p["basis"] for p in phases if p["phase"] == "cuda_graph_capture")
    return int(basis.split(" layers x ")[0].rsplit(" ", 1)[1])


def test_pipeline_stages_compile_and_capture_their_own_layers(tmp_path: Path) -> None:
    model = str(_model(tmp_path))
    _, whole = _plan(model, "--gpu", "H100", "--json", tmp_path=tmp_path)
    _, staged = _plan(model, "--gpu", "H100", "-pp", "2", "--json", tmp_path=tmp_path)
    layers = _capture_layers(whole)
    assert layers >= 2
    assert _capture_layers(staged) == -(-layers // 2)


def _phases(tmp_path: Path, *flags: str) -> dict[str, dict[str, Any]]:
    _, out = _plan(
        "--gpu", "H100", "--json", "--", "vllm", "serve", str(_model(tmp_path)), *flags,
        tmp_path=tmp_path,
    )  # fmt: skip
    return {p["phase"]: p for p in json.loads(out)["startup"]["phases"]}


def test_optimization_level_0_drops_compile_and_capture(tmp_path: Path) -> None:
    phases = _phases(tmp_path, "-O0")
    assert "torch_compile" not in phases
    assert "cuda_graph_capture" not in phases


def test_compile_sizes_and_capture_sizes_reach_the_prediction(tmp_path: Path) -> None:
    plain = _phases(tmp_path)
    sized = _phases(
        tmp_path, "-cc", '{"compile_sizes": [1, 2]}', "--cudagraph-capture-sizes", "1", "2", "4"
    )
    assert "3 Inductor compiles of every piece" in sized["torch_compile"]["basis"]
    assert sized["torch_compile"]["seconds"] > plain["torch_compile"]["seconds"]
    assert sized["cuda_graph_capture"]["basis"].startswith("3 graph sizes")
    assert "(the sizes from the flags)" in sized["cuda_graph_capture"]["basis"]
    none = _phases(tmp_path, "-cc", '{"cudagraph_mode": "NONE"}')
    assert "cuda_graph_capture" not in none
    assert "torch_compile" in none
