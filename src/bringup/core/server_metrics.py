"""A server's own load figures from its Prometheus ``/metrics`` text, under one set of names.

``bench`` reads them before and after a run: a KV cache still full or requests still waiting
after the run say the server was busy with something else (another client, requests the run
abandoned), which the latency figures alone would not show.

============================  ===============================  =====================  ========================
bringup                       vLLM (V1; 0.6-0.9 name)          SGLang                 llama.cpp (``--metrics``)
============================  ===============================  =====================  ========================
``kv_cache_usage_perc``       ``vllm:kv_cache_usage_perc``     ``sglang:token_usage`` ``llamacpp:kv_cache_usage_ratio``
                              (``vllm:gpu_cache_usage_perc``)
``num_requests_running``      ``vllm:num_requests_running``    ``sglang:num_running_reqs``  ``llamacpp:requests_processing``
``num_requests_waiting``      ``vllm:num_requests_waiting``    ``sglang:num_queue_reqs``    ``llamacpp:requests_deferred``
============================  ===============================  =====================  ========================

``kv_cache_usage_perc`` is a fraction (0-1), as vLLM reports it. Values of several label sets
(one per engine or data-parallel rank) are summed, the KV usage averaged.

>>> parse_metrics('# HELP x\\nvllm:num_requests_running{engine="0"} 2.0\\nvllm:kv_cache_usage_perc{engine="0"} 0.25\\n')
ServerMetrics(kv_cache_usage_perc=0.25, num_requests_running=2, num_requests_waiting=None)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_NAMES: dict[str, tuple[str, ...]] = {
    "kv_cache_usage_perc": (
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "sglang:token_usage",
        "llamacpp:kv_cache_usage_ratio",
    ),
    "num_requests_running": (
        "vllm:num_requests_running",
        "sglang:num_running_reqs",
        "llamacpp:requests_processing",
    ),
    "num_requests_waiting": (
        "vllm:num_requests_waiting",
        "sglang:num_queue_reqs",
        "llamacpp:requests_deferred",
    ),
}
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{[^}]*\})?\s+(\S+)")


@dataclass(frozen=True, slots=True)
class ServerMetrics:
    """The load figures; None where the server does not export one."""

    kv_cache_usage_perc: float | None
    num_requests_running: int | None
    num_requests_waiting: int | None


def parse_metrics(text: str) -> ServerMetrics:
    """Read the figures from Prometheus text exposition (unknown lines are ignored)."""
    samples: dict[str, list[float]] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line.strip())
        if not m:
            continue
        try:
            value = float(m.group(2))
        except ValueError:
            continue
        if math.isfinite(value):
            samples.setdefault(m.group(1), []).append(value)
    found: dict[str, float | None] = {}
    for key, names in _NAMES.items():
        values = next((samples[n] for n in names if n in samples), None)
        if values is None:
            found[key] = None
        elif key == "kv_cache_usage_perc":
            found[key] = sum(values) / len(values)
        else:
            found[key] = sum(values)
    running, waiting = found["num_requests_running"], found["num_requests_waiting"]
    return ServerMetrics(
        kv_cache_usage_perc=found["kv_cache_usage_perc"],
        num_requests_running=None if running is None else round(running),
        num_requests_waiting=None if waiting is None else round(waiting),
    )
