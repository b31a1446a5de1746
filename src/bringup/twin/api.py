"""The API server process: what ``bringup twin vllm`` itself runs.

It follows vLLM 0.33's ``run_server``: imports, the logo, ``non-default args``, the early
port bind (no listen), config resolution, the EngineCore spawn and the wait for its READY;
then the routes, uvicorn's startup lines and ``listen()``. While serving it watches the
EngineCore: when it dies, ``[shutdown] MPClient: engine core exited unexpectedly`` is
logged, /health answers 503, and after the watchdog period uvicorn shuts down and the
process exits with status 0 (vllm#48966). A startup failure of the engine leaves the API
server alive for a few seconds before its uncaught traceback and exit status 1.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any, TextIO

from bringup.twin import config as timeline
from bringup.twin import holder, texts
from bringup.twin.config import TwinConfig
from bringup.twin.http import ROUTES, EarlyBoundServer, bind_early
from bringup.twin.logfmt import LogWriter
from bringup.twin.memory import MemoryPlan
from bringup.twin.openai import ServerState
from bringup.twin.procs import (
    Channel,
    Terminated,
    ignore_termination,
    install_termination,
    spawn,
    stop,
)
from bringup.twin.readings import Ledger, visible

WATCHDOG_FILE_LIMIT_SECONDS = 300.0  # the longest --watchdog-file holds the 503 window open

_ARG_NAMES = {
    "host": "host",
    "port": "port",
    "tp": "tensor_parallel_size",
    "max_num_seqs": "max_num_seqs",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "max_model_len": "max_model_len",
}


class ApiServer:
    """One twin start, from imports to exit; ``run`` returns the exit status."""

    def __init__(self, cfg: TwinConfig, out: TextIO, err: TextIO) -> None:
        self.pid = os.getpid()
        self.log = LogWriter("APIServer", self.pid, out, err)
        self._tmpdir: str | None = None
        if cfg.gpus_file is None:
            self._tmpdir = tempfile.mkdtemp(prefix="bringup-twin-")
            cfg = TwinConfig(
                **{**cfg.__dict__, "gpus_file": os.path.join(self._tmpdir, "gpus.json")}
            )
        self.cfg = cfg
        self.ledger = Ledger(cfg.gpus_file)
        self.engine: subprocess.Popen[bytes] | None = None
        self.channel: Channel | None = None
        self.http: EarlyBoundServer | None = None
        self._squatter: socket.socket | None = None

    def run(self) -> int:
        install_termination()
        try:
            return self._run()
        except Terminated:
            ignore_termination()
            if self.http is not None:
                self._uvicorn_shutdown()
            return 0
        finally:
            ignore_termination()
            self._cleanup()

    # -- startup ------------------------------------------------------------------------
    def _run(self) -> int:
        cfg = self.cfg
        gpus = visible(self.ledger.gpus(), cfg.cuda_visible_devices)
        if cfg.scenario == "guard_wait":
            self._start_holder(gpus[: cfg.tp])
        self._pace(timeline.API_IMPORTS_SECONDS)
        self.log.info("startup.py:78", texts.logo(cfg.model))
        self.log.info("startup.py:96", f"non-default args: {self._non_default_args()}")
        sock = self._bind()
        if sock is None:
            return 1
        self.log.info("model.py:547", "Resolved architecture: MiniMaxM2ForCausalLM")
        self.log.info("model.py:1712", f"Using max model len {cfg.max_model_len}")
        self.log.info(
            "scheduler.py:228",
            f"Chunked prefill is enabled with max_num_batched_tokens={cfg.max_num_batched_tokens}.",
        )
        if len(gpus) < cfg.tp:
            self.log.stderr(
                texts.api_config_failed(
                    f"World size ({cfg.tp}) is larger than the number of available GPUs ({len(gpus)}) in this node."
                )
            )
            return 1
        self._pace(timeline.CONFIG_SECONDS)
        self.engine, self.channel = spawn("engine", "VLLM::EngineCore")
        self.channel.send({"config": cfg.to_json()})
        info = self._wait_engine_ready()
        if info is None:
            return self._engine_failed()
        return self._serve(sock, info)

    def _pace(self, real_seconds: float) -> None:
        time.sleep(self.cfg.seconds(real_seconds))

    def _non_default_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {"model_tag": self.cfg.model}
        for name, value in self.cfg.given.items():
            if name in _ARG_NAMES:
                args[_ARG_NAMES[name]] = value
        args["model"] = self.cfg.model
        return args

    def _bind(self) -> socket.socket | None:
        cfg = self.cfg
        if cfg.scenario == "port_in_use":
            with contextlib.suppress(OSError):  # someone else has it already: even better
                self._squatter = bind_early(cfg.host, cfg.port)
                self._squatter.listen(1)
        try:
            return bind_early(cfg.host, cfg.port)
        except OSError as exc:
            self.log.stderr(texts.api_bind_failed(str(exc)))
            return None

    def _start_holder(self, gpus: list[dict[str, Any]]) -> None:
        cfg = self.cfg
        assert cfg.gpus_file is not None
        key = os.path.realpath(cfg.gpus_file) if self._tmpdir is None else f"port:{cfg.port}"
        if not holder.should_start(key, time.time()):
            return
        proc = holder.start(
            key,
            cfg.port,
            cfg.tp,
            cfg.model,
            cfg.gpus_file,
            [int(g["index"]) for g in gpus],
            cfg.linger_seconds(timeline.HOLDER_SECONDS),
        )
        for gpu in gpus:
            plan = MemoryPlan(
                int(gpu["memory_total_bytes"]),
                cfg.tp,
                cfg.gpu_memory_utilization,
                cfg.max_num_seqs,
                cfg.max_num_batched_tokens,
                cfg.max_model_len,
            )
            self.ledger.set_usage(
                proc.pid, holder.TITLE[:15], int(gpu["index"]), plan.serving_bytes()
            )

    def _wait_engine_ready(self) -> dict[str, Any] | None:
        assert self.channel is not None
        while True:
            try:
                message = self.channel.recv(1.0)
            except EOFError:
                return None
            if message is not None and "ready" in message:
                ready: dict[str, Any] = message["ready"]
                return ready

    def _engine_failed(self) -> int:
        assert self.engine is not None
        code = self.engine.wait()
        self.ledger.release({self.engine.pid})
        time.sleep(self.cfg.linger_seconds(timeline.ENGINE_FAILED_LINGER_SECONDS))
        self.log.stderr(texts.api_engine_failed(f"{{'EngineCore': {code}}}"))
        return 1

    # -- serving ------------------------------------------------------------------------
    def _serve(self, sock: socket.socket, info: dict[str, Any]) -> int:
        cfg = self.cfg
        self.log.info("entry.py:171", "Supported tasks: ['generate']")
        self._pace(timeline.APP_SECONDS)
        shown_host = cfg.host if ":" not in cfg.host else f"[{cfg.host}]"
        self.log.info("launcher.py:46", f"Starting vLLM server on http://{shown_host}:{cfg.port}")
        self.log.info("launcher.py:54", "Available routes are:")
        for path, methods in ROUTES:
            self.log.info("launcher.py:62", f"Route: {path}, Methods: {methods}")
        state = ServerState(
            cfg.model,
            cfg.max_model_len,
            cfg.token_rate,
            cfg.api_key,
            cfg.gpu_memory_utilization,
            num_gpu_blocks=int(info.get("kv_tokens", 0)) // 16,
        )
        self.http = EarlyBoundServer(sock, state, self.log)
        self.log.uvicorn(f"Started server process [{self.pid}]")
        self.log.uvicorn("Waiting for application startup.")
        self.log.uvicorn("Application startup complete.")
        self.http.start()
        self._watch_engine()
        # as real vLLM 0.32 prints it: a WARNING, then the output handler's EngineDeadError
        self.log.warning(
            "core_client.py:817",
            "[shutdown] MPClient: engine core exited unexpectedly; starting cleanup",
        )
        self.log.error("async_llm.py:906", "AsyncLLM output_handler failed.")
        self.log.error("async_llm.py:906", "Traceback (most recent call last):")
        self.log.error(
            "async_llm.py:906",
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/async_llm.py", line 849, in output_handler',
        )
        self.log.error("async_llm.py:906", "    outputs = await engine_core.get_output_async()")
        self.log.error(
            "async_llm.py:906",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
            "See stack trace (above) for the root cause.",
        )
        state.engine_dead = True
        assert self.engine is not None
        self.engine.wait()
        self.ledger.release({self.engine.pid})
        self._watchdog_wait()
        self._uvicorn_shutdown()
        return 0

    def _watchdog_wait(self) -> None:
        """The time between the engine's death and the shutdown: vLLM's watchdog period, or
        until ``watchdog_file`` exists (bounded, so a forgotten file never leaves it running)."""
        cfg = self.cfg
        if cfg.watchdog_file is None:
            time.sleep(cfg.linger_seconds(timeline.WATCHDOG_SECONDS))
            return
        end = time.monotonic() + WATCHDOG_FILE_LIMIT_SECONDS
        while not os.path.exists(cfg.watchdog_file) and time.monotonic() < end:
            time.sleep(0.02)

    def _watch_engine(self) -> None:
        assert self.channel is not None
        while True:
            try:
                self.channel.recv(1.0)
            except EOFError:
                return

    def _uvicorn_shutdown(self) -> None:
        self.log.uvicorn("Shutting down")
        if self.http is not None:
            self.http.stop()
            self.http = None
        self.log.uvicorn("Waiting for application shutdown.")
        self.log.uvicorn("Application shutdown complete.")
        self.log.uvicorn(f"Finished server process [{self.pid}]")

    def _cleanup(self) -> None:
        if self.http is not None:
            self.http.stop()
        if self.engine is not None:
            stop([self.engine])
            self.ledger.release({self.engine.pid})
        self.ledger.release_dead("VLLM::")
        if self._squatter is not None:
            self._squatter.close()
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
