"""`bringup verify` on special and hostile files: one line naming the file and the fix, exit 2
(or a finding, exit 1), never a hang, a traceback or exit 70."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bringup.adapters.hashing import hash_file
from bringup.errors import InputError

from builders.hostile import (
    dangling,
    fifo,
    run_unprivileged,
    symlink_loop,
    unix_socket,
    unreadable,
)
from builders.safetensors import shard_name, write_checkpoint


def _one_line(err: str) -> str:
    assert err.count("\n") == 1, err
    assert err.startswith("bringup: error: "), err
    assert "Traceback" not in err
    return err.removeprefix("bringup: error: ").rstrip("\n")


def test_a_fifo_named_like_a_shard_does_not_hang(tmp_path: Path, verify) -> None:
    """A folder holding a FIFO named model.safetensors used to hang for ever."""
    fifo(tmp_path / "model.safetensors")
    result = verify(tmp_path)
    assert result.code == 2
    assert _one_line(result.err) == (
        f"{tmp_path}/model.safetensors is a FIFO (named pipe), not a safetensors shard "
        "(replace it with the real shard: fetch it again)"
    )


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda p: fifo(p / "model.safetensors"), "a FIFO (named pipe)"),
        (lambda p: Path("/dev/null"), "a character device"),
    ],
)
def test_verify_a_special_file_names_what_it_is(tmp_path: Path, verify, make, kind: str) -> None:
    """`verify FIFO` and `verify /dev/null` said "cannot list: Not a directory"."""
    path = make(tmp_path)
    result = verify(path)
    assert result.code == 2
    assert _one_line(result.err) == (
        f"{path} is {kind}, not a checkpoint "
        "(give a model folder, a .safetensors file or a .gguf file)"
    )


def test_a_folder_named_like_a_shard(tmp_path: Path, verify) -> None:
    (tmp_path / "model.safetensors").mkdir()
    result = verify(tmp_path)
    assert result.code == 2
    assert _one_line(result.err).startswith(
        f"{tmp_path}/model.safetensors is a folder, not a safetensors shard"
    )


def test_a_shard_that_is_a_symlink_loop(tmp_path: Path, verify) -> None:
    write_checkpoint(tmp_path, n_shards=2)
    (tmp_path / shard_name(2, 2)).unlink()
    symlink_loop(tmp_path / shard_name(2, 2))
    result = verify(tmp_path)
    assert result.code == 2
    assert "a symlink loop (the links point at each other)" in _one_line(result.err)


def test_a_dangling_config_is_missing_and_a_fifo_config_is_named(tmp_path: Path, verify) -> None:
    write_checkpoint(tmp_path, n_shards=1)
    (tmp_path / "config.json").unlink()
    dangling(tmp_path / "config.json")
    assert ("config_missing", "config.json") in verify(tmp_path, "--json").kinds()
    (tmp_path / "config.json").unlink()
    fifo(tmp_path / "config.json")
    result = verify(tmp_path)
    assert result.code == 2
    assert _one_line(result.err).startswith(f"{tmp_path}/config.json is a FIFO (named pipe)")


def test_hash_refuses_a_socket_inside_and_survives_a_folder_loop(tmp_path: Path, verify) -> None:
    write_checkpoint(tmp_path, n_shards=1, fill=True)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "up").symlink_to("..")  # a link back up: walked once, not for ever
    assert verify(tmp_path, "--hash").code == 3  # no published digest to compare with
    with unix_socket(tmp_path / "sub" / "agent.sock"):
        result = verify(tmp_path, "--hash")
    assert result.code == 2
    assert _one_line(result.err) == (
        f"{tmp_path}/sub/agent.sock is a socket inside the checkpoint "
        "(move it out of the model folder: --hash reads every file there)"
    )


def test_a_file_that_grows_or_shrinks_while_hashed(tmp_path: Path) -> None:
    path = tmp_path / "shard.safetensors"
    path.write_bytes(b"x" * 40_000)

    def grow(n: int) -> None:
        with path.open("ab") as f:
            f.write(b"y" * 5000)

    with pytest.raises(InputError) as exc:
        hash_file(path, buffer_bytes=4096, progress=grow)
    assert str(exc.value).startswith(f"{path} changed while it was hashed: 40,000 bytes when")
    path.write_bytes(b"x" * 40_000)
    with pytest.raises(InputError) as exc:
        hash_file(path, buffer_bytes=4096, progress=lambda n: os.truncate(path, 10_000))
    assert "changed while it was hashed" in str(exc.value)


def test_manifest_that_is_a_folder(tmp_path: Path, verify) -> None:
    write_checkpoint(tmp_path / "m", n_shards=1)
    result = verify(tmp_path / "m", "--manifest", tmp_path)
    assert result.code == 2
    assert _one_line(result.err).startswith(f"{tmp_path} is a folder, not a manifest")


def test_names_with_control_characters_and_invalid_utf8(tmp_path: Path, verify) -> None:
    """The checkpoint name prints escaped on one line; the report stays right."""
    folder = Path(os.fsdecode(os.fsencode(tmp_path) + b"/bad\xff\x1b[31m\nname"))
    write_checkpoint(folder, n_shards=1)
    result = verify(folder)
    assert result.code == 0
    assert result.out.splitlines()[0] == f"checkpoint {tmp_path}/bad\\xff\\x1b[31m\\nname"
    run = run_unprivileged("verify", "--json", folder)
    assert run.code == 0, run


def test_an_unreadable_folder_or_shard_as_a_user(tmp_path: Path) -> None:
    """Without root's override: verify and plan on an unreadable folder end in one line,
    exit 2 (they ended in `internal error: PermissionError`, exit 70)."""
    model = tmp_path / "model"
    write_checkpoint(model, n_shards=2)
    with unreadable(model):
        for command in ("verify", "plan"):
            run = run_unprivileged(command, model)
            assert run.code == 2, run
            assert _one_line(run.err).startswith(f"cannot list {model}: permission denied"), run
    model.chmod(0o311)  # may enter it, may not list it
    try:
        run = run_unprivileged("verify", model)
    finally:
        model.chmod(0o755)
    assert run.code == 2, run
    assert "permission denied" in _one_line(run.err)
    with unreadable(model / shard_name(1, 2)):
        run = run_unprivileged("verify", model)
    assert run.code == 2, run
    assert _one_line(run.err).startswith(
        f"cannot read {model / shard_name(1, 2)}: permission denied"
    )
    with unreadable(tmp_path):  # a folder above it cannot be entered
        run = run_unprivileged("verify", model)
    assert run.code == 2, run
    assert "permission denied" in _one_line(run.err)
