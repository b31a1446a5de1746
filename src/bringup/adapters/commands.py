"""The single seam for run-to-completion commands: systemctl, journalctl (without -f),
docker inspect, nvidia-smi, and later ssh.

Code that needs a command's output takes a ``Runner``; production passes ``LocalRunner``,
tests pass ``RecordedRunner`` with the outputs recorded from a real machine::

    runner = RecordedRunner({("systemctl", "daemon-reload"): CommandResult.ok("systemctl", "daemon-reload")})
    check(runner.run(["systemctl", "daemon-reload"]))
    assert runner.calls == [("systemctl", "daemon-reload")]

Long-running, streamed commands (``journalctl -f``, ``docker logs -f``) are not run here.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from bringup.errors import AdapterError


@dataclass(frozen=True)
class CommandResult:
    """What a finished command left: its exit status and its output as text."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @classmethod
    def ok(cls, *argv: str, stdout: str = "") -> CommandResult:
        """A successful result (exit 0) with ``stdout``; handy in recorded outputs."""
        return cls(argv=tuple(argv), returncode=0, stdout=stdout, stderr="")


class Runner(Protocol):
    """Anything that runs a command to completion and returns its result."""

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_seconds: float | None = 30.0,
        input_text: str | None = None,
    ) -> CommandResult:
        """Run ``argv`` to completion; a non-zero exit is a result, not an error."""
        ...


class LocalRunner:
    """Runs commands on this machine with ``subprocess.run`` (no shell).

    ``environ``, when given, is the whole environment of the command, and its PATH is
    where the executable is looked up. A missing executable or a timeout becomes an
    ``AdapterError`` naming the command.
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self.environ = None if environ is None else dict(environ)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_seconds: float | None = 30.0,
        input_text: str | None = None,
    ) -> CommandResult:
        if not argv:
            raise AdapterError("no command to run")
        command = tuple(argv)
        executable = self._resolve(command[0])
        try:
            done = subprocess.run(
                (executable, *command[1:]),
                input=input_text,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout_seconds,
                env=self.environ,
                check=False,
                stdin=None if input_text is not None else subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            raise AdapterError(
                f"`{shlex.join(command)}` did not finish within {timeout_seconds:g}s"
            ) from exc
        except OSError as exc:
            raise AdapterError(
                f"cannot run `{shlex.join(command)}`: {exc.strerror or exc}"
            ) from exc
        return CommandResult(command, done.returncode, done.stdout, done.stderr)

    def _resolve(self, name: str) -> str:
        path = None if self.environ is None else self.environ.get("PATH", "")
        found = shutil.which(name, path=path)
        if found is None:
            raise AdapterError(
                f"cannot run `{name}`: not found on PATH",
                hint=f"install {name} or put it on PATH",
            )
        return found


Recording = CommandResult | Callable[[tuple[str, ...], str | None], CommandResult]


class RecordedRunner:
    """For tests: replays recorded results keyed by exact argv, and records every call.

    A recording is a ``CommandResult`` (its ``argv`` is replaced by the call's) or a
    callable ``(argv, input_text) -> CommandResult``. ``fallback``, when given, answers
    any argv without a recording; otherwise an unrecorded argv raises ``AdapterError``.
    """

    def __init__(
        self,
        recordings: Mapping[tuple[str, ...], Recording] | None = None,
        *,
        fallback: Recording | None = None,
    ) -> None:
        self.recordings = dict(recordings or {})
        self.fallback = fallback
        self.calls: list[tuple[str, ...]] = []
        self.inputs: list[str | None] = []

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_seconds: float | None = 30.0,
        input_text: str | None = None,
    ) -> CommandResult:
        command = tuple(argv)
        self.calls.append(command)
        self.inputs.append(input_text)
        recording = self.recordings.get(command, self.fallback)
        if recording is None:
            raise AdapterError(f"no recorded output for `{shlex.join(command)}`")
        if isinstance(recording, CommandResult):
            return CommandResult(command, recording.returncode, recording.stdout, recording.stderr)
        return recording(command, input_text)


def check(result: CommandResult) -> CommandResult:
    """Return ``result`` when it exited 0; otherwise raise one line naming the command."""
    if result.returncode == 0:
        return result
    detail = _last_line(result.stderr) or _last_line(result.stdout) or "no output"
    raise AdapterError(
        f"`{shlex.join(result.argv)}` failed with exit code {result.returncode}: {detail}"
    )


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
