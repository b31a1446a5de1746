"""Every command that reads (or writes) a user-given file, on special and hostile files: one
line naming the file and the fix, exit 2, never a hang, a traceback or exit 70; and never a
device node or FIFO replaced by a written file."""

from __future__ import annotations

import io
import os
import random
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from bringup.cli.main import Context, main

from builders.hostile import dangling, fifo, symlink_loop

# command line with {} for the hostile path
READERS = {
    "verify": ["verify", "{}"],
    "verify --manifest": ["verify", "{model}", "--manifest", "{}"],
    "plan": ["plan", "{}", "--gpu", "H100"],
    "plan --calibrate": ["plan", "Llama-3.1-8B", "--gpu", "H100", "--calibrate", "{}"],
    "diagnose": ["diagnose", "{}"],
    "guard --gpus-from": ["guard", "--gpus-from", "{}", "--timeout", "1s"],
    "status --hosts": ["status", "--hosts", "{}"],
    "bench --dataset": ["bench", "http://127.0.0.1:9/", "--dataset", "{}"],
    "watch --log": ["watch", "--log", "{}"],
}
WRITERS = {
    "unit --output": ["unit", "x", "--output", "{}", "--", "/bin/true"],
    "unit --env-file": ["unit", "x", "--env-file", "{}", "--", "/bin/true", "--api-key=k"],
    "verify --write-manifest": ["verify", "{model}", "--write-manifest", "{}"],
}


def _fifo(p: Path) -> Path:
    return fifo(p / "input")


def _folder(p: Path) -> Path:
    (p / "input").mkdir()
    return p / "input"


HOSTILE: dict[str, Callable[[Path], Path]] = {
    "fifo": _fifo,
    "dev-zero": lambda p: Path("/dev/zero"),
    "folder": _folder,
    "dangling": lambda p: dangling(p / "input"),
    "loop": lambda p: symlink_loop(p / "input"),
}


def _run(argv: list[str], tmp_path: Path) -> tuple[int, str]:
    from builders.safetensors import write_checkpoint

    model = tmp_path / "model"
    if "{model}" in argv:
        write_checkpoint(model, n_shards=1)
    out, err = io.StringIO(), io.StringIO()
    args = [a.replace("{model}", str(model)) for a in argv]
    code = main(
        args, Context(stdout=out, stderr=err, stdin=io.StringIO(), environ={"NO_COLOR": "1"})
    )
    return code, err.getvalue()


@pytest.mark.parametrize("hostile", sorted(HOSTILE))
@pytest.mark.parametrize("command", sorted(READERS))
def test_readers_refuse_special_files_in_one_line(
    tmp_path: Path, command: str, hostile: str
) -> None:
    path = HOSTILE[hostile](tmp_path)
    argv = [a.replace("{}", str(path)) for a in READERS[command]]
    code, err = _run(argv, tmp_path)
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert err.startswith("bringup: error: "), err
    assert "internal error" not in err
    assert str(path) in err or os.path.basename(path) in err, err


@pytest.mark.parametrize(
    "command", ["verify", "plan", "guard --gpus-from", "status --hosts", "bench --dataset"]
)
def test_readers_on_binary_garbage(tmp_path: Path, command: str) -> None:
    path = tmp_path / "garbage.json"
    path.write_bytes(random.Random(1).randbytes(300_000))
    argv = [a.replace("{}", str(path)) for a in READERS[command]]
    code, err = _run(argv, tmp_path)
    assert code == 2, err
    assert err.count("\n") == 1, err


def test_plan_calibrate_on_garbage_says_there_is_no_startup_in_it(tmp_path: Path) -> None:
    path = tmp_path / "garbage.log"
    path.write_bytes(random.Random(2).randbytes(300_000))
    code, err = _run([a.replace("{}", str(path)) for a in READERS["plan --calibrate"]], tmp_path)
    assert code == 2
    assert "no text lines" in err  # random bytes: not a log at all, said as such


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_writers_never_replace_a_device_or_a_fifo(tmp_path: Path, command: str) -> None:
    """`unit --output /dev/full` replaced the device node with a file, as root."""
    pipe = fifo(tmp_path / "pipe")
    targets = [(pipe, "a FIFO (named pipe)")]
    node = tmp_path / "node"
    if os.geteuid() == 0:  # only root makes device nodes
        os.mknod(node, 0o600 | stat.S_IFCHR, os.makedev(1, 7))  # a /dev/full of our own
        targets.append((node, "a character device"))
    for target, kind in targets:
        argv = [a.replace("{}", str(target)) for a in WRITERS[command]]
        code, err = _run(argv, tmp_path)
        assert code == 2, err
        assert f"is {kind}, not a file bringup may replace" in err
    assert stat.S_ISFIFO(pipe.lstat().st_mode)
    if os.geteuid() == 0:
        assert stat.S_ISCHR(node.lstat().st_mode)
