"""Remote tests run against a real OpenSSH server started on 127.0.0.1."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from builders.sshd import SSHD, SshServer, running_sshd


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """A real sshd for the tests of this module."""
    if SSHD is None:
        if os.environ.get("BRINGUP_REQUIRE_REAL") == "1":
            pytest.fail("sshd is required in CI (apt-get install openssh-server)")
        pytest.skip("sshd is not installed (apt-get install openssh-server)")
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server
