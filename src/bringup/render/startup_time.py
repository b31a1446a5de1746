"""Human output of a startup prediction: one line per phase, the total, then the start
timeout it sizes for a service (systemd, a container, Kubernetes)."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from bringup.core.startup_time import StartupPrediction
from bringup.core.startup_time.service import ServiceTimeout
from bringup.units import format_seconds as seconds


def startup_lines(prediction: StartupPrediction) -> list[str]:
    """``  weights_loading      2.0s  (0.7s-35s)  basis`` per phase, then the total."""
    width = max(len(p.phase.value) for p in prediction.phases)
    out = []
    for p in prediction.phases:
        band = f"({seconds(p.low)}-{seconds(p.high)})"
        out.append(f"  {p.phase.value:<{width}}  {seconds(p.seconds):>6}  {band:<14}  {p.basis}")
    band = f"({seconds(prediction.low_seconds)}-{seconds(prediction.high_seconds)})"
    total = seconds(prediction.total_seconds)
    out.append(f"  {'total':<{width}}  {total:>6}  {band:<14}  bound by {prediction.bound_by}")
    return out


def service_line(service: ServiceTimeout, width: int = 0) -> str:
    """The start timeout the prediction sizes, and the same number for a container and
    Kubernetes (``startup.service`` in ``--json``), as one more row under the total.

    >>> from bringup.core.startup_time.service import service_timeout
    >>> head, rest = service_line(service_timeout(228.0), 19).split(": ", 1)
    >>> head
    '  start timeout         6m00s  1.5 x the high end, rounded up to a minute'
    >>> rest.split("; ")[1:]
    ['container start_period 360s', 'Kubernetes startupProbe periodSeconds 10 x failureThreshold 36']
    >>> service_line(service_timeout(100.0)).split(":")[0]
    '  start timeout   5m00s  the floor (1.5 x the high end is less)'
    """
    probe = service.kubernetes_startup_probe
    timeout = service.timeout_start_seconds
    rule = f"{service.margin:g} x the high end, rounded up to a minute"
    if service.margin * service.high_seconds < service.floor_seconds:
        rule = f"the floor ({service.margin:g} x the high end is less)"
    return (
        f"  {'start timeout':<{width}}  {seconds(timeout):>6}  {rule}: "
        f"TimeoutStartSec={timeout:.0f}s (bringup unit adds its guard); container start_period "
        f"{service.container_start_period_seconds:.0f}s; Kubernetes startupProbe periodSeconds "
        f"{probe.period_seconds} x failureThreshold {probe.failure_threshold}"
    )


def print_startup(prediction: StartupPrediction, console: Console) -> None:
    """Print the prediction (long lines are not wrapped: one line per phase)."""
    console.print(Text("time to ready (predicted):", style="bold"))
    width = max(len(p.phase.value) for p in prediction.phases)
    for line in [*startup_lines(prediction), service_line(prediction.service, width)]:
        console.print(Text(line), soft_wrap=True)
