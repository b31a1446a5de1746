"""The command-runner seam: real subprocesses, and recorded outputs for tests."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from bringup.adapters.commands import CommandResult, LocalRunner, RecordedRunner, check
from bringup.errors import AdapterError


def test_local_runner_captures_output_and_exit_status() -> None:
    """stdout, stderr and the exit status come back; a non-zero exit is a result."""
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    result = LocalRunner().run([sys.executable, "-c", code])
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert result.argv == (sys.executable, "-c", code)


def test_local_runner_feeds_input() -> None:
    """input_text reaches the command's stdin."""
    result = LocalRunner().run(
        [sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"], input_text="hi"
    )
    assert result.stdout == "HI\n"


def test_missing_executable_names_the_command() -> None:
    """An executable that does not exist is an AdapterError naming it."""
    with pytest.raises(AdapterError, match="cannot run `no-such-tool-xyz`: not found on PATH"):
        LocalRunner().run(["no-such-tool-xyz", "--version"])


def test_timeout_names_the_command() -> None:
    """A command past its timeout is killed and reported as an AdapterError."""
    with pytest.raises(AdapterError, match=r"did not finish within 0\.2s"):
        LocalRunner().run(
            [sys.executable, "-c", "import time; time.sleep(30)"], timeout_seconds=0.2
        )


def test_environ_path_is_used_to_find_the_executable(tmp_path: Path) -> None:
    """With an environment given, its PATH decides which executable runs."""
    tool = tmp_path / "systemctl"
    tool.write_text(f"#!{sys.executable}\nimport sys; print('fake', *sys.argv[1:])\n")
    tool.chmod(0o755)
    result = LocalRunner({"PATH": f"{tmp_path}{os.pathsep}/usr/bin"}).run(
        ["systemctl", "daemon-reload"]
    )
    assert result.stdout == "fake daemon-reload\n"


def test_recorded_runner_replays_and_records() -> None:
    """Exact argv replays its recording, a callable computes one, and every call is kept."""
    runner = RecordedRunner(
        {
            ("systemctl", "is-active", "x"): CommandResult(("systemctl",), 3, "inactive\n", ""),
            ("cat",): lambda argv, text: CommandResult(argv, 0, text or "", ""),
        }
    )
    assert runner.run(["systemctl", "is-active", "x"]).stdout == "inactive\n"
    assert runner.run(["cat"], input_text="abc").stdout == "abc"
    with pytest.raises(AdapterError, match="no recorded output for `systemctl start x`"):
        runner.run(["systemctl", "start", "x"])
    assert runner.calls == [("systemctl", "is-active", "x"), ("cat",), ("systemctl", "start", "x")]


def test_check_raises_one_line_with_stderr() -> None:
    """check() passes exit 0 through and turns a failure into one line with the reason."""
    ok = CommandResult.ok("systemctl", "daemon-reload")
    assert check(ok) is ok
    failed = CommandResult(
        ("systemctl", "daemon-reload"), 1, "", "Failed to reload daemon: Access denied\n"
    )
    with pytest.raises(AdapterError) as info:
        check(failed)
    assert (
        str(info.value)
        == "`systemctl daemon-reload` failed with exit code 1: Failed to reload daemon: Access denied"
    )
