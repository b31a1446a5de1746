"""Shared test setup: a clean environment for every test (no GPU, proxy or systemd leaks)."""

from __future__ import annotations

import os

import pytest

_LEAKY_PREFIXES = ("CUDA_", "VLLM_", "HF_", "NOTIFY_", "SGLANG_")
_LEAKY_NAMES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "OPENAI_API_KEY",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
    "FORCE_COLOR",
    "BRINGUP_DEBUG",
)


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep os.environ free of GPU, engine, proxy and systemd variables in every test."""
    for name in list(os.environ):
        if name.startswith(_LEAKY_PREFIXES) or name in _LEAKY_NAMES:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
