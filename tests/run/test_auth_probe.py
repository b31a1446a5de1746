"""A server started with an API key: bringup's probes carry it (from the command line, the
unit's environment file) and a 401/403 is an authentication failure at once, never a stall."""

from __future__ import annotations

import pytest

from bringup.core.endpoint import expand_references, server_api_key
from bringup.core.probes import ProbeKind, ProbeObservation
from bringup.core.service import parse_environment
from bringup.core.startup import StartupMachine, StartupPolicy
from bringup.core.verdict import State
from bringup.core.vocab import FailureClass
from bringup.follow.types import StartupConfig
from bringup.follow.wiring import http_prober

URL = "http://127.0.0.1:8000"


@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize("has_key", [False, True])
def test_401_or_403_is_an_authentication_failure_at_once(status: int, has_key: bool) -> None:
    """The first refused request ends the startup: failed, config_error, saying authentication
    and whether a key was sent, with the remedy naming --api-key and the unit's env file."""
    m = StartupMachine(StartupPolicy(probe_has_key=has_key), start=0.0)
    health = ProbeObservation(ProbeKind.HEALTH, URL, True, status=200)
    m.probe_sent(ProbeKind.HEALTH)
    m.on_probe(health, 1.0)
    refused = ProbeObservation(
        ProbeKind.MODELS, URL + "/v1/models", False, status=status, error='{"error":"Unauthorized"}'
    )
    m.probe_sent(ProbeKind.MODELS)
    events = m.on_probe(refused, 1.1)
    assert m.state is State.FAILED
    assert m.failure is not None
    assert m.failure.failure_class is FailureClass.CONFIG_ERROR
    assert m.failure.summary.startswith("authentication failed")
    assert ("the API key bringup sent" if has_key else "no API key") in m.failure.summary
    assert f"HTTP {status}" in m.failure.line
    assert "--api-key" in m.failure.remedy[0].text
    assert "EnvironmentFile=" in m.failure.remedy[0].text
    assert "failure" in [e.event for e in events]


def test_the_key_comes_from_the_servers_own_command_line() -> None:
    """`bringup run -- vllm serve m --api-key K`: the probes send K (inside a unit systemd has
    already filled in ${API_KEY})."""
    prober = http_prober(StartupConfig(argv=("vllm", "serve", "m", "--api-key", "sk-7")))(URL)
    try:
        assert prober.has_key  # type: ignore[attr-defined]
        assert prober._client.headers["Authorization"] == "Bearer sk-7"  # type: ignore[attr-defined]
    finally:
        prober.close()


def test_an_explicit_key_wins_over_the_command_line() -> None:
    config = StartupConfig(argv=("vllm", "--api-key", "sk-7"), api_key="sk-explicit")
    prober = http_prober(config)(URL)
    try:
        assert prober._client.headers["Authorization"] == "Bearer sk-explicit"  # type: ignore[attr-defined]
    finally:
        prober.close()


def test_unit_words_are_filled_in_from_the_environment_file() -> None:
    """`${API_KEY}` and `${MODEL_NAME}` in a unit's ExecStart= come from its EnvironmentFile=."""
    env = parse_environment(
        "# Secrets for x.service\nAPI_KEY='sk-live-1'\nMODEL_NAME=\"qwen small\"\n"
    )
    words = expand_references(
        ["vllm", "serve", "m", "--api-key", "${API_KEY}", "--served-model-name", "$MODEL_NAME"],
        env,
    )
    assert words[-3:] == ["sk-live-1", "--served-model-name", "qwen small"]
    assert server_api_key(words, env) == "sk-live-1"
    assert server_api_key(["vllm", "serve", "m"], {"VLLM_API_KEY": "sk-env"}) == "sk-env"
    assert server_api_key(["vllm", "--api-key", "${UNSET}"], {}) is None
