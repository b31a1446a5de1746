"""`bringup verify` on the same GGUF files the real server loads or refuses."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from bringup.cli.main import Context, main


def verify(path: Path) -> tuple[int, dict[str, object]]:
    """Run `bringup verify --json PATH` in-process; return the exit code and the JSON."""
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["verify", "--json", str(path)],
        Context(stdout=out, stderr=err, stdin=io.StringIO(), environ={"NO_COLOR": "1"}),
    )
    return code, json.loads(out.getvalue())


def test_the_model_the_server_loads_passes(models: dict[str, Path]) -> None:
    """The tiny GGUF the real server serves verifies clean: 21 tensors, all F32."""
    code, doc = verify(models["tiny"])
    assert code == 0
    assert doc["ok"] is True
    assert doc["format"] == "gguf"
    assert doc["tensors"] == 21
    assert list(doc["bytes_by_dtype"]) == ["F32"]


@pytest.mark.parametrize("key", ["truncated", "truncated_header", "corrupt"])
def test_files_the_server_refuses_are_flagged(key: str, models: dict[str, Path]) -> None:
    """Every GGUF the real server refused to load is a problem for verify too (exit 1)."""
    code, doc = verify(models[key])
    assert code == 1
    assert doc["ok"] is False
    kinds = {p["kind"] for p in doc["problems"]}  # type: ignore[attr-defined]
    assert kinds & {"bad_magic", "truncated"}, kinds
