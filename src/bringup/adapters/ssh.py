"""Run commands on a remote host through the system ``ssh``.

The system client is used on purpose: it honours ``~/.ssh/config`` (ProxyJump, IdentityFile,
User, Port), the agent and ``known_hosts`` exactly as the user's own ``ssh`` does. Every call
shares one ControlMaster connection per host, so the many short commands bringup sends
(``systemctl show``, ``nvidia-smi``, ``head -c``) cost one handshake, not one each.

Host keys: an unknown host key is refused (``StrictHostKeyChecking=yes``) unless the user
passed ``--accept-new-host-key`` (``accept-new``: trust on first use, never a changed key).
``BatchMode=yes`` makes ssh fail instead of prompting for a password.

Command line equivalent: ``ssh -o ControlMaster=auto -o ControlPath=... user@host -- CMD``.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from bringup.adapters.commands import CommandResult, write_through
from bringup.errors import RemoteError, UsageError

_TARGET = re.compile(
    r"^(?:(?P<user>[^@\s:]+)@)?(?P<host>\[[0-9a-fA-F:.]+\]|[^@\s:\[\]]+)(?::(?P<port>\d{1,5}))?$"
)
SSH_EXIT_ERROR = 255  # ssh's own exit status for connection and authentication failures
CONFIG_VARIABLE = (
    "BRINGUP_SSH_CONFIG"  # an ssh_config file for bringup's ssh (-F), else ~/.ssh/config
)


@dataclass(frozen=True, slots=True)
class SshTarget:
    """Where to connect: ``[user@]host[:port]``, plus options tests and power users may set."""

    host: str
    user: str | None = None
    port: int | None = None
    accept_new_host_key: bool = False
    identity_file: str | None = None  # -i; None leaves it to ssh_config and the agent
    known_hosts_file: str | None = None  # UserKnownHostsFile; None uses ~/.ssh/known_hosts
    config_file: str | None = None  # -F; None uses ~/.ssh/config
    connect_timeout_seconds: int = 10
    extra_options: tuple[str, ...] = field(default=())

    @classmethod
    def parse(cls, text: str, *, accept_new_host_key: bool = False) -> SshTarget:
        """Parse ``[user@]host[:port]`` (IPv6 in brackets: ``[::1]:2222``)."""
        m = _TARGET.match(text.strip())
        if not m:
            raise UsageError(f"not a host: {text!r}", hint="use [user@]server[:port]")
        port = int(m["port"]) if m["port"] else None
        if port is not None and not 0 < port < 65536:
            raise UsageError(f"bad port in {text!r}", hint="ports are 1-65535")
        return cls(
            host=m["host"].strip("[]"),
            user=m["user"],
            port=port,
            accept_new_host_key=accept_new_host_key,
        )

    @property
    def destination(self) -> str:
        """What ssh connects to, ``user@host`` or ``host``."""
        return f"{self.user}@{self.host}" if self.user else self.host

    def __str__(self) -> str:
        port = f":{self.port}" if self.port else ""
        return f"{self.destination}{port}"


def target_from(text: str, *, accept_new_host_key: bool, environ: Mapping[str, str]) -> SshTarget:
    """The target of ``--host TEXT``; ``BRINGUP_SSH_CONFIG`` in ``environ`` names an ssh_config (-F)."""
    target = SshTarget.parse(text, accept_new_host_key=accept_new_host_key)
    config = environ.get(CONFIG_VARIABLE)
    return replace(target, config_file=config) if config else target


def _control_dir() -> str:
    path = Path(tempfile.gettempdir()) / "bringup-ssh"
    path.mkdir(mode=0o700, exist_ok=True)
    return str(path)


def ssh_argv(
    target: SshTarget,
    remote_argv: Sequence[str],
    *,
    control_dir: str | None = None,
    tty: bool = False,
) -> list[str]:
    """The local argv that runs ``remote_argv`` on ``target`` (quoted for the remote shell).

    ``tty``: force a remote terminal (``-tt``), so that closing the connection hangs up the
    remote command (SIGHUP) and a Ctrl-C byte reaches it as SIGINT.
    """
    argv = ["ssh", "-tt"] if tty else ["ssh", "-T"]
    if target.config_file:
        argv += ["-F", target.config_file]
    if target.port:
        argv += ["-p", str(target.port)]
    if target.identity_file:
        argv += ["-i", target.identity_file, "-o", "IdentitiesOnly=yes"]
    options = {
        "BatchMode": "yes",
        "StrictHostKeyChecking": "accept-new" if target.accept_new_host_key else "yes",
        "ConnectTimeout": str(target.connect_timeout_seconds),
        "ServerAliveInterval": "5",
        "ServerAliveCountMax": "3",
        "ControlMaster": "auto",
        "ControlPath": f"{control_dir or _control_dir()}/%C",
        "ControlPersist": "60",
        "LogLevel": "ERROR",
    }
    if target.known_hosts_file:
        options["UserKnownHostsFile"] = target.known_hosts_file
    for key, value in options.items():
        argv += ["-o", f"{key}={value}"]
    for option in target.extra_options:
        argv += ["-o", option]
    return [*argv, target.destination, "--", shlex.join(remote_argv)]


def explain_ssh_failure(target: SshTarget, stderr: str) -> str:
    """One line saying why ssh itself failed, from its stderr."""
    text = stderr.strip().splitlines()
    last = text[-1] if text else "no error output"
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in stderr:
        return f"{target}: the host key has CHANGED since it was recorded; refusing to connect"
    if "Host key verification failed" in stderr or "host key is known" in stderr:
        return (
            f"{target}: the host key is not known, so the connection was refused; check the key "
            "(ssh-keyscan) and add it to known_hosts, or pass --accept-new-host-key"
        )
    if "Permission denied" in stderr:
        return f"{target}: authentication failed ({last}); check the user, key and ssh-agent"
    if "Connection refused" in stderr or "timed out" in stderr or "Could not resolve" in stderr:
        return f"{target}: cannot connect ({last})"
    return f"{target}: ssh failed ({last})"


class SshRunner:
    """A command runner (same shape as ``adapters.commands.Runner``) for one remote host."""

    def __init__(self, target: SshTarget, *, control_dir: str | None = None) -> None:
        self.target = target
        self.control_dir = control_dir

    def argv(self, remote_argv: Sequence[str]) -> list[str]:
        """The local ssh argv for a remote command."""
        return ssh_argv(self.target, remote_argv, control_dir=self.control_dir)

    def streaming_argv(self, remote_argv: Sequence[str]) -> list[str]:
        """The local argv of a long-lived remote reader (``journalctl -f``, ``tail -F``)."""
        return self.argv(remote_argv)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_seconds: float | None = 30.0,
        input_text: str | None = None,
    ) -> CommandResult:
        """Run ``argv`` remotely to completion; ssh's own failures raise RemoteError."""
        local = self.argv(argv)
        try:
            proc = subprocess.run(
                local,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout_seconds,
                input=input_text,
                check=False,
                stdin=subprocess.DEVNULL if input_text is None else None,
            )
        except FileNotFoundError as exc:
            raise RemoteError(
                "the `ssh` client is not installed here", hint="install openssh-client"
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise RemoteError(
                f"{self.target}: `{shlex.join(argv)}` did not finish within {timeout_seconds:.0f}s"
            ) from exc
        if proc.returncode == SSH_EXIT_ERROR and _looks_like_ssh_error(proc.stderr):
            raise RemoteError(explain_ssh_failure(self.target, proc.stderr))
        return CommandResult(tuple(argv), proc.returncode, proc.stdout, proc.stderr)

    def write_file(self, path: str, text: str, *, private: bool = False) -> None:
        """Write a file on the host (through ``sh`` there)."""
        write_through(self, path, text, private=private)

    def check(
        self,
        argv: Sequence[str],
        *,
        timeout_seconds: float | None = 30.0,
        input_text: str | None = None,
    ) -> CommandResult:
        """Run and raise RemoteError (naming host and command) on a non-zero exit."""
        result = self.run(argv, timeout_seconds=timeout_seconds, input_text=input_text)
        if result.returncode != 0:
            detail = (result.stderr.strip().splitlines() or ["no error output"])[-1]
            raise RemoteError(
                f"{self.target}: `{shlex.join(argv)}` exited with {result.returncode}: {detail}"
            )
        return result


def _looks_like_ssh_error(stderr: str) -> bool:
    markers = (
        "ssh:",
        "Host key",
        "Permission denied",
        "Connection",
        "host key",
        "kex_exchange",
        "Could not resolve",
        "HOST IDENTIFICATION",
        "No ED25519",
        "known_hosts",
        "unix_listener",
        "mux_client",
        "ControlPath",
        "ControlSocket",
    )
    return any(m in stderr for m in markers)
