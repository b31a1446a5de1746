"""``bringup unit`` sizes TimeoutStartSec= from the startup prediction, and says so."""

from __future__ import annotations

import io
import math
import os
from pathlib import Path

from bringup.cli.main import Context, main
from bringup.core import systemd_unit as su
from bringup.core.startup_time.service import FLOOR_SECONDS, MARGIN, start_timeout
from bringup.follow.startup_time import live_prediction

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
