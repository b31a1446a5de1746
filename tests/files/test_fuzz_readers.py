"""Fuzz every file reader with hostile inputs (tests/builders/fuzz_inputs.py): a result or one
BringupError line, never another exception. bench/fuzz.py runs the same with 100,000+ each."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bringup.cli.main import Context, main
from bringup.errors import BringupError

from builders.fuzz_inputs import READERS

EXAMPLES = 60
FAST = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_reader_survives_hostile_input(reader: str) -> None:
    strategy, read = READERS[reader]
    with tempfile.TemporaryDirectory(prefix="i19-fuzz-") as scratch:

        @FAST
        @given(strategy)
        def run(example: Any) -> None:
            try:
                read(example, Path(scratch))
            except BringupError as exc:
                message = str(exc)
            else:
                message = ""
            assert "\n" not in message

        run()


COMMANDS = {
    "verify": (READERS["safetensors"][0], "model.safetensors", ["verify", "--json", "{}"]),
    "verify-gguf": (READERS["gguf"][0], "model.gguf", ["verify", "{}"]),
    "diagnose": (READERS["log"][0], "x.log", ["diagnose", "--json", "{}"]),
    "guard": (
        READERS["readings"][0],
        "gpus.json",
        ["guard", "--gpus-from", "{}", "--timeout", "0s"],
    ),
    "status": (READERS["inventory"][0], "hosts.toml", ["status", "--hosts", "{}", "--json"]),
    "plan": (READERS["checkpoint"][0], "model", ["plan", "{}", "--gpu", "H100"]),
}


@settings(
    max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
@given(st.sampled_from(sorted(COMMANDS)), st.data())
def test_commands_in_process_never_exit_70(name: str, data: st.DataObject) -> None:
    """The commands themselves, in-process, on the same inputs: never exit 70, never raise."""
    strategy, file_name, argv = COMMANDS[name]
    example = data.draw(strategy)
    with tempfile.TemporaryDirectory(prefix="i19-fuzz-") as scratch:
        path = Path(scratch) / file_name
        if isinstance(example, dict):
            path.mkdir()
            for member, content in example.items():
                (path / member).write_bytes(content)
        else:
            path.write_bytes(example)
        out, err = io.StringIO(), io.StringIO()
        args = [a.replace("{}", str(path)) for a in argv]
        code = main(
            args, Context(stdout=out, stderr=err, stdin=io.StringIO(), environ={"NO_COLOR": "1"})
        )
    assert code != 70, err.getvalue()
    assert "internal error" not in err.getvalue()
