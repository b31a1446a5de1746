"""``diagnose`` of what is not a log says what it is (empty, a weights file, no text lines),
exit 2, instead of "the engine was not recognised ... ends mid-startup"; and it reads stdin
when no file is given and stdin is not a terminal."""

from __future__ import annotations

import io
import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from bringup.cli.main import Context, main

from builders.gguf import write_tiny_llama_gguf
from builders.safetensors import write_safetensors

LOG = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "vllm_0.33_port_in_use.log"


class _Pipe(io.StringIO):
    def isatty(self) -> bool:
        return False


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _run(argv: list[str], stdin: io.StringIO | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    ctx = Context(stdout=out, stderr=err, stdin=stdin or _Terminal(), environ={"NO_COLOR": "1"})
    return main(argv, ctx), out.getvalue(), err.getvalue()


def _empty(folder: Path) -> Path:
    path = folder / "empty.log"
    path.write_bytes(b"")
    return path


def _random(folder: Path) -> Path:
    path = folder / "random.bin"
    path.write_bytes(random.Random(7).randbytes(5000))
    return path


def _safetensors(folder: Path) -> Path:
    return write_safetensors(folder / "model.safetensors", {"w": ("F16", (64, 64))}, fill=True)


def _gguf(folder: Path) -> Path:
    return Path(write_tiny_llama_gguf(folder / "tiny.gguf")[0])


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (_empty, "empty file"),
        (_random, "no text lines"),
        (_safetensors, "this is a safetensors file, not a log"),
        (_gguf, "this is a GGUF file, not a log"),
    ],
    ids=["empty", "random-bytes", "safetensors", "gguf"],
)
def test_not_a_log_is_named(tmp_path: Path, make: Callable[[Path], Path], said: str) -> None:
    """One line naming what the file is, exit 2; with --json the error object."""
    path = make(tmp_path)
    code, _, err = _run(["diagnose", str(path)])
    assert code == 2
    assert f"{path}: {said}" in err
    assert "not recognised" not in err
    code, out, _ = _run(["diagnose", "--json", str(path)])
    assert json.loads(out)["error"] == f"{path}: {said}"


def test_stdin_is_read_when_it_is_not_a_terminal() -> None:
    """``bringup diagnose < log``: no ``-`` needed."""
    code, out, _ = _run(["diagnose"], _Pipe(LOG.read_text()))
    assert code == 1
    assert out.startswith("stdin: vllm")


def test_no_file_on_a_terminal_is_a_usage_error() -> None:
    """Nothing given and stdin a terminal: one line saying how, not a wait on the keyboard."""
    code, _, err = _run(["diagnose"], _Terminal())
    assert code == 2
    assert "no log given" in err


@pytest.mark.parametrize("argv", [[], ["-"], ["--json"], ["--markdown-file", "REPORT"]])
def test_empty_stdin_says_it_is_empty(tmp_path: Path, argv: list[str]) -> None:
    """``bringup diagnose < /dev/null`` (a real process, stdin the null device): one line
    saying the input is empty, exit 2 as for an empty file, not "incomplete ... ends
    mid-startup"; with --json the error object on stdout; no report is written."""
    import subprocess
    import sys

    argv = [str(tmp_path / "r.md") if a == "REPORT" else a for a in argv]
    with open("/dev/null", "rb") as null:
        done = subprocess.run(
            [sys.executable, "-m", "bringup", "diagnose", *argv],
            stdin=null,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 2
    assert "stdin: empty input" in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert "incomplete" not in done.stdout + done.stderr
    if "--json" in argv:
        assert json.loads(done.stdout)["error"] == "stdin: empty input (nothing was piped in)"
    else:
        assert done.stdout == ""
    assert not (tmp_path / "r.md").exists()


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (_random, "no text lines"),
        (_gguf, "this is a GGUF file, not a log"),
        (_empty, "empty input"),
    ],
    ids=["random-bytes", "gguf", "empty"],
)
def test_what_is_piped_in_is_named_like_a_file(
    tmp_path: Path, make: Callable[[Path], Path], said: str
) -> None:
    """Piped in, what is not a log is named as it is for a file given by path."""
    import subprocess
    import sys

    path = make(tmp_path)
    with path.open("rb") as piped:
        done = subprocess.run(
            [sys.executable, "-m", "bringup", "diagnose"],
            stdin=piped,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 2
    assert f"stdin: {said}" in done.stderr
