"""The llama.cpp knowledge pack and `bringup diagnose` against REAL recorded llama-cpp-python output.

No engine needed: the logs in tests/fixtures/logs/llamacpp_real/ were printed by the real server
(expectations.json says how each was made, its exit status and the right verdict).
"""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path
from typing import Any

import pytest

from bringup.cli.main import Context, main
from bringup.core.analyzer import diagnose_bytes
from bringup.core.vocab import Engine

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "llamacpp_real"
EXPECT: dict[str, dict[str, Any]] = json.loads((FIXTURES / "expectations.json").read_text())[
    "cases"
]
EXIT_CODES = {"ready": 0, "failed": 1, "hung": 1, "incomplete": 3}


def test_every_recording_has_an_expectation() -> None:
    """Each recorded log is described in expectations.json and each expectation names a log."""
    logs = {p.name for p in FIXTURES.glob("*.log")}
    assert logs == {c["log"] for c in EXPECT.values()}


@pytest.mark.parametrize("engine", [Engine.LLAMACPP, None], ids=["llamacpp", "auto"])
@pytest.mark.parametrize("case", sorted(EXPECT))
def test_analyzer_verdict_on_real_output(case: str, engine: Engine | None) -> None:
    """The analyzer gives the recorded outcome, class, phases and root-cause line number."""
    want = EXPECT[case]
    got = diagnose_bytes((FIXTURES / want["log"]).read_bytes(), engine)
    f = got.failure
    assert (got.outcome.value, got.phase.value) == (want["outcome"], want["phase"])
    assert (f.failure_class.value if f else None) == want["class"]
    if f is not None:
        assert f.phase.value == want["failure_phase"]
        assert (f.line_number, f.line) == (want["root_cause_line_number"], want["root_cause_line"])
    assert got.engine == "llamacpp"


@pytest.mark.skipif(
    importlib.util.find_spec("bringup.cli.commands.diagnose") is None,
    reason="bringup diagnose is not built yet (issue 2)",
)
@pytest.mark.parametrize("case", sorted(EXPECT))
def test_diagnose_cli_on_real_output(case: str) -> None:
    """`bringup diagnose --json` on a real recording prints the right verdict and exit code."""
    want = EXPECT[case]
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["diagnose", "--json", str(FIXTURES / want["log"])],
        Context(stdout=out, stderr=err, stdin=io.StringIO(), environ={"NO_COLOR": "1"}),
    )
    doc = json.loads(out.getvalue())
    assert code == EXIT_CODES[want["outcome"]], err.getvalue()
    assert (doc["outcome"], doc["phase"], doc["engine"]) == (
        want["outcome"],
        want["phase"],
        "llamacpp",
    )
    if want["class"] is None:
        assert doc["failure"] is None
    else:
        assert doc["failure"]["class"] == want["class"]
        assert doc["failure"]["line_number"] == want["root_cause_line_number"]
        assert doc["failure"]["line"] == want["root_cause_line"]


def test_application_startup_complete_is_not_ready_before_a_bind_error() -> None:
    """uvicorn's 'Application startup complete.' precedes the bind error: the verdict is not ready."""
    text = (FIXTURES / "port_in_use.log").read_text().splitlines()
    cut = text.index("INFO:     Application startup complete.") + 1
    partial = diagnose_bytes("\n".join(text[:cut]).encode(), Engine.LLAMACPP)
    assert partial.outcome.value != "ready"
