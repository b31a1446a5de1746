"""``bringup unit`` sizes TimeoutStartSec= from the startup prediction, says so, and says it in
``--json`` (``timeout_start``)."""

from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from bringup.cli.main import Context, main
from bringup.core import systemd_unit as su
from bringup.core.startup_time.service import FLOOR_SECONDS, MARGIN, service_timeout
from bringup.core.startup_time.systemd import start_timeout
from bringup.core.vocab import Phase
from bringup.follow.startup_time import live_prediction
from bringup.render.json_out import to_jsonable

from builders.safetensors import write_checkpoint


def _unit(tmp_path: Path, *extra: str, model: str) -> list[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("vllm", "bringup"):
        exe = bin_dir / name
        exe.write_text("#!/bin/sh\nexit 0\n")
        exe.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin",
        "NO_COLOR": "1",
        "VLLM_CACHE_ROOT": str(tmp_path / "cache"),
    }
    out, err = io.StringIO(), io.StringIO()
    argv = ["unit", "u", "--bringup", str(bin_dir / "bringup"), *extra, "--", "vllm", "serve"]
    code = main([*argv, model], Context(stdout=out, stderr=err, environ=env))
    assert code == 0, err.getvalue()
    return out.getvalue().splitlines()


def test_timeout_from_the_prediction_with_its_comment(tmp_path: Path) -> None:
    model = write_checkpoint(tmp_path / "m", n_shards=2, hidden=8192)  # big sparse shards
    lines = _unit(tmp_path, model=str(model))
    found = live_prediction(["vllm", "serve", str(model)], {"VLLM_CACHE_ROOT": str(tmp_path)})
    assert found is not None
    high = found[0].high_seconds
    guard = 300.0  # the guard's --guard-timeout default runs inside the same timeout
    want = max(FLOOR_SECONDS, math.ceil(MARGIN * high / 60) * 60) + guard
    timeout = next(line for line in lines if line.startswith("TimeoutStartSec="))
    assert timeout == f"TimeoutStartSec={su.format_seconds(want)}"
    comment = lines[lines.index(timeout) - 1]
    assert comment.startswith("# TimeoutStartSec: 1.5 x the predicted startup's high end")
    assert start_timeout(found[0], guard)[0] == want
    assert "plus 5m00s for the guard" in comment


def test_an_explicit_timeout_wins_and_an_unknown_model_keeps_20m(tmp_path: Path) -> None:
    model = write_checkpoint(tmp_path / "m", n_shards=1)
    lines = _unit(tmp_path, "--timeout-start", "7m", model=str(model))
    assert "TimeoutStartSec=7min" in lines or "TimeoutStartSec=420s" in lines
    assert not any(line.startswith("# TimeoutStartSec:") for line in lines)
    unknown = _unit(tmp_path, model="no-such-model-here")
    assert "TimeoutStartSec=20min" in unknown


def test_a_model_whose_weights_are_not_here_keeps_20m(tmp_path: Path) -> None:
    """A bundled model's id (vLLM would download it) or a folder with a config and no
    shards: nothing to time the loading of, so no prediction and the 20 minutes."""
    config_only = write_checkpoint(tmp_path / "c", n_shards=1)
    (config_only / "model.safetensors").unlink()
    for model in ("meta-llama/Llama-3.1-8B-Instruct", str(config_only)):
        assert live_prediction(["vllm", "serve", model], {"VLLM_CACHE_ROOT": str(tmp_path)}) is None
        lines = _unit(tmp_path, model=model)
        assert "TimeoutStartSec=20min" in lines, model
        assert not any(line.startswith("# TimeoutStartSec:") for line in lines)


def _unit_json(tmp_path: Path, *extra: str, model: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads("\n".join(_unit(tmp_path, "--json", *extra, model=model)))
    return loaded


def _written(obj: dict[str, Any]) -> str:
    line = next(ln for ln in obj["text"].splitlines() if ln.startswith("TimeoutStartSec="))
    return line.split("=", 1)[1]


def test_unit_json_says_the_timeout_it_wrote_and_where_from(tmp_path: Path) -> None:
    model = str(write_checkpoint(tmp_path / "m", n_shards=2, hidden=8192))
    found = live_prediction(["vllm", "serve", model], {"VLLM_CACHE_ROOT": str(tmp_path / "cache")})
    assert found is not None
    written = _unit_json(tmp_path, "--guard-timeout", "2m", model=model)
    timeout = written["timeout_start"]
    assert timeout["source"] == "prediction"
    assert timeout["guard_seconds"] == 120.0
    service = timeout["service"]
    # the plan's rule on the unit's own prediction (measured again: the read rate may move)
    assert service == to_jsonable(service_timeout(service["high_seconds"]))
    assert service["high_seconds"] == pytest.approx(found[0].high_seconds, rel=0.25)
    assert timeout["seconds"] == timeout["service"]["timeout_start_seconds"] + 120.0
    assert timeout["note"].startswith("TimeoutStartSec: 1.5 x the predicted startup's high end")
    assert _written(written) == su.format_seconds(timeout["seconds"])


def test_unit_json_names_an_option_and_the_default(tmp_path: Path) -> None:
    model = str(write_checkpoint(tmp_path / "m", n_shards=1))
    given = _unit_json(tmp_path, "--timeout-start", "7m", model=model)["timeout_start"]
    assert (given["seconds"], given["source"], given["service"]) == (420.0, "option", None)
    unknown = _unit_json(tmp_path, model="no-such-model-here")["timeout_start"]
    assert (unknown["seconds"], unknown["source"], unknown["service"]) == (1200.0, "default", None)


def test_a_commands_capture_follows_its_batched_tokens_as_vllm_reads_them(tmp_path: Path) -> None:
    """``run``/``up``/``unit`` predict the capture from the command: vLLM cuts its default
    capture list at --max-num-batched-tokens (``_set_cudagraph_sizes``, 0.32.0), and reads
    that flag with ``human_readable_int`` (``8k`` is 8,000), as ``plan`` does."""
    model = write_checkpoint(tmp_path / "m", n_shards=1, hidden=64)
    env = {"VLLM_CACHE_ROOT": str(tmp_path)}

    def capture_basis(*flags: str) -> str:
        found = live_prediction(["vllm", "serve", str(model), "--device", "cuda", *flags], env)
        assert found is not None
        phase = found[0].phase(Phase.CUDA_GRAPH_CAPTURE)
        assert phase is not None
        return phase.basis

    assert capture_basis().startswith("51 graph sizes")
    # 1, 2, 4 and 8..64 in steps of 8: the sizes up to 64 batched tokens
    assert capture_basis("--max-num-batched-tokens", "64").startswith("11 graph sizes")
    assert capture_basis("--max-num-batched-tokens", "8k").startswith("51 graph sizes")
    assert capture_basis("--max-num-seqs", "16").startswith("7 graph sizes")  # up to 32
