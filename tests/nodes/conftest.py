"""Multi-node tests: network namespaces as nodes, each with its own real sshd."""

from __future__ import annotations

import os

import pytest

from builders.netns import unavailable_reason


def require_netns() -> None:
    """Skip (fail in CI) when network namespaces with sshd cannot be made here."""
    why = unavailable_reason()
    if why is None:
        return
    if os.environ.get("BRINGUP_REQUIRE_REAL") == "1":
        pytest.fail(f"multi-node tests need network namespaces and sshd in CI: {why}")
    pytest.skip(f"multi-node tests skipped: {why}")
