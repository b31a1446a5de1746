"""The start timeout a prediction sizes (issue 26: services sized by the prediction): one
rule (``core.startup_time.service``), shown by ``plan`` (``startup.service`` and a human line)
and written by ``bringup unit`` (``TimeoutStartSec=``, ``timeout_start`` in ``--json``:
tests/startup_time/test_unit_timeout.py)."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest

from bringup.cli.main import Context, main
from bringup.core.startup_time.service import FLOOR_SECONDS, MARGIN, service_timeout


def _run(argv: list[str], env: dict[str, str]) -> str:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, Context(stdout=out, stderr=err, environ={"NO_COLOR": "1", **env}))
    assert code == 0, err.getvalue()
    return out.getvalue()


def _expected(high: float) -> float:
    """The issue's rule, written out: 1.5 x the high ends' sum, up to a minute, >= 5 min."""
    return max(FLOOR_SECONDS, math.ceil(MARGIN * high / 60) * 60)


@pytest.mark.parametrize("high", [0.0, 100.0, 200.0, 200.1, 961.2, 7200.0])
def test_the_rule_and_the_probe_cover_the_same_seconds(high: float) -> None:
    service = service_timeout(high)
    probe = service.kubernetes_startup_probe
    assert service.timeout_start_seconds == _expected(high)
    assert service.container_start_period_seconds == service.timeout_start_seconds
    # failureThreshold x periodSeconds covers the timeout, one period at most over it
    covered = probe.failure_threshold * probe.period_seconds
    assert (
        service.timeout_start_seconds
        <= covered
        < service.timeout_start_seconds + probe.period_seconds
    )
    assert (service.margin, service.floor_seconds) == (MARGIN, FLOOR_SECONDS)


KIMI = ["Kimi-K2", "--quantization", "nvfp4", "--gpu", "H200", "-tp", "8"]  # 35 min high end


@pytest.mark.parametrize("setup", [["Llama-3.1-8B", "--gpu", "H100"], KIMI])
def test_plan_json_gives_the_service_numbers_of_its_own_phases(
    setup: list[str], tmp_path: Path
) -> None:
    env = {"VLLM_CACHE_ROOT": str(tmp_path / "cache")}
    startup = json.loads(_run(["plan", *setup, "--json"], env))["startup"]
    high = sum(p["high"] for p in startup["phases"])
    service: dict[str, Any] = startup["service"]
    assert service["high_seconds"] == pytest.approx(high, abs=0.01)
    assert service["timeout_start_seconds"] == _expected(high)
    assert service["container_start_period_seconds"] == service["timeout_start_seconds"]
    probe = service["kubernetes_startup_probe"]
    assert probe["failure_threshold"] * probe["period_seconds"] >= service["timeout_start_seconds"]


def test_plan_prints_the_same_numbers_under_the_total(tmp_path: Path) -> None:
    env = {"VLLM_CACHE_ROOT": str(tmp_path / "cache")}
    argv = ["plan", *KIMI]
    service = json.loads(_run([*argv, "--json"], env))["startup"]["service"]
    lines = _run(argv, env).splitlines()
    total = next(i for i, line in enumerate(lines) if line.startswith("  total "))
    line = lines[total + 1]
    probe = service["kubernetes_startup_probe"]
    assert line.startswith("  start timeout ")
    assert f"TimeoutStartSec={service['timeout_start_seconds']:.0f}s" in line
    assert f"container start_period {service['container_start_period_seconds']:.0f}s" in line
    assert (
        f"periodSeconds {probe['period_seconds']} x failureThreshold {probe['failure_threshold']}"
        in line
    )
