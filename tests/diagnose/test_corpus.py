"""The fixture corpus, table-driven: every log gives the expected outcome, class, phase and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bringup.core import logline
from bringup.core.analyzer import LogAnalyzer, diagnose_bytes
from bringup.core.vocab import FailureClass

from builders.read_log import read_lines

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
EXPECTED: dict[str, dict[str, Any]] = json.loads((LOGS / "expected.json").read_text())


def _lines(data: bytes) -> list[str]:
    text = data.decode("utf-8", "replace")
    parts = text.split("\n")
    return parts[:-1] if text.endswith("\n") else parts


def _diagnose(name: str, *, screen: bool = True) -> Any:
    exp = EXPECTED[name]
    data = (LOGS / name).read_bytes()
    if "exit_code" in exp or not screen:
        # without the screen, every line is read: the after-ready screen is off too
        analyzer = LogAnalyzer(screen=screen, after_ready=screen)
        for line in _lines(data):
            analyzer.feed(line)
        return analyzer.finish(exp.get("exit_code"))
    return diagnose_bytes(data)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_log_gives_expected_verdict(name: str) -> None:
    """Each corpus log gives its expected engine, outcome, class, phases and root-cause line."""
    exp = EXPECTED[name]
    d = _diagnose(name)
    got = {
        "engine": d.engine,
        "outcome": d.outcome.value,
        "class": d.failure.failure_class.value if d.failure else None,
        "phase": d.failure.phase.value if d.failure else None,
        "reached": d.phase.value,
        "line_number": d.failure.line_number if d.failure else None,
    }
    assert got == {k: exp[k] for k in got}
    if "version" in exp:
        assert d.engine_version == exp["version"]
    for fact, value in exp.get("facts", {}).items():
        assert (
            d.facts.get(fact) == pytest.approx(value)
            if isinstance(value, float)
            else d.facts.get(fact) == value
        ), fact
    if "remedy_flag" in exp:
        flag, value = exp["remedy_flag"]
        assert (flag, value) in [(r.flag, r.value) for r in d.failure.remedy]
    if "remedy_env" in exp:
        assert exp["remedy_env"] in [r.env for r in d.failure.remedy]
    if d.failure is not None and d.failure.line_number == 0:
        assert d.failure.line == ""  # no line states the cause: none is named
    elif d.failure is not None:
        raw = _lines((LOGS / name).read_bytes())[d.failure.line_number - 1]
        assert d.failure.line.strip()
        assert d.failure.line == logline.parse(raw, d.failure.line_number).text


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_screen_never_changes_the_verdict(name: str) -> None:
    """The fast path (screened bytes) and the unscreened line-by-line path agree exactly."""
    if "exit_code" in EXPECTED[name]:
        pytest.skip("exit-code logs are read line by line already")
    data = (LOGS / name).read_bytes()
    assert diagnose_bytes(data) == _diagnose(name, screen=False) == read_lines(_lines(data))


def test_corpus_covers_every_vllm_class_and_each_engine() -> None:
    """The corpus has every failure class for vLLM, and ready plus failures for every engine."""
    vllm_classes = {e["class"] for e in EXPECTED.values() if e["engine"] == "vllm" and e["class"]}
    assert vllm_classes == {c.value for c in FailureClass}
    for engine in ("vllm", "sglang", "tgi", "llamacpp"):
        outcomes = [e["outcome"] for e in EXPECTED.values() if e["engine"] == engine]
        assert "ready" in outcomes, engine
        assert outcomes.count("failed") >= 3, engine
    assert len(EXPECTED) >= 40
