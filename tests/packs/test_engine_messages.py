"""The engines' own messages (``tools/engine_messages.py``'s tables) are classified as the tables
say: each loaded row's template, rendered as a concrete line (every value ``7``) and placed in a
minimal log of that engine's shape (written here), gets the row's class from ``diagnose``. The
class comes from the tool's mapping, never from bringup's analyzer, so a hand-written signature,
a screen, an exclusion or another table row that reads the line otherwise fails this test.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import pytest

from bringup.core.analyzer import diagnose_bytes
from bringup.core.vocab import Engine

TOOLS = Path(__file__).resolve().parents[2] / "tools"
VALUE = "42"  # not a signal number (a SIGBUS 7 would be read as the signal rule reads it)


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


def _traceback(row: dict[str, object], lines: list[str]) -> list[str]:
    return [
        "Traceback (most recent call last):",
        f'  File "/opt/venv/lib/python3.12/site-packages/{row["file"]}", line {row["line"]}, in x',
        "    raise",
        f"{row['type']}: {lines[0]}",
        *lines[1:],
    ]


def _sglang(row: dict[str, object], meta: dict[str, object]) -> list[str]:
    lines = render(str(row["template"]))
    head = ["[2026-12-02 00:00:00] server_args=ServerArgs(model_path='m', tp_size=1)"]
    if row["kind"] == "raise":
        return [*head, *_traceback(row, lines)]
    return [*head, f"[2026-12-02 00:00:01 TP0] {lines[0]}", *lines[1:]]


def _tgi(row: dict[str, object], meta: dict[str, object]) -> list[str]:
    lines = render(str(row["template"]))
    head = ["2026-12-02T00:00:00.000000Z  INFO text_generation_launcher: Args {"]
    if row["kind"] == "raise":
        return [*head, *_traceback(row, lines)]
    if row["kind"] == "log":  # the Python shard's logger, relayed by the launcher
        return [*head, f"2026-12-02T00:00:01.000000Z ERROR text_generation_launcher: {lines[0]}"]
    target = (
        "text_generation_launcher" if "launcher" in str(row["file"]) else "text_generation_router"
    )
    return [*head, f"2026-12-02T00:00:01.000000Z ERROR {target}: {lines[0]}", *lines[1:]]


def _llamacpp(row: dict[str, object], meta: dict[str, object]) -> list[str]:
    lines = render(str(row["template"]))
    head = ["llama_model_loader: loaded meta data with 30 key-value pairs and 291 tensors"]
    file = str(row["file"])
    if row["kind"] == "throw" and file.endswith("arg.cpp"):  # the argument parser's catch
        return [*head, f'error while handling argument "--x": {lines[0]}', *lines[1:]]
    if row["kind"] == "throw" and re.search(
        r"llama(?:-model(?:-loader)?|-vocab|-adapter)?\.cpp$|gguf", file
    ):
        return [*head, f"llama_model_load: error loading model: {lines[0]}", *lines[1:]]
    if row["kind"] == "throw":  # not caught: the C++ runtime prints what() and aborts
        return [
            *head,
            "terminate called after throwing an instance of 'std::runtime_error'",
            f"  what():  {lines[0]}",
            *lines[1:],
        ]
    if row["kind"] == "GGML_ABORT":
        return [*head, f"{row['file']}:{row['line']}: {lines[0]}", *lines[1:]]
    return [*head, *lines]


def _ollama(row: dict[str, object], meta: dict[str, object]) -> list[str]:
    lines = render(str(row["template"]))
    head = [
        'time=2026-12-02T00:00:00.000Z level=INFO source=routes.go:1 msg="server config" env="map[OLLAMA_HOST:http://127.0.0.1:11434]"'
    ]
    base = str(row["file"]).rsplit("/", 1)[-1]
    if row["kind"] == "slog.Error":
        return [
            *head,
            f'time=2026-12-02T00:00:01.000Z level=ERROR source={base}:{row["line"]} msg="{lines[0]}"',
        ]
    return [*head, f"Error: {lines[0]}", *lines[1:]]


SHAPES: dict[str, Callable[[dict[str, object], dict[str, object]], list[str]]] = {
    "vllm": _vllm,
    "sglang": _sglang,
    "tgi": _tgi,
    "llamacpp": _llamacpp,
    "ollama": _ollama,
}
TABLES = tables()


def test_the_tables_are_there_and_loaded():
    """Every engine with a shape here has a table, and its pack carries its rows."""
    from bringup.core import packs

    names = {str(meta["engine"]) for _, meta, _ in TABLES}
    assert set(SHAPES) <= names
    for engine in names:
        pack = packs.get(Engine(engine))
        assert any(s.name.startswith("code:") for s in pack.signatures)


@pytest.mark.parametrize(("name", "meta", "rows"), TABLES, ids=[t[0] for t in TABLES])
def test_every_message_gets_its_class(name, meta, rows):
    """Each loaded row of a table, rendered into a log of its engine: diagnose gives the row's
    class (every row that does not is listed)."""
    shape = SHAPES[str(meta["engine"])]
    engine = Engine(str(meta["engine"]))
    wrong = []
    loaded = [row for row in rows if row["load"]]
    for row in loaded:
        log = "\n".join(shape(row, meta)) + "\n"
        d = diagnose_bytes(log.encode(), engine)
        got = d.failure.failure_class.value if d.failure is not None else None
        if got != row["class"]:
            wrong.append((f"{row['file']}:{row['line']}", row["template"][:80], row["class"], got))
    assert loaded
    assert wrong == []


def test_the_mapping_gives_every_row_its_class():
    """The stored classes are the mapping's now (``engine_messages.py check``; the sources
    themselves are not here, so only the mapping is checked)."""
    sys.path.insert(0, str(TOOLS))
    try:
        import engine_messages
    finally:
        sys.path.remove(str(TOOLS))
    assert engine_messages.cmd_check({}) == 0
