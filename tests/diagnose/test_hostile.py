"""`bringup diagnose` on special and hostile files: one line naming the file and the fix,
exit 2, never a hang or a traceback; a file that keeps growing is read to its size at open."""

from __future__ import annotations

import io
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bringup.cli.main import Context, main

from builders.hostile import dangling, fifo, symlink_loop, unix_socket

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
HINT = "(pass a readable log file, or - to read stdin)"


def _diagnose(*args: object, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["diagnose", *map(str, args)],
        Context(stdout=out, stderr=err, stdin=io.StringIO(stdin), environ={"NO_COLOR": "1"}),
    )
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda p: fifo(p / "vllm.log"), "a FIFO (named pipe)"),
        (lambda p: Path("/dev/zero"), "a character device"),
        (lambda p: p, "a folder"),
    ],
    ids=["fifo", "dev-zero", "folder"],
)
def test_special_files_are_refused_at_once(tmp_path: Path, make, kind: str) -> None:
    """A FIFO would block, /dev/zero would never end: both are named and refused."""
    path = make(tmp_path)
    code, out, err = _diagnose(path)
    assert (code, out) == (2, "")
    if kind == "a folder":
        assert err == f"bringup: error: {path} is a folder, not a log file {HINT}\n"
    else:
        assert err == f"bringup: error: {path} is {kind}, not a log file {HINT}\n"


def test_sockets_and_links_that_lead_nowhere(tmp_path: Path) -> None:
    with unix_socket(tmp_path / "log.sock") as sock:
        code, _, err = _diagnose(sock)
    assert code == 2
    assert "is a socket or a device, not a log file" in err
    code, _, err = _diagnose(dangling(tmp_path / "gone.log"))
    assert code == 2
    assert err.startswith(f"bringup: error: {tmp_path}/gone.log is a dangling symlink (it points")
    code, _, err = _diagnose(symlink_loop(tmp_path / "loop.log"))
    assert code == 2
    assert "a symlink loop" in err


def test_an_empty_file_and_random_bytes_are_named_as_not_a_log(tmp_path: Path) -> None:
    """An empty file and random bytes are bad input, each said in one line (issue 29)."""
    (tmp_path / "empty.log").write_bytes(b"")
    code, _out, err = _diagnose(tmp_path / "empty.log")
    assert code == 2
    assert "empty file" in err
    (tmp_path / "model.safetensors").write_bytes(random.Random(5).randbytes(1 << 20))
    code, _out, err = _diagnose(tmp_path / "model.safetensors")
    assert code == 2
    assert "no text lines" in err


def test_a_name_with_control_characters_prints_escaped(tmp_path: Path) -> None:
    path = tmp_path / "bad\x1b[2Jname\n.log"
    path.write_bytes((LOGS / "vllm_0.33_port_in_use.log").read_bytes())
    code, out, _ = _diagnose(path)
    assert code == 1
    assert "\x1b" not in out
    assert "bad\\x1b[2Jname\\n.log" in out


def test_a_file_that_keeps_growing_is_read_to_its_size_at_open(tmp_path: Path) -> None:
    """A writer appending faster than anything reads cannot keep diagnose going for ever."""
    path = tmp_path / "growing.log"
    path.write_bytes((LOGS / "vllm_0.33_port_in_use.log").read_bytes())
    stop = threading.Event()

    def write() -> None:
        with path.open("ab") as f:
            while not stop.is_set():
                f.write(b"INFO 11-30 09:47:00 [loader.py:1] still loading\n" * 1000)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        code, out, err = _diagnose(path, "--json")
    finally:
        stop.set()
        writer.join()
    assert (code, err) == (1, "")
    assert '"class": "port_in_use"' in out


def test_stdin_streams_from_a_real_pipe() -> None:
    data = (LOGS / "vllm_0.33_minimax_sampler_oom.log").read_bytes()
    proc = subprocess.run(
        [sys.executable, "-m", "bringup", "diagnose", "--json", "-"],
        input=b"\0\1\2\3" * 100_000 + b"\n" + data,
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert b'"class": "cuda_oom"' in proc.stdout
