"""What one GPU worker does during startup, and the worker process around it.

At TP=1 vLLM runs the model inside EngineCore (no worker process): the EngineCore then
calls these same steps in-process, and its lines carry the ``EngineCore`` prefix. At TP>1
each rank is a process ``VLLM::Worker_TP<r>`` whose lines carry ``Worker_TP<r>``; rank 0
alone prints the tqdm bars and ``Starting to load model``.
"""

from __future__ import annotations

import os
import sys
import time

from bringup.twin import config as timeline
from bringup.twin import texts
from bringup.twin.config import TwinConfig
from bringup.twin.logfmt import LogWriter, graphs_bar, shards_bar
from bringup.twin.memory import (
    NON_TORCH_BYTES,
    SAMPLER_BYTES_PER_ELEMENT,
    SORT_BYTES_PER_ELEMENT,
    MemoryPlan,
    gib,
)
from bringup.twin.procs import (
    Channel,
    Terminated,
    become_child,
    child_channel,
    comm_name,
    ignore_termination,
    install_termination,
)
from bringup.twin.readings import Ledger

NCCL_VERSION = "2.27.5"
_MIN_LEDGER_INTERVAL_SECONDS = 0.2


class WorkerError(Exception):
    """A worker step failed; ``traceback_text`` is what vLLM would log for it."""

    def __init__(self, message: str, traceback_text: str) -> None:
        super().__init__(message)
        self.traceback_text = traceback_text


