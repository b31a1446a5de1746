"""Remote tests run against a real OpenSSH server started on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from builders.sshd import SshServer, running_sshd


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """A real sshd for the tests of this module."""
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server
