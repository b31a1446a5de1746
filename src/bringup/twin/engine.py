"""The EngineCore process: spawns the workers, drives their startup, sizes the KV cache.

``python -m bringup.twin.engine VLLM::EngineCore <fd> <parent pid>``. It tells the API
server ``ready`` (vLLM's READY over ZMQ) or dies, as vLLM's EngineCore does: a startup
failure is logged under ``EngineCore failed to start.``, followed by the multiprocessing
``Process EngineCore:`` banner and traceback on stderr, and exit status 1. In
``die_after_ready`` it is SIGKILLed some time after ready (the Linux OOM killer's way), so
it prints nothing.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from bringup.twin import config as timeline
from bringup.twin import texts
from bringup.twin.config import VLLM_VERSION, TwinConfig
from bringup.twin.logfmt import LogWriter
from bringup.twin.memory import MemoryPlan, gib
from bringup.twin.procs import (
    Channel,
    Terminated,
    become_child,
    child_channel,
    ignore_termination,
    install_termination,
    spawn,
    stop,
)
from bringup.twin.readings import Ledger, visible
from bringup.twin.worker import Worker, WorkerError

TITLE = "VLLM::EngineCore"
NAME = "EngineCore"
_REMOTE_STARTUP_FAILED = (
    "Exception: WorkerProc initialization failed due to an exception in a background process. "
    "See stack trace for root cause."
)


@dataclass
class StartupFailure(Exception):
    """The engine cannot start; ``final_line`` ends its traceback, ``stage`` picks the frames."""

    final_line: str
    stage: str
    root_traceback: str = ""


class EngineCore:
    """The engine side of one twin start."""

    def __init__(self, cfg: TwinConfig, api: Channel) -> None:
        self.cfg = cfg
        self.api = api
        self.log = LogWriter(NAME, os.getpid(), sys.stdout, sys.stderr)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.channels: list[Channel] = []
        self.local: Worker | None = None
        self._last: list[dict[str, Any]] = []
        gpus = visible(Ledger(cfg.gpus_file).gpus(), cfg.cuda_visible_devices)[: cfg.tp]
        self.gpus = gpus
        self.plan = MemoryPlan(
            int(gpus[0]["memory_total_bytes"]),
            cfg.tp,
            cfg.gpu_memory_utilization,
            cfg.max_num_seqs,
            cfg.max_num_batched_tokens,
            cfg.max_model_len,
        )

    # -- startup ------------------------------------------------------------------------
    def start(self) -> dict[str, Any]:
        started = time.monotonic()
        time.sleep(self.cfg.seconds(timeline.ENGINE_IMPORTS_SECONDS))
        self.log.info(
            "core.py:139",
            f"Initializing a V1 LLM engine (v{VLLM_VERSION}) with config: {texts.engine_config(self.cfg)}",
        )
        self._start_workers()
        self.call("init_device")
        self.call("load_model")
        kv_bytes = min(int(r["ok"]) for r in self.call("determine_available_memory"))
        compile_seconds = max(float(r.get("compile_seconds", 0.0)) for r in self._last)
        self._size_kv_cache(kv_bytes)
        self.call("initialize_kv_cache")
        self.call("compile_or_warm_up_model")
        took = time.monotonic() - started
        self.log.info(
            "core.py:273",
            f"init engine (profile, create kv cache, warmup model) took {took:.2f} s (compilation: {compile_seconds:.2f} s)",
        )
        return {"kv_tokens": self.plan.kv_tokens, "max_concurrency": self.plan.max_concurrency}

    def _start_workers(self) -> None:
        if self.cfg.tp == 1:
            self.local = Worker(self.cfg, 0, self.gpus[0], self.log, TITLE, in_worker=False)
            return
        for rank in range(self.cfg.tp):
            proc, channel = spawn("worker", f"VLLM::Worker_TP{rank}")
            channel.send({"config": self.cfg.to_json(), "rank": rank, "gpu": self.gpus[rank]})
            self.procs.append(proc)
            self.channels.append(channel)
        self._collect("ready")

    def call(self, method: str) -> list[dict[str, Any]]:
        """Run one step on every rank (vLLM's collective_rpc)."""
        if self.local is not None:
            try:
                result = getattr(self.local, method)()
            except WorkerError as exc:
                raise StartupFailure(
                    exc.traceback_text.rstrip("\n").rsplit("\n", 1)[-1],
                    "inline",
                    exc.traceback_text,
                ) from exc
            self._last = [{"ok": result, "compile_seconds": self.local.compile_seconds}]
            return self._last
        for channel in self.channels:
            channel.send({"call": method})
        self._last = self._collect(method)
        return self._last

    def _collect(self, method: str) -> list[dict[str, Any]]:
        replies: dict[int, dict[str, Any]] = {}
        while len(replies) < len(self.channels):
            pending = [c for i, c in enumerate(self.channels) if i not in replies]
            ready, _, _ = select.select([*pending, self.api], [], [], 1.0)
            if self.api in ready:
                self.api.recv(0)  # EOF here means the API server is gone
            for channel in ready:
                if channel is self.api:
                    continue
                try:
                    message = channel.recv(0)
                except EOFError:
                    message = {"error": "worker process died"}
                if message is not None:
                    replies[self.channels.index(channel)] = message
        errors = [r for r in (replies[i] for i in sorted(replies)) if "error" in r]
        if errors:
            if method in ("ready", "init_device", "load_model"):
                raise StartupFailure(_REMOTE_STARTUP_FAILED, "executor")
            raise StartupFailure(
                f"RuntimeError: Worker failed with error '{errors[0]['error']}', please check the stack trace above for the root cause",
                "warmup",
            )
        return [replies[i] for i in sorted(replies)]

    def _size_kv_cache(self, kv_bytes: int) -> None:
        plan = self.plan
        if kv_bytes <= 0:
            raise StartupFailure(
                "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                "when initializing the engine.",
                "kv",
            )
        if self.cfg.scenario == "kv_insufficient" and not plan.kv_fits:
            raise StartupFailure(
                f"ValueError: To serve at least one request with the model's max seq len ({self.cfg.max_model_len}), "
                f"({gib(plan.needed_kv_bytes):.2f} GiB KV cache is needed, which is larger than the available KV cache "
                f"memory ({gib(max(0, kv_bytes)):.2f} GiB). Based on the available memory, the estimated maximum model "
                f"length is {plan.estimated_max_model_len}. Try increasing `gpu_memory_utilization` or decreasing "
                "`max_model_len` when initializing the engine.",
                "kv",
            )
        time.sleep(self.cfg.seconds(timeline.KV_SECONDS))
        self.log.info(
            "kv_cache_utils.py:1308",
            f"GPU KV cache size: {plan.kv_tokens:,} tokens, Maximum concurrency for "
            f"{self.cfg.max_model_len:,} tokens per request: {plan.max_concurrency:.2f}x",
        )

    def fail(self, failure: StartupFailure) -> None:
        wrapper = texts.engine_wrapper(failure.final_line, failure.stage)
        if failure.stage == "inline":
            wrapper = failure.root_traceback
        self.log.exception("core.py:1080", "EngineCore failed to start.", wrapper)
        self.log.stderr(texts.process_banner(NAME, wrapper))

    # -- serving ------------------------------------------------------------------------
    def serve(self) -> None:
        """Idle until the API server goes away; in die_after_ready, die."""
        deadline = None
        if self.cfg.scenario == "die_after_ready":
            deadline = time.monotonic() + self.cfg.seconds(
                timeline.ENGINE_DEATH_AFTER_READY_SECONDS
            )
        while True:
            timeout = 1.0 if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.api, *self.channels], [], [], timeout)
            if deadline is not None and time.monotonic() >= deadline:
                os.kill(os.getpid(), signal.SIGKILL)
            if self.api in ready:
                self.api.recv(0)
            for channel in ready:
                if channel is not self.api:
                    self._worker_event(channel)

    def _worker_event(self, channel: Channel) -> None:
        try:
            channel.recv(0)
        except EOFError:
            rank = self.channels.index(channel)
            code = self.procs[rank].wait()
            self.log.error(
                "multiproc_executor.py:301",
                f"Worker proc VllmWorker-{rank} died unexpectedly (exit code: {code}), shutting down executor.",
            )
            self.log.error("core.py:986", "EngineCore encountered a fatal error.")
            raise SystemExit(1) from None

    def shutdown(self) -> None:
        stop(self.procs)
        pids = {p.pid for p in self.procs} | {os.getpid()}
        Ledger(self.cfg.gpus_file).release(pids)


def main(argv: list[str]) -> int:
    title, fd_text, parent = argv
    install_termination()
    become_child(title, int(parent))
    api = child_channel(fd_text)
    engine: EngineCore | None = None
    code = 0
    try:
        hello = api.recv()
        assert hello is not None
        engine = EngineCore(TwinConfig.from_json(hello["config"]), api)
        api.send({"ready": engine.start()})
        engine.serve()
    except StartupFailure as failure:
        assert engine is not None
        engine.fail(failure)
        code = 1
    except (Terminated, EOFError):
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        ignore_termination()
        if engine is not None:
            engine.shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
