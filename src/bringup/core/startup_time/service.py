"""A service's start timeout from the startup prediction.

``TimeoutStartSec=`` (and a container health check's start period, a Kubernetes
``startupProbe``'s ``failureThreshold x periodSeconds``) is ``MARGIN`` times the sum of the
phases' high ends, rounded up to a whole minute and never under ``FLOOR_SECONDS``: the high
ends are each phase's upper quartile (or a third over a measured read), so the worst case of
all of them at once, with half again on top, leaves room for a busy machine without letting a
hung start sit for the old fixed 20 minutes.

:func:`service_timeout` is the one rule: ``plan`` shows it (``startup.service``) and
``bringup unit`` writes it (``systemd.start_timeout``, with the guard's part on top).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MARGIN = 1.5
FLOOR_SECONDS = 300.0
# Kubernetes' default probe period (kubernetes/kubernetes pkg/apis/core/v1/defaults.go,
# SetDefaults_Probe: PeriodSeconds 10): the probe keeps it, its failureThreshold is sized
PROBE_PERIOD_SECONDS = 10


@dataclass(frozen=True, slots=True)
class StartupProbe:
    """A Kubernetes ``startupProbe``'s numbers: ``failureThreshold x periodSeconds`` covers
    the start timeout."""

    period_seconds: int
    failure_threshold: int


@dataclass(frozen=True, slots=True)
class ServiceTimeout:
    """The ``startup.service`` object of ``plan --json``: how long a service manager should
    let this start run before it calls it failed."""

    timeout_start_seconds: float  # TimeoutStartSec= of the server alone (the unit adds its guard)
    margin: float  # over high_seconds
    high_seconds: float  # the sum of the phases' high ends
    floor_seconds: float
    container_start_period_seconds: float  # a health check's start_period / --health-start-period
    kubernetes_startup_probe: StartupProbe


def service_timeout(high_seconds: float) -> ServiceTimeout:
    """``MARGIN`` x ``high_seconds``, rounded up to a minute, at least ``FLOOR_SECONDS``, and
    the same number for a container's start period and a Kubernetes startup probe.

    >>> t = service_timeout(178.0)
    >>> t.timeout_start_seconds, t.kubernetes_startup_probe
    (300.0, StartupProbe(period_seconds=10, failure_threshold=30))
    >>> service_timeout(961.2).timeout_start_seconds
    1500.0
    """
    seconds = max(FLOOR_SECONDS, math.ceil(MARGIN * high_seconds / 60) * 60.0)
    probe = StartupProbe(PROBE_PERIOD_SECONDS, math.ceil(seconds / PROBE_PERIOD_SECONDS))
    return ServiceTimeout(
        timeout_start_seconds=seconds,
        margin=MARGIN,
        high_seconds=round(high_seconds, 2),
        floor_seconds=FLOOR_SECONDS,
        container_start_period_seconds=seconds,
        kubernetes_startup_probe=probe,
    )
