"""systemctl and the retry drop-in: the systemd side of ``bringup up`` and ``up --retry``.

Command line equivalents::

    systemctl [--user] show NAME --property=LoadState,ActiveState,...
    systemctl [--user] cat NAME
    systemctl [--user] start|restart --no-block NAME
    systemctl [--user] daemon-reload
    systemctl [--user] show NAME --property=ExecStart,DropInPaths
    cat /proc/MAINPID/cmdline
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from bringup.adapters.commands import Runner, check, write_local
from bringup.adapters.sources.unit import UnitSource
from bringup.core import engine_args, service
from bringup.core.endpoint import expand_references, server_api_key
from bringup.core.systemd_unit import Word, retry_dropin_path


class Systemctl:
    """One service manager: the system's, or with ``user`` the user's (``systemctl --user``)."""

    def __init__(self, runner: Runner, *, user: bool = False) -> None:
        self.runner = runner
        self.user = user

    @property
    def name(self) -> str:
        """``systemctl`` or ``systemctl --user``, for messages."""
        return "systemctl --user" if self.user else "systemctl"

    def argv(self, *args: str) -> list[str]:
        return ["systemctl", *(["--user"] if self.user else []), *args]

    def show(self, unit: str) -> dict[str, str]:
        """``systemctl show NAME`` with the properties ``status`` and ``up`` read."""
        result = check(
            self.runner.run(
                self.argv("show", unit, "--property=" + ",".join(service.SHOW_PROPERTIES))
            )
        )
        return service.parse_show(result.stdout)

    def exec_start(self, unit: str) -> tuple[Word, ...] | None:
        """The unit's ``ExecStart=`` words, from ``systemctl cat`` (else ``show -p ExecStart``)."""
        cat = self.runner.run(self.argv("cat", unit))
        words = service.exec_start_from_cat(cat.stdout) if cat.returncode == 0 else None
        if words is None:
            words = service.exec_start_from_show(self.show(unit).get("ExecStart", ""))
        return tuple(words) if words else None

    def start(self, unit: str, *, restart: bool = False) -> None:
        """``systemctl start|restart --no-block NAME``."""
        check(self.runner.run(self.argv("restart" if restart else "start", "--no-block", unit)))

    def daemon_reload(self) -> None:
        check(self.runner.run(self.argv("daemon-reload")))

    def loaded(self, unit: str) -> tuple[tuple[Word, ...] | None, tuple[str, ...]]:
        """What the manager has loaded now: the ``ExecStart=`` words it will run and its
        ``DropInPaths`` (``systemctl show NAME -p ExecStart,DropInPaths``)."""
        props = service.parse_show(
            check(
                self.runner.run(self.argv("show", unit, "--property=ExecStart,DropInPaths"))
            ).stdout
        )
        words = service.exec_start_from_show(props.get("ExecStart", ""))
        return words, tuple(props.get("DropInPaths", "").split())

    def environment(self, unit: str) -> dict[str, str]:
        """The unit's environment as its processes get it: ``Environment=``, then each
        ``EnvironmentFile=`` (read where the manager runs; one that cannot be read is
        skipped, as systemd does for ``-`` files)."""
        result = check(
            self.runner.run(self.argv("show", unit, "--property=Environment,EnvironmentFiles"))
        )
        env: dict[str, str] = {}
        files: list[str] = []
        for line in result.stdout.splitlines():
            key, _, value = line.partition("=")
            if key == "Environment":
                env.update(service.parse_environment(value))
            elif key == "EnvironmentFiles" and value.strip():
                files.append(value.split(" (", 1)[0].strip())
        for path in files:
            text = self.runner.run(["cat", path])
            if text.returncode == 0:
                env.update(service.parse_environment(text.stdout))
        return env

    def server_identity(self, unit: str, argv: list[str]) -> tuple[str | None, str | None]:
        """The API key and the served model name of the server the unit runs: its command
        line with ``${NAME}`` filled in from the unit's environment (its EnvironmentFile=
        holds the secrets ``bringup unit`` moved out), then ``--api-key`` or VLLM_API_KEY,
        and ``--served-model-name``."""
        env = self.environment(unit)
        words = expand_references(argv, env)
        return server_api_key(words, env), engine_args.get_flag(words, "--served-model-name")

    def unit_model(self, unit: str, words: tuple[Word, ...]) -> str | None:
        """The model the unit names for a server that loads it at the first request: its
        ``bringup run --model`` (``${NAME}`` from its environment), or an ``ollama pull|run
        NAME`` in ExecStartPre=/ExecStartPost= (``service.unit_model``)."""
        props = service.parse_show(
            check(
                self.runner.run(self.argv("show", unit, "--property=ExecStartPre,ExecStartPost"))
            ).stdout
        )
        others = [
            argv
            for key in ("ExecStartPre", "ExecStartPost")
            for argv in service.commands_from_show(props.get(key, ""))
        ]
        return service.unit_model(words, self.environment(unit), others)

    def cmdline(self, pid: int) -> list[str] | None:
        """A process's argument line, where the manager runs it (None when it is gone)."""
        result = self.runner.run(["cat", f"/proc/{pid}/cmdline"])
        if result.returncode != 0 or not result.stdout:
            return None
        return result.stdout.rstrip("\0").split("\0")

    def unit_source(self, unit: str, environ: Mapping[str, str]) -> UnitSource:
        """The unit's journal and state, to follow it."""
        return UnitSource(unit, environ, runner=self.runner, user=self.user)


def write_retry_dropin(unit_dir: Path, unit: str, text: str, runner: Runner | None = None) -> Path:
    """Write ``NAME.service.d/bringup-retry.conf`` under ``unit_dir``; return its path.

    Through ``runner`` (where its manager reads: this machine, a prefix, a host) when given,
    else on this machine (``--root DIR``)."""
    path = unit_dir / retry_dropin_path(unit)
    if runner is not None:
        runner.write_file(str(path), text)
    else:
        write_local(str(path), text)
    return path
