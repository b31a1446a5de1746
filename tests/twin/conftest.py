"""Fixtures for the twin tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from twin.helpers import Twin, free_port


@pytest.fixture
def start_twin(tmp_path: Path) -> Iterator[Callable[..., Twin]]:
    """Factory: start a twin on a free port with a readings file in tmp_path; killed at the end."""
    started: list[Twin] = []

    def start(*args: str, port: int | None = None, gpus_file: Path | None = None) -> Twin:
        twin = Twin(list(args), gpus_file or tmp_path / "gpus.json", port or free_port())
        started.append(twin)
        return twin

    yield start
    for twin in started:
        twin.stop()
