"""adapters/files: every kind of hostile path gives one InputError line, never a hang."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bringup.adapters import files
from bringup.errors import InputError

from builders.hostile import dangling, fifo, run_unprivileged, symlink_loop, unix_socket, unreadable


def _message(exc: pytest.ExceptionInfo[InputError]) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    """Opening a FIFO nobody writes to would block for ever; it is named and refused."""
    path = fifo(tmp_path / "model.safetensors")
    with pytest.raises(InputError) as exc:
        files.open_file(path, what="log file")
    assert _message(exc).startswith(f"{path} is a FIFO (named pipe), not a log file")


def test_a_socket_and_a_device_are_refused(tmp_path: Path) -> None:
    with unix_socket(tmp_path / "s.sock") as sock, pytest.raises(InputError) as exc:
        files.open_file(sock, what="log file")
    assert "is a socket or a device, not a log file" in _message(exc)
    with pytest.raises(InputError) as exc:
        files.read_bytes("/dev/zero", limit=10, what="config.json")
    assert _message(exc).startswith("/dev/zero is a character device, not a config.json")


def test_links_that_lead_nowhere(tmp_path: Path) -> None:
    """A dangling link names its target; a loop says it is a loop."""
    with pytest.raises(InputError) as exc:
        files.open_file(dangling(tmp_path / "a.log"))
    assert _message(exc).startswith(f"{tmp_path / 'a.log'} is a dangling symlink (it points to")
    with pytest.raises(InputError) as exc:
        files.check_path(symlink_loop(tmp_path / "b.log"))
    assert "a symlink loop" in _message(exc)


def test_folder_for_a_file_and_file_for_a_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        files.read_text(tmp_path, limit=100, what="GPU readings file")
    assert _message(exc).startswith(f"{tmp_path} is a folder, not a GPU readings file")
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError) as exc:
        files.list_folder(tmp_path / "f", what="model folder")
    assert _message(exc).startswith(f"{tmp_path / 'f'} is a regular file, not a folder")
    with pytest.raises(InputError) as exc:
        files.check_path(tmp_path / "f" / "config.json")
    assert "part of the path is a file, not a folder" in _message(exc)


def test_missing_and_too_large(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        files.read_bytes(tmp_path / "nope.json", limit=10, what="config.json")
    assert _message(exc) == f"no such config.json: {tmp_path / 'nope.json'} (check the path)"
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2048)
    with pytest.raises(InputError) as exc:
        files.read_json(big, limit=1024, what="config.json")
    assert "is larger than 1 KiB, too large for a config.json" in _message(exc)
    with pytest.raises(InputError) as exc:
        files.read_json(big, limit=4096, what="config.json")
    assert "is not valid JSON: Expecting value at line 1 column 2049" in _message(exc)


def test_bad_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{\n  "a": 1,\n  oops\n}')
    with pytest.raises(InputError) as exc:
        files.read_json(path, limit=1024, what="config.json")
    assert (
        "is not valid JSON: Expecting property name enclosed in double quotes at line 3 column 3"
        in _message(exc)
    )
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError) as exc:
        files.read_json(path, limit=1 << 20, what="config.json")
    assert "nested too deeply" in _message(exc)


def test_names_with_control_characters_and_invalid_utf8_print_on_one_line(tmp_path: Path) -> None:
    raw = os.fsencode(tmp_path) + b"/bad\xff\x1b[31mname\nx.log"
    path = os.fsdecode(raw)
    assert files.shown(path) == f"{tmp_path}/bad\\xff\\x1b[31mname\\nx.log"
    assert files.shown("plain ünïcode.log") == "plain ünïcode.log"
    assert files.shown("rtl\u202eoverride") == "rtl\\u202eoverride"
    with pytest.raises(InputError) as exc:
        files.open_file(path)
    assert (
        _message(exc) == f"no such file: {tmp_path}/bad\\xff\\x1b[31mname\\nx.log (check the path)"
    )


def test_iter_blocks_streams_in_fixed_pieces(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 25)
    with files.open_file(path) as f:
        assert [len(b) for b in files.iter_blocks(f, path=path, block_bytes=10)] == [10, 10, 5]


def test_unreadable_file_and_folder_as_a_user(tmp_path: Path) -> None:
    """Without root's override, a mode-000 file or folder is one line and exit 2."""
    log = tmp_path / "vllm.log"
    log.write_text("INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.11.0\n")
    with unreadable(log):
        run = run_unprivileged("diagnose", log)
    assert run.code == 2, run
    if os.geteuid() == 0:  # root, its file capabilities dropped by setpriv: the hint says so
        assert run.err == (
            f"bringup: error: cannot read {log}: permission denied (bringup runs as root but "
            "without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (dropped by setpriv, capsh, a "
            "container or a unit's CapabilityBoundingSet=), so file modes apply to it as to any "
            "user: `chmod a+r` on the file and `chmod a+x` on the folders above it, or give it "
            "CAP_DAC_READ_SEARCH (AmbientCapabilities= in a unit))\n"
        )
    else:
        assert "make it readable for this user" in run.err
    with unreadable(tmp_path):
        run = run_unprivileged("diagnose", log)
    assert run.code == 2, run
    assert "permission denied" in run.err
    assert "Traceback" not in run.err


def test_permission_hint_fits_who_reads(monkeypatch) -> None:
    """A user is told to chmod; root without the DAC capabilities is told they were dropped;
    root with them was refused by something else (NFS root_squash, an LSM), not by modes."""
    from bringup.adapters import files as f

    monkeypatch.setattr(f.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(f, "_user", lambda: "ops")
    assert f._permission_hint().startswith("make it readable for this user (ops)")
    monkeypatch.setattr(f.os, "geteuid", lambda: 0)
    monkeypatch.setattr(f, "_effective_caps", lambda: 0x1FF & ~0b110)
    assert "without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH" in f._permission_hint()
    monkeypatch.setattr(f, "_effective_caps", lambda: 0x1FF)
    assert "root_squash" in f._permission_hint()
    monkeypatch.setattr(f, "_effective_caps", lambda: None)
    assert "without its capabilities" in f._permission_hint()


def test_effective_caps_are_read_from_proc() -> None:
    from bringup.adapters import files as f

    caps = f._effective_caps()
    assert caps is None or caps >= 0
    if os.geteuid() == 0 and caps is not None:
        assert caps >> 1 & 1  # this test process (root) keeps CAP_DAC_OVERRIDE


def test_readinto_of_reads_to_the_limit_and_no_further(tmp_path: Path) -> None:
    path = tmp_path / "f.log"
    path.write_bytes(b"0123456789" * 3)
    with path.open("rb") as f:
        readinto = files.readinto_of(f, path=path, limit=25)
        buf = bytearray(20)
        with memoryview(buf) as view:
            assert readinto(view) == 20
            assert readinto(view) == 5  # the limit, though the file holds more
            assert readinto(view) == 0
    assert bytes(buf[:5]) == b"01234"
