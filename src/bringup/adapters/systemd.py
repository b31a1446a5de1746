"""systemctl and the retry drop-in: the systemd side of ``bringup up`` and ``up --retry``.

Command line equivalents::

    systemctl [--user] show NAME --property=LoadState,ActiveState,...
    systemctl [--user] cat NAME
    systemctl [--user] start|restart --no-block NAME
    systemctl [--user] daemon-reload
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from bringup.adapters.commands import Runner, check
from bringup.adapters.sources.unit import UnitSource
from bringup.core import service
from bringup.core.systemd_unit import Word, retry_dropin_path
from bringup.errors import InputError


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

    def unit_source(self, unit: str, environ: Mapping[str, str]) -> UnitSource:
        """The unit's journal and state, to follow it."""
        return UnitSource(unit, environ, runner=self.runner, user=self.user)


def write_retry_dropin(unit_dir: Path, unit: str, text: str) -> Path:
    """Write ``NAME.service.d/bringup-retry.conf`` under ``unit_dir``; return its path."""
    path = unit_dir / retry_dropin_path(unit)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot write {path}: {exc.strerror or exc}",
            hint="run as root for a system unit, or use --user for a user unit",
        ) from exc
    return path
