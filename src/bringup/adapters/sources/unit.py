"""``UnitSource``: a systemd unit, its state from ``systemctl show``, its lines from the journal."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping

from bringup.adapters.commands import Runner, system_runner
from bringup.adapters.sources.items import Emit, ExitItem, LineItem, NoteItem
from bringup.adapters.sources.reader import (
    RECONNECT_ATTEMPTS,
    ReaderCommand,
    reconnect_delay_seconds,
)
from bringup.core import service
from bringup.core.journal import journal_message, unit_exit_code
from bringup.errors import AdapterError, InputError

NEXT_RUN_POLL_SECONDS = 0.2  # how often the end of an auto-restart wait is looked for


class UnitSource(ReaderCommand):
    """A systemd unit (with ``user``, a unit of the user's manager): its state from
    ``systemctl show``, its lines from the journal of its current invocation."""

    PROPERTIES = (
        "ActiveState,SubState,MainPID,InvocationID,ExecMainStatus,ExecMainCode,LoadState,ExecStart,"
        "ExecStartPre,ExecStartPost,Environment"
    )

    def __init__(
        self,
        unit: str,
        environ: Mapping[str, str],
        *,
        runner: Runner | None = None,
        poll_seconds: float = 1.0,
        user: bool = False,
    ) -> None:
        runner = runner or system_runner(environ)
        super().__init__(environ, getattr(runner, "streaming_argv", None))
        self.unit = unit
        self.runner = runner
        self.poll_seconds = poll_seconds
        self.user = user
        self.description = f"unit {unit}"
        self.cursor: str | None = None
        self.invocation = ""
        self._state: dict[str, str] = {}

    def show(self) -> dict[str, str]:
        """``systemctl [--user] show NAME -p ...`` as a dict."""
        systemctl = ["systemctl", "--user"] if self.user else ["systemctl"]
        result = self.runner.run([*systemctl, "show", self.unit, f"--property={self.PROPERTIES}"])
        if result.returncode != 0:
            raise AdapterError(
                f"{' '.join(systemctl)} show {self.unit} failed: {result.stderr.strip() or result.returncode}"
            )
        if self.user:
            return service.parse_show(result.stdout)
        return dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)

    def journal_argv(self) -> list[str]:
        """The journalctl command for the current invocation, resuming after the cursor."""
        which = ["--user-unit", self.unit] if self.user else ["-u", self.unit]
        argv = ["journalctl", *which, "-o", "json", "-f", "--no-tail"]
        if self.invocation:
            argv.append(f"_SYSTEMD_INVOCATION_ID={self.invocation}")
        if self.cursor:
            argv += ["--after-cursor", self.cursor]
        return argv

    def start(self, emit: Emit) -> None:
        self._state = self.show()
        if self._state.get("LoadState") == "not-found":
            raise InputError(
                f"unit {self.unit} not found", hint="check the name with `systemctl list-units`"
            )
        self.invocation = self._state.get("InvocationID", "")
        if not self.invocation and self._state.get("ActiveState") == "inactive":
            raise InputError(
                f"unit {self.unit} is not running",
                hint=f"start it: `systemctl start {self.unit}` or `bringup up {self.unit}`",
            )
        if self._state.get("SubState") == "auto-restart":
            # the invocation systemd still shows is the run that ended: follow the next one
            emit(
                NoteItem(
                    f"unit {self.unit} is waiting to restart after a failed run: following its next run"
                )
            )
            threading.Thread(
                target=self._next_run, args=(emit,), daemon=True, name="unit-next-run"
            ).start()
            return
        self._follow(emit)

    def _follow(self, emit: Emit) -> None:
        threading.Thread(
            target=self._read_journal, args=(emit,), daemon=True, name="journal"
        ).start()
        threading.Thread(
            target=self._poll_state, args=(emit,), daemon=True, name="unit-state"
        ).start()

    def _next_run(self, emit: Emit) -> None:
        """Wait out ``auto-restart``: the next invocation is followed from its first line;
        when systemd gives up instead (start limit, a stop), the run that ended is the answer."""
        ended = self.invocation
        while not self._stopped.wait(NEXT_RUN_POLL_SECONDS):
            try:
                state = self.show()
            except AdapterError as exc:
                emit(NoteItem(str(exc)))
                continue
            if state.get("InvocationID", "") != ended or state.get("SubState") != "auto-restart":
                if state.get("InvocationID", "") != ended and state.get("InvocationID"):
                    self._state = state
                    self.invocation = state["InvocationID"]
                self._follow(emit)
                return

    def command(self) -> list[str] | None:
        """The server command of the unit: after ``bringup run ... --`` when it wraps one, so
        the probes go to that command's --host/--port."""
        words = service.exec_start_from_show(self._state.get("ExecStart", ""))
        return None if words is None else service.server_argv(words)

    def environment(self) -> dict[str, str]:
        """The unit's ``Environment=``, as its server gets it (OLLAMA_HOST, say)."""
        return service.parse_environment(self._state.get("Environment", ""))

    def model(self) -> str | None:
        """The model the unit names for a server that loads it at the first request (its
        ``bringup run --model``, or an ``ollama pull|run NAME`` it runs), else None."""
        words = service.exec_start_from_show(self._state.get("ExecStart", ""))
        env = self.environment()
        others = [
            argv
            for key in ("ExecStartPre", "ExecStartPost")
            for argv in service.commands_from_show(self._state.get(key, ""))
        ]
        return service.unit_model(words, env, others)

    def _read_journal(self, emit: Emit) -> None:
        failures = 0
        while not self._stopped.is_set():
            popen = self._spawn(self.journal_argv())
            assert popen.stdout is not None
            before = self.cursor
            for raw in iter(popen.stdout.readline, b""):
                self._entry(raw, emit)
            popen.wait()
            failures = 1 if self.cursor != before else failures + 1
            if failures > RECONNECT_ATTEMPTS:
                emit(
                    ExitItem(
                        None,
                        f"the journal of {self.unit} could not be read {RECONNECT_ATTEMPTS} times in a row (status {popen.returncode}); giving up",
                    )
                )
                return
            if self._stopped.wait(reconnect_delay_seconds(failures)):
                return
            emit(
                NoteItem(
                    f"journalctl ended (status {popen.returncode}); reconnected, resuming after the last entry"
                )
            )

    def _entry(self, raw: bytes, emit: Emit) -> None:
        try:
            entry = json.loads(raw)
        except ValueError:
            return
        if not isinstance(entry, dict):
            return
        self.cursor = entry.get("__CURSOR", self.cursor)
        message = journal_message(entry.get("MESSAGE"))
        if message is not None:
            for line in message.split("\n"):
                if not service.is_own_line(line):  # bringup run's own report: said by us, once
                    emit(LineItem("journal", line.removesuffix("\r")))

    def _poll_state(self, emit: Emit) -> None:
        while not self._stopped.wait(self.poll_seconds):
            try:
                state = self.show()
            except AdapterError as exc:
                emit(NoteItem(str(exc)))
                continue
            restarted = state.get("InvocationID", "") != self.invocation
            ended = (
                state.get("ActiveState") in ("failed", "inactive")
                or state.get("SubState") == "auto-restart"  # the run ended; Restart= waits
                or restarted
            )
            if ended:
                self._stopped.wait(self.poll_seconds)  # let the journal deliver the last lines
                if restarted:  # ExecMain* are the next run's now: the ended run's are gone
                    code, said = None, "ended; systemd has started its next run"
                else:
                    code = unit_exit_code(state)
                    said = f"is {state.get('ActiveState', '?')}/{state.get('SubState', '?')}"
                emit(ExitItem(code, f"unit {self.unit} {said}"))
                return
