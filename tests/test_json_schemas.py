"""The JSON Schemas of the docs (docs/schemas/) hold for real outputs of the commands, and
their vocabularies are the code's."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from bringup.cli.main import Context, main
from bringup.core.checkpoint import PROBLEM_KINDS
from bringup.core.vocab import FailureClass, Phase

from builders.safetensors import write_checkpoint

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "docs" / "schemas"
LOGS = sorted((ROOT / "tests" / "fixtures" / "logs").glob("*.log"))


def schema(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SCHEMAS / f"{name}.json").read_text())
    jsonschema.Draft202012Validator.check_schema(loaded)
    return loaded


def run_json(argv: list[str]) -> tuple[int, list[Any]]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, Context(stdout=out, stderr=err, stdin=io.StringIO(), environ={}))
    text = out.getvalue()
    try:
        return code, [json.loads(text)]
    except json.JSONDecodeError:
        return code, [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("log", LOGS, ids=[p.name for p in LOGS])
def test_diagnose_output_matches_its_schema(log: Path) -> None:
    """Every fixture log's diagnosis (ready, failed, hung, incomplete) fits the schema."""
    _, (obj,) = run_json(["diagnose", "--json", str(log)])
    jsonschema.validate(obj, schema("diagnose"))


@pytest.mark.parametrize(
    "argv",
    [
        ["Llama-3.1-8B", "--gpu", "H100"],
        ["MiniMax-M2.5", "--gpu", "RTX PRO 6000", "-tp", "4", "--gpu-memory-utilization", "0.97"],
        ["Llama-3.1-70B", "--gpu", "RTX 4090"],
        ["Qwen3-30B-A3B", "--gpu", "H100", "-tp", "2", "--enable-expert-parallel"],
    ],
)
def test_plan_output_matches_its_schema(argv: list[str]) -> None:
    """Plans that fit and plans that do not fit."""
    _, (obj,) = run_json(["plan", "--json", *argv])
    jsonschema.validate(obj, schema("plan"))


def test_verify_output_matches_its_schema(tmp_path: Path) -> None:
    """A whole checkpoint, and one with a shard missing."""
    good, bad = tmp_path / "good", tmp_path / "bad"
    for folder in (good, bad):
        folder.mkdir()
        write_checkpoint(folder, n_shards=2)
    next(bad.glob("*.safetensors")).unlink()
    for folder, ok in ((good, True), (bad, False)):
        _, (obj,) = run_json(["verify", "--json", str(folder)])
        jsonschema.validate(obj, schema("verify"))
        assert obj["ok"] is ok


def test_run_summary_matches_its_schema() -> None:
    """A real server process that dies at start: the JSON Lines' summary fits the schema."""
    command = [sys.executable, "-c", "import sys; print('starting', flush=True); sys.exit(3)"]
    code, lines = run_json(["run", "--json", "--quiet", "--stall", "60s", "--", *command])
    assert code == 1
    assert all(line["schema_version"] == 1 for line in lines)
    jsonschema.validate(lines[-1], schema("summary"))


def test_usage_error_matches_its_schema() -> None:
    """A usage error under --json is the error object."""
    code, (obj,) = run_json(["plan", "--json", "--tp", "2"])
    assert code == 2
    jsonschema.validate(obj, schema("error"))


def test_schema_vocabularies_are_the_codes() -> None:
    """Phases, failure classes and problem kinds in the schemas are exactly the code's."""
    phases = [p.value for p in Phase]
    classes = [c.value for c in FailureClass]
    diagnose = schema("diagnose")["properties"]
    assert diagnose["phase"]["enum"] == phases
    assert diagnose["failure"]["properties"]["class"]["enum"] == classes
    assert schema("summary")["properties"]["phase"]["enum"] == phases
    problems = schema("verify")["properties"]["problems"]["items"]["properties"]
    assert sorted(problems["kind"]["enum"]) == sorted(PROBLEM_KINDS), (
        "update docs/schemas/verify.json"
    )