class Worker:
    """One rank's startup steps, with their log lines and their GPU memory."""

    def __init__(
        self,
        cfg: TwinConfig,
        rank: int,
        gpu: dict[str, object],
        log: LogWriter,
        title: str,
        in_worker: bool,
    ) -> None:
        self.cfg = cfg
        self.rank = rank
        self.gpu_index = int(str(gpu["index"]))
        self.log = log
        self.name = comm_name(title)
        self.in_worker = in_worker
        self.ledger = Ledger(cfg.gpus_file)
        self.plan = MemoryPlan(
            total_bytes=int(str(gpu["memory_total_bytes"])),
            tp=cfg.tp,
            utilization=cfg.gpu_memory_utilization,
            max_num_seqs=cfg.max_num_seqs,
            max_num_batched_tokens=cfg.max_num_batched_tokens,
            max_model_len=cfg.max_model_len,
        )
        self.used_bytes = 0
        self._last_write = 0.0
        self.compile_seconds = 0.0

    # -- memory -------------------------------------------------------------------------
    def _hold(self, used_bytes: int, force: bool = True) -> None:
        self.used_bytes = used_bytes
        now = time.monotonic()
        if force or now - self._last_write >= _MIN_LEDGER_INTERVAL_SECONDS:
            self.ledger.set_usage(os.getpid(), self.name, self.gpu_index, used_bytes)
            self._last_write = now

    def release(self) -> None:
        self.ledger.release({os.getpid()})

    def _pace(self, real_seconds: float) -> None:
        time.sleep(self.cfg.seconds(real_seconds))

    def _others_bytes(self) -> int:
        for gpu in self.ledger.gpus():
            if int(gpu["index"]) == self.gpu_index:
                mine = sum(
                    int(p.get("used_bytes") or 0)
                    for p in gpu.get("processes", [])
                    if int(p["pid"]) == os.getpid()
                )
                return int(gpu.get("memory_used_bytes", 0)) - mine
        return 0

    # -- steps --------------------------------------------------------------------------
    def init_device(self) -> None:
        """CUDA context, NCCL (TP>1), and vLLM's free-memory check at the snapshot."""
        self._hold(self.plan.context_bytes)
        if self.cfg.tp > 1:
            self._pace(timeline.NCCL_INIT_SECONDS)
            if self.rank == 0:
                self.log.info("pynccl.py:111", f"vLLM is using nccl=={NCCL_VERSION}")
            if self.cfg.scenario == "hang_nccl":
                while True:  # the NCCL rendezvous never completes; SIGTERM ends it
                    time.sleep(3600)
            self.log.info(
                "parallel_state.py:1411",
                f"rank {self.rank} in world size {self.cfg.tp} is assigned as DP rank 0, PP rank 0, "
                f"PCP rank 0, TP rank {self.rank}, ETP rank {self.rank}, EP rank {self.rank}, EPLB rank {self.rank}",
            )
        self._pace(timeline.DEVICE_INIT_SECONDS)
        self._check_free_memory()

    def _check_free_memory(self) -> None:
        total = self.plan.total_bytes
        free = total - self._others_bytes() - self.plan.context_bytes
        if free >= self.plan.requested_bytes:
            return
        message = (
            f"Free memory on device cuda:{self.rank} ({gib(free):.2f}/{gib(total):.2f} GiB) on startup is less "
            f"than desired GPU memory utilization ({self.cfg.gpu_memory_utilization}, "
            f"{gib(self.plan.requested_bytes):.2f} GiB). Decrease GPU memory utilization or reduce GPU "
            "memory used by other processes."
        )
        raise WorkerError(message, texts.free_memory_traceback(message, self.in_worker))

    def load_model(self) -> None:
        started = time.monotonic()
        if self.rank == 0:
            self.log.info("gpu_model_runner.py:4327", f"Starting to load model {self.cfg.model}...")
        self.log.info(
            "cuda.py:405",
            "Using FLASH_ATTN attention backend out of potential backends: "
            "['FLASH_ATTN', 'FLASHINFER', 'TRITON_ATTN', 'FLEX_ATTENTION'].",
        )
        per_shard = (
            timeline.SLOW_SHARD_SECONDS
            if self.cfg.scenario == "slow_load"
            else timeline.SHARD_SECONDS
        )
        total = timeline.NUM_SHARDS
        load_started = time.monotonic()
        if self.rank == 0:
            self.log.stderr_raw(shards_bar(0, total, 0.0))
        for done in range(1, total + 1):
            self._pace(per_shard)
            if (
                self.plan.context_bytes + self.plan.weights_bytes * done // total
                > self.plan.total_bytes
            ):
                raise self._load_oom(done)
            self._hold(
                self.plan.context_bytes + self.plan.weights_bytes * done // total,
                force=done == total,
            )
            if self.rank == 0:
                self.log.stderr_raw(shards_bar(done, total, time.monotonic() - load_started))
        self.log.info(
            "default_loader.py:320",
            f"Loading weights took {time.monotonic() - load_started:.2f} seconds",
        )
        self.log.info(
            "gpu_model_runner.py:5088",
            f"Model loading took {round(gib(self.plan.weights_bytes), 2)} GiB memory and {time.monotonic() - started:.6f} seconds",
        )

    def determine_available_memory(self) -> int:
        """torch.compile and the profile run; returns the KV bytes this rank can offer."""
        started = time.monotonic()
        self.log.info(
            "backends.py:712",
            f"Using cache directory: /root/.cache/vllm/torch_compile_cache/3f9a1c27d4/rank_{self.rank}_0/backbone for vLLM's torch.compile",
        )
        self.log.info("backends.py:776", "Starting torch.compile")
        self._pace(timeline.COMPILE_SECONDS * 0.2)
        self.log.info(
            "backends.py:790", f"Dynamo bytecode transform time: {time.monotonic() - started:.2f} s"
        )
        compile_started = time.monotonic()
        self._pace(timeline.COMPILE_SECONDS * 0.8)
        self.log.info(
            "backends.py:305",
            f"Compiling a graph for compile range (1, {self.cfg.max_num_batched_tokens}) takes {time.monotonic() - compile_started:.2f} s",
        )
        self.compile_seconds = time.monotonic() - started
        self.log.info("monitor.py:41", f"torch.compile took {self.compile_seconds:.2f} s in total")
        profile_started = time.monotonic()
        self._pace(timeline.PROFILE_SECONDS)
        self._hold(
            self.plan.context_bytes
            + self.plan.weights_bytes
            + NON_TORCH_BYTES
            + self.plan.activation_bytes
        )
        self.log.info(
            "gpu_worker.py:451",
            f"Initial profiling/warmup run took {time.monotonic() - profile_started:.2f} s",
        )
        self.log.info(
            "gpu_worker.py:772",
            f"Available KV cache memory: {round(gib(max(0, self.plan.kv_bytes)), 2)} GiB",
        )
        return self.plan.kv_bytes

    def initialize_kv_cache(self) -> None:
        self._pace(timeline.KV_SECONDS)
        self._hold(self.plan.context_bytes + self.plan.requested_bytes)

    def compile_or_warm_up_model(self) -> None:
        """CUDA-graph capture, then the sampler warmup (where oom_warmup dies)."""
        started = time.monotonic()
        base = self.plan.context_bytes + self.plan.requested_bytes
        sizes = [
            ("mixed prefill-decode, PIECEWISE", len(self.plan.capture_sizes)),
            ("decode, FULL", len(self.plan.full_capture_sizes)),
        ]
        total_graphs = sum(n for _, n in sizes)
        captured = 0
        for desc, count in sizes:
            self._capture(
                f"Capturing CUDA graphs ({desc})",
                count,
                timeline.CAPTURE_SECONDS * count / total_graphs,
            )
            captured += count
            self._hold(base + self.plan.graph_pool_bytes * captured // total_graphs)
        self.log.info(
            "gpu_model_runner.py:5512",
            f"Graph capturing finished in {time.monotonic() - started:.0f} secs, took {gib(self.plan.graph_pool_bytes):.2f} GiB",
        )
        self._pace(timeline.SAMPLER_SECONDS)
        if self.cfg.scenario == "oom_warmup" and not self.plan.sampler_fits:
            raise self._sampler_oom()

    def _capture(self, desc: str, count: int, real_seconds: float) -> None:
        started = time.monotonic()
        steps = min(count, 8)
        if self.rank == 0:
            self.log.stderr_raw(graphs_bar(desc, 0, count, 0.0))
        for step in range(1, steps + 1):
            self._pace(real_seconds / steps)
            if self.rank == 0:
                self.log.stderr_raw(
                    graphs_bar(desc, count * step // steps, count, time.monotonic() - started)
                )
        if self.rank == 0:
            self.log.stderr_raw("\n")

    def _load_oom(self, done: int) -> WorkerError:
        """The weights do not fit on the GPU at all (e.g. this model at TP < 4)."""
        self.log.error(
            "gpu_model_runner.py:4351",
            "Failed to load model - not enough GPU memory. Try lowering --gpu-memory-utilization to free "
            "memory for weights, increasing --tensor-parallel-size, or using --quantization.",
        )
        shard_bytes = self.plan.weights_bytes // timeline.NUM_SHARDS
        held = self.plan.context_bytes + self.plan.weights_bytes * (done - 1) // timeline.NUM_SHARDS
        oom = texts.torch_oom(
            gpu=self.rank,
            tried_gib=gib(shard_bytes),
            total_gib=gib(self.plan.total_bytes),
            free_gib=gib(max(0, self.plan.total_bytes - held)),
            in_use_gib=gib(held),
            graphs_gib=0.0,
        )
        return WorkerError(oom.split(": ", 1)[1], texts.load_oom_traceback(oom, self.in_worker))

    def _sampler_oom(self) -> WorkerError:
        n = self.plan.sampler_requests
        elements = self.plan.sampler_bytes // SAMPLER_BYTES_PER_ELEMENT
        before_sort = (SAMPLER_BYTES_PER_ELEMENT - SORT_BYTES_PER_ELEMENT) * elements // 2
        headroom = self.plan.sampler_headroom_bytes
        oom = texts.torch_oom(
            gpu=self.rank,
            tried_gib=gib(SORT_BYTES_PER_ELEMENT * elements),
            total_gib=gib(self.plan.total_bytes),
            free_gib=gib(max(0, headroom - before_sort)),
            in_use_gib=gib(self.plan.serving_bytes() + before_sort),
            graphs_gib=gib(self.plan.graph_pool_bytes),
        )
        return WorkerError(
            texts.SAMPLER_OOM.format(n=n), texts.sampler_traceback(oom, n, self.in_worker)
        )


def main(argv: list[str]) -> int:
    """Worker process: ``python -m bringup.twin.worker VLLM::Worker_TP<r> <fd> <parent pid>``."""
    title, fd_text, parent = argv
    install_termination()
    become_child(title, int(parent))
    channel = child_channel(fd_text)
    worker: Worker | None = None
    try:
        hello = channel.recv()
        assert hello is not None
        cfg = TwinConfig.from_json(hello["config"])
        rank = int(hello["rank"])
        log = LogWriter(f"Worker_TP{rank}", os.getpid(), sys.stdout, sys.stderr)
        worker = Worker(cfg, rank, hello["gpu"], log, title, in_worker=True)
        time.sleep(cfg.seconds(timeline.WORKER_IMPORTS_SECONDS))
        channel.send({"ready": True})
        _serve(channel, worker)
    except (Terminated, EOFError):
        pass
    finally:
        ignore_termination()
        if worker is not None:
            worker.release()
    return 0


_STARTUP_METHODS = ("init_device", "load_model")


def _serve(channel: Channel, worker: Worker) -> None:
    while True:
        message = channel.recv()
        if message is None:
            continue
        method = str(message["call"])
        try:
            result = getattr(worker, method)()
        except WorkerError as exc:
            if method in _STARTUP_METHODS:
                worker.log.exception(
                    "multiproc_executor.py:745", "WorkerProc failed to start.", exc.traceback_text
                )
            else:
                worker.log.exception(
                    "multiproc_executor.py:871", "WorkerProc hit an exception.", exc.traceback_text
                )
            channel.send({"error": str(exc), "traceback": exc.traceback_text})
            continue
        channel.send({"ok": result, "compile_seconds": worker.compile_seconds})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
