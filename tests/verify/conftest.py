"""Run ``bringup verify`` in-process and hand back exit code, JSON and stderr."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from bringup.cli.main import Context, main


@dataclass
class Result:
    """One run of ``bringup verify``."""

    code: int
    out: str
    err: str

    @property
    def report(self) -> dict[str, Any]:
        """The --json document."""
        data: dict[str, Any] = json.loads(self.out)
        return data

    def kinds(self) -> list[tuple[str, str]]:
        """(kind, file) of every problem in the --json document."""
        return [(p["kind"], p["file"]) for p in self.report["problems"]]

    def problem(self, kind: str) -> dict[str, str]:
        """The first problem of that kind (fails when there is none)."""
        found = [p for p in self.report["problems"] if p["kind"] == kind]
        assert found, f"no {kind} in {self.kinds()}"
        return found[0]


@pytest.fixture
def verify() -> Callable[..., Result]:
    """Call ``bringup verify ARGS...`` with in-memory streams (add --json yourself)."""

    def _run(*args: object) -> Result:
        out, err = io.StringIO(), io.StringIO()
        code = main(
            ["verify", *map(str, args)], Context(stdout=out, stderr=err, environ={"NO_COLOR": "1"})
        )
        return Result(code, out.getvalue(), err.getvalue())

    return _run
