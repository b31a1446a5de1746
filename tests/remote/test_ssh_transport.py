"""The ssh transport against a real OpenSSH server on 127.0.0.1."""

from __future__ import annotations

import tempfile

import pytest

from bringup.adapters.ssh import SshRunner, SshTarget, ssh_argv
from bringup.errors import RemoteError, UsageError

from builders.sshd import SshServer, target_for


@pytest.mark.parametrize(
    ("text", "user", "host", "port"),
    [
        ("gpu1", None, "gpu1", None),
        ("root@gpu1:2222", "root", "gpu1", 2222),
        ("ops@[::1]:22", "ops", "::1", 22),
        ("10.0.0.5", None, "10.0.0.5", None),
    ],
)
def test_parse_target(text: str, user: str | None, host: str, port: int | None) -> None:
    """[user@]host[:port] parses into its parts."""
    t = SshTarget.parse(text)
    assert (t.user, t.host, t.port) == (user, host, port)


@pytest.mark.parametrize("text", ["", "a b", "user@", "host:99999"])
def test_parse_bad_target(text: str) -> None:
    """A malformed host is a usage error."""
    with pytest.raises(UsageError):
        SshTarget.parse(text)


def test_argv_is_strict_by_default() -> None:
    """Unknown host keys are refused unless the user opted in; the remote command is quoted."""
    argv = ssh_argv(SshTarget.parse("gpu1"), ["cat", "/tmp/a b"], control_dir="/tmp/x")
    assert "StrictHostKeyChecking=yes" in argv
    assert argv[-1] == "cat '/tmp/a b'"
    assert "StrictHostKeyChecking=accept-new" in ssh_argv(
        SshTarget.parse("gpu1", accept_new_host_key=True), ["true"], control_dir="/tmp/x"
    )


def test_remote_command_runs(sshd: SshServer) -> None:
    """A remote command's output and exit status come back."""
    runner = SshRunner(target_for(sshd))
    result = runner.run(["sh", "-c", "echo hello; exit 3"])
    assert result.stdout == "hello\n"
    assert result.returncode == 3


def test_remote_failure_names_host_and_command(sshd: SshServer) -> None:
    """A failing remote command becomes one line naming the host and the command."""
    runner = SshRunner(target_for(sshd))
    with pytest.raises(RemoteError) as info:
        runner.check(["ls", "/definitely/not/here"])
    message = str(info.value)
    assert f"127.0.0.1:{sshd.port}" in message
    assert "ls /definitely/not/here" in message
    assert "\n" not in message


def test_unknown_host_key_is_refused(sshd: SshServer) -> None:
    """An unknown host key is refused with a message that says how to proceed."""
    fresh = tempfile.mkdtemp(prefix="bu", dir="/tmp")  # no shared master: a new handshake
    runner = SshRunner(target_for(sshd, known=False), control_dir=fresh)
    with pytest.raises(RemoteError) as info:
        runner.run(["true"])
    assert "host key is not known" in str(info.value)
    assert "--accept-new-host-key" in str(info.value)
