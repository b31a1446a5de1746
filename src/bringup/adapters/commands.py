"""The single seam for run-to-completion commands: systemctl, journalctl (without -f),
docker inspect, nvidia-smi, and later ssh.

Code that needs a command's output takes a ``Runner``; production passes ``LocalRunner``,
tests pass ``RecordedRunner`` with the outputs recorded from a real machine::

    runner = RecordedRunner({("systemctl", "daemon-reload"): CommandResult.ok("systemctl", "daemon-reload")})
    check(runner.run(["systemctl", "daemon-reload"]))
    assert runner.calls == [("systemctl", "daemon-reload")]

Long-running, streamed commands (``journalctl -f``, ``docker logs -f``) are not run here;
a runner's ``streaming_argv`` says how to run them where its commands run.

``BRINGUP_COMMAND_PREFIX`` (words, shell syntax) goes before every system command bringup
runs on this machine (systemctl, journalctl, docker, nvidia-smi): ``system_runner`` reads it.
Set it to reach a service manager in other namespaces or a container, e.g.
``BRINGUP_COMMAND_PREFIX="nsenter -t 4242 -m -u -i -p -C"``. Files for the manager (a unit,
its drop-ins) are written through the runner too (``write_file``), so they land where that
manager reads them.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import stat
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from bringup.errors import AdapterError, InputError, UsageError


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

    def write_file(self, path: str, text: str, *, private: bool = False) -> None:
        """Write ``text`` to ``path`` where the commands run (mode 0600 when ``private``,
        else 0644), creating its folder; an ``AdapterError`` or ``InputError`` says why not."""
        ...


PREFIX_VARIABLE = "BRINGUP_COMMAND_PREFIX"


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

    def write_file(self, path: str, text: str, *, private: bool = False) -> None:
        write_local(path, text, private=private)

    def _resolve(self, name: str) -> str:
        path = None if self.environ is None else self.environ.get("PATH", "")
        found = shutil.which(name, path=path)
        if found is None:
            raise AdapterError(
                f"cannot run `{name}`: not found on PATH",
                hint=f"install {name} or put it on PATH",
            )
        return found


def write_local(
    path: str,
    text: str,
    *,
    private: bool = False,
    hint: str = "run as root for a system unit, or use --user for a user unit",
) -> None:
    """Write ``text`` to ``path`` on this machine, mode 0600 (``private``) or 0644, whatever
    the file's mode was before; the folder is created. The file is replaced in one step."""
    mode = 0o600 if private else 0o644
    check_writable_target(path)
    folder = os.path.dirname(os.path.abspath(path))
    temporary = os.path.join(folder, f".{os.path.basename(path)}.bringup-{os.getpid()}")
    try:
        os.makedirs(folder, exist_ok=True)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), mode)
            f.write(text)
        os.replace(temporary, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise InputError(f"cannot write {path}: {exc.strerror or exc}", hint=hint) from exc


def check_writable_target(path: str) -> None:
    """Refuse to replace anything but a regular file (or a link): writing a unit over
    /dev/full or a FIFO would replace the device node or the pipe with a file."""
    from bringup.adapters import files

    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        raise files.error(exc, path) from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(
            f"{files.shown(path)} is {files.kind_of(st.st_mode)}, not a file bringup may replace",
            hint="give the path of a new or regular file",
        )


# $1 the path, $2 the mode: the text on stdin, replaced in one step
_WRITE = 'd=$(dirname "$1") && mkdir -p "$d" && t="$d/.bringup-write.$$" && umask 077 && cat >"$t" && chmod "$2" "$t" && mv -f "$t" "$1" || { rm -f "$t"; exit 1; }'


class PrefixRunner(LocalRunner):
    """Runs every command behind a prefix (``nsenter -t PID -m -u -i -p -C``, ``chroot DIR``):
    the commands, the streamed readers and the files all reach the prefixed machine."""

    def __init__(self, prefix: Sequence[str], environ: Mapping[str, str] | None = None) -> None:
        super().__init__(environ)
        if not prefix:
            raise AdapterError("an empty command prefix")
        self.prefix = tuple(prefix)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_seconds: float | None = 30.0,
        input_text: str | None = None,
    ) -> CommandResult:
        if not argv:
            raise AdapterError("no command to run")
        done = super().run(
            [*self.prefix, *argv], timeout_seconds=timeout_seconds, input_text=input_text
        )
        return CommandResult(tuple(argv), done.returncode, done.stdout, done.stderr)

    def streaming_argv(self, argv: Sequence[str]) -> list[str]:
        """The local argv of a long-lived reader (``journalctl -f``) behind the prefix."""
        return [*self.prefix, *argv]

    def write_file(self, path: str, text: str, *, private: bool = False) -> None:
        write_through(self, path, text, private=private)


def write_through(runner: Runner, path: str, text: str, *, private: bool = False) -> None:
    """Write a file with a shell command run by ``runner`` (the text goes on stdin)."""
    mode = "600" if private else "644"
    result = runner.run(["sh", "-c", _WRITE, "sh", path, mode], input_text=text)
    if result.returncode != 0:
        detail = _last_line(result.stderr) or f"exit code {result.returncode}"
        raise InputError(
            f"cannot write {path}: {detail}",
            hint="run as root for a system unit, or use --user for a user unit",
        )


def system_runner(environ: Mapping[str, str]) -> Runner:
    """The runner for this machine's system commands: ``BRINGUP_COMMAND_PREFIX`` honoured."""
    text = environ.get(PREFIX_VARIABLE, "").strip()
    if not text:
        return LocalRunner(environ)
    try:
        prefix = shlex.split(text)
    except ValueError as exc:
        raise UsageError(
            f"{PREFIX_VARIABLE}: cannot split {text!r} into words ({exc})",
            hint="quote it as a shell would, e.g. nsenter -t 4242 -m -u -i -p -C",
        ) from exc
    return PrefixRunner(prefix, environ)


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

    def write_file(self, path: str, text: str, *, private: bool = False) -> None:
        """Recorded as a ``("write", path)`` call, and written on this machine."""
        self.calls.append(("write", path))
        self.inputs.append(text)
        write_local(path, text, private=private)


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
