"""The real dependencies of the follower, assembled in one place (the composition root)::

    result = follow_local(StartupConfig(argv=("vllm", "serve", "m")), observer=observer)

``run_startup`` itself takes every dependency; this module builds the ones bringup uses
on a real machine: a child process (or the given source), HTTP probes with the API key,
NVML or a readings file, the system clock, and sd_notify when ``config.notify``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from bringup.adapters import gpus as gpu_adapter
from bringup.adapters.clock import Clock, SystemClock
from bringup.adapters.http_probe import HttpProber, api_key_from
from bringup.adapters.sd_notify import Notifier
from bringup.adapters.sources.child import ChildSource
from bringup.adapters.sources.items import Source
from bringup.core import engine_args, packs
from bringup.core.endpoint import server_api_key
from bringup.core.live import LiveEvent, StartupResult
from bringup.follow.loop import run_startup
from bringup.follow.types import Observer, Prober, ProberFactory, StartupConfig


def http_prober(config: StartupConfig) -> ProberFactory:
    """HTTP probes of a base URL, with the API key from ``config``, bringup's environment, or
    the server's own command line (``--api-key``: inside a unit systemd has filled it in)."""
    key = api_key_from(config.api_key, config.environ) or server_api_key(config.argv)
    timeout = LOAD_SMOKE_TIMEOUT_SECONDS if loads_on_request(config) else SMOKE_TIMEOUT_SECONDS

    def make(url: str) -> Prober:
        return HttpProber(url, api_key=key, smoke_timeout_seconds=timeout)

    return make


SMOKE_TIMEOUT_SECONDS = 60.0
# a server that loads its model at the first request (Ollama) answers that request only once
# the model is in memory: minutes for a large one; a request cut short is only sent again
LOAD_SMOKE_TIMEOUT_SECONDS = 600.0


def loads_on_request(config: StartupConfig) -> bool:
    """Whether the followed engine loads its model at the first request that names it."""
    engine = config.engine
    if engine is None and config.argv:
        engine = engine_args.parse_server_command(config.argv).engine
    if engine is None:
        return False
    try:
        return packs.get(engine).http.model_on_request
    except KeyError:
        return False


def follow_local(
    config: StartupConfig,
    *,
    source: Source | None = None,
    observer: Observer | None = None,
    on_event: Callable[[LiveEvent], None] | None = None,
    clock: Clock | None = None,
    follow: bool = True,
    stop: threading.Event | None = None,
) -> StartupResult:
    """``run_startup`` with the real dependencies; no ``source``: start ``config.argv`` as a child."""
    return run_startup(
        config,
        source=source or ChildSource(config.argv, config.environ),
        prober=http_prober(config),
        gpus=gpu_adapter.open_source(config.gpus_from),
        clock=clock or SystemClock(),
        notify=Notifier(config.environ) if config.notify else None,
        observer=observer,
        on_event=on_event,
        follow=follow,
        stop=stop,
    )
