"""``ContainerSource``: a docker container, its state from ``docker inspect``, its lines from
``docker logs -f --timestamps`` (resumed from the last timestamp after a reconnect)."""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Mapping
from typing import Any

from bringup.adapters.commands import Runner, system_runner
from bringup.adapters.process import read_lines
from bringup.adapters.sources.items import Emit, ExitItem, LineItem, NoteItem
from bringup.adapters.sources.reader import ReaderCommand
from bringup.errors import AdapterError, InputError


class ContainerSource(ReaderCommand):
    """A docker container: its state from ``docker inspect``, its lines from ``docker logs -f``."""

    def __init__(
        self, name: str, environ: Mapping[str, str], *, runner: Runner | None = None
    ) -> None:
        runner = runner or system_runner(environ)
        super().__init__(environ, getattr(runner, "streaming_argv", None))
        self.name = name
        self.runner = runner
        self.description = f"container {name}"
        self.since: str | None = None  # timestamp of the last line seen
        self._seen_at_since = 0  # lines seen with exactly that timestamp
        self._inspect: dict[str, Any] = {}

    def inspect(self) -> dict[str, Any]:
        """``docker inspect NAME`` (the first object)."""
        result = self.runner.run(["docker", "inspect", self.name])
        if result.returncode != 0:
            raise InputError(
                f"no container {self.name}: {result.stderr.strip()}",
                hint="check the name with `docker ps -a`",
            )
        try:
            data = json.loads(result.stdout)
            return dict(data[0])
        except (ValueError, IndexError, KeyError, TypeError) as exc:
            raise AdapterError(f"docker inspect {self.name}: unexpected output") from exc

    def logs_argv(self) -> list[str]:
        """``docker logs -f --timestamps NAME``, from the last timestamp seen after a reconnect."""
        argv = ["docker", "logs", "-f", "--timestamps"]
        if self.since:
            argv += ["--since", self.since]
        return [*argv, self.name]

    def start(self, emit: Emit) -> None:
        self._inspect = self.inspect()
        threading.Thread(target=self._follow, args=(emit,), daemon=True, name="docker-logs").start()

    def command(self) -> list[str] | None:
        config = self._inspect.get("Config") or {}
        words = [*(config.get("Entrypoint") or []), *(config.get("Cmd") or [])]
        return [str(w) for w in words] or None

    def _follow(self, emit: Emit) -> None:
        while not self._stopped.is_set():
            popen = self._spawn(self.logs_argv())
            skip = {"n": self._seen_at_since, "ts": self.since}
            sink = functools.partial(self._line, skip=skip, emit=emit)
            readers = [
                threading.Thread(target=read_lines, args=(s, n, sink, None), daemon=True)
                for s, n in ((popen.stdout, "stdout"), (popen.stderr, "stderr"))
            ]
            for t in readers:
                t.start()
            for t in readers:
                t.join()
            popen.wait()
            if self._stopped.is_set():
                return
            state = self._state()
            if state is not None and not state.get("Running", False):
                emit(
                    ExitItem(
                        _int_or_none(state.get("ExitCode")),
                        f"container {self.name} is {state.get('Status', 'stopped')}",
                    )
                )
                return
            emit(NoteItem("docker logs ended; reconnecting from the last timestamp"))
            time.sleep(0.5)

    def _state(self) -> dict[str, Any] | None:
        try:
            return dict(self.inspect().get("State") or {})
        except (AdapterError, InputError):
            return None

    def _line(self, _stream: str, text: str, *, skip: dict[str, Any], emit: Emit) -> None:
        ts, _, message = text.partition(" ")
        with self._lock:
            if skip["ts"] is not None and ts < skip["ts"]:
                return  # delivered before the reconnect
            if ts == skip["ts"] and skip["n"] > 0:
                skip["n"] -= 1
                return
            if ts == self.since:
                self._seen_at_since += 1
            else:
                self.since, self._seen_at_since = ts, 1
        emit(LineItem("docker", message))


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
