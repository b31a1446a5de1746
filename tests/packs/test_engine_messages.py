"""The engines' own messages (``tools/engine_messages.py``'s tables) are classified as the tables
say: each loaded row's template, rendered as a concrete line (every value ``7``) and placed in a
minimal log of that engine's shape (written here), gets the row's class from ``diagnose``. The
class comes from the tool's mapping, never from bringup's analyzer, so a hand-written signature,
a screen, an exclusion or another table row that reads the line otherwise fails this test.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import pytest

from bringup.core.analyzer import diagnose_bytes
from bringup.core.vocab import Engine

TOOLS = Path(__file__).resolve().parents[2] / "tools"
VALUE = "7"


def tables() -> list[tuple[str, dict[str, object], list[dict[str, object]]]]:
    folder = resources.files("bringup.data").joinpath("messages")
    out = []
    for table in sorted(folder.iterdir(), key=lambda t: t.name):
        if not table.name.endswith(".jsonl"):
            continue
        lines = table.read_text(encoding="utf-8").splitlines()
        out.append((table.name, json.loads(lines[0])["meta"], [json.loads(x) for x in lines[1:]]))
    return out


def render(template: str) -> list[str]:
    """The message with each ``{}`` a value, as log lines."""
    text = template.replace("{{", "\x01").replace("}}", "\x02").replace("{}", VALUE)
    text = text.replace("\x01", "{").replace("\x02", "}")
    return [line for line in text.split("\n") if line.strip()] or [text]


def _vllm(row: dict[str, object], meta: dict[str, object]) -> list[str]:
    file = str(row["file"])
    base = file.rsplit("/", 1)[-1]
    lines = render(str(row["template"]))
    head = [f"INFO 12-02 00:00:00 [api_server.py:1] vLLM API server version {meta['version']}"]
    if row["kind"] == "raise":
        return [
            *head,
            "Traceback (most recent call last):",
            f'  File "/opt/venv/lib/python3.12/site-packages/{file}", line {row["line"]}, in x',
            "    raise",
            f"{row['type']}: {lines[0]}",
            *lines[1:],
        ]
    return [*head, f"ERROR 12-02 00:00:01 [{base}:{row['line']}] {lines[0]}", *lines[1:]]


SHAPES: dict[str, Callable[[dict[str, object], dict[str, object]], list[str]]] = {
    "vllm": _vllm,
}
ROWS = [
    pytest.param(name, meta, row, id=f"{name}:{row['file']}:{row['line']}")
    for name, meta, rows in tables()
    for row in rows
    if row["load"]
]


def test_the_tables_are_there_and_loaded():
    """Every engine with a shape here has a table, and its pack carries its rows."""
    from bringup.core import packs

    names = {str(meta["engine"]) for _, meta, _ in tables()}
    assert set(SHAPES) <= names
    for engine in names:
        pack = packs.get(Engine(engine))
        assert any(s.name.startswith("code:") for s in pack.signatures)


@pytest.mark.parametrize(("name", "meta", "row"), ROWS)
def test_every_message_gets_its_class(name, meta, row):
    """One table row, rendered into a log of its engine: diagnose gives the row's class."""
    shape = SHAPES.get(str(meta["engine"]))
    if shape is None:
        pytest.skip(f"no log shape for {meta['engine']} yet")
    log = "\n".join(shape(row, meta)) + "\n"
    d = diagnose_bytes(log.encode(), Engine(str(meta["engine"])))
    got = d.failure.failure_class.value if d.failure is not None else None
    assert got == row["class"], (row["template"], row["rule"], d.failure)


def test_the_mapping_gives_every_row_its_class():
    """The stored classes are the mapping's now (``engine_messages.py check``; the sources
    themselves are not here, so only the mapping is checked)."""
    sys.path.insert(0, str(TOOLS))
    try:
        import engine_messages
    finally:
        sys.path.remove(str(TOOLS))
    assert engine_messages.cmd_check({}) == 0
