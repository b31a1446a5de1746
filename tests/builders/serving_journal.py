"""Serving journals that look like what users feed `diagnose`: a startup, then hours of serving.

A long-running vLLM server's journal is mostly three kinds of lines: the engine's periodic stats
line (V0's ``metrics.py`` "Avg prompt throughput: ... GPU KV cache usage: ..."; V1's
``loggers.py`` "Engine 000: Avg prompt throughput ..."), uvicorn's access lines, and the few
warnings a server repeats per request (fields ignored in a request, a request's log line). Every
line here is made from a shape written for this script (the format strings vLLM's logging calls
print, with numbers that vary as a server's do), not copied from any log.

Each journal is a startup of ``startup_lines`` lines (banner, arguments, NCCL setup of a TP-4
server, shard loading, profiling, graph capture, the API routes), then serving lines up to
``lines`` in all, optionally ending with the server restarting and the new start failing with a
CUDA out-of-memory error in the profile run (so the verdict depends on the journal's last lines).
Wrapped three ways, as they reach users: ``raw`` (the process's own output, ``docker logs``
without ``-t``), ``journald`` (``journalctl -u vllm``: ``Dec 01 10:00:00 host vllm[1234]: ...``),
``docker`` (``docker logs -t``: an RFC 3339 timestamp with nanoseconds before each line).

Run: ``python tests/builders/serving_journal.py OUT_DIR [--lines N]`` writes every variant;
``write_journal`` and ``journal`` serve bench/bench_serving_journal.py and the tests.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterator
from pathlib import Path

WRAPS = ("raw", "journald", "docker")
VERSIONS = ("v0", "v1")
START_DAY = 1  # December 1st
SHARDS = 125
TP = 4


class _Clock:
    """Seconds since the journal's start, as the header timestamps of each wrapping."""

    def __init__(self) -> None:
        self.t = 10 * 3600.0  # 10:00:00

    def tick(self, seconds: float) -> None:
        self.t += seconds

    def hms(self) -> tuple[int, int, int, int]:
        whole = int(self.t)
        day = START_DAY + whole // 86400
        return day, whole // 3600 % 24, whole // 60 % 60, whole % 60

    def vllm(self) -> str:
        day, h, m, s = self.hms()
        return f"12-{day:02d} {h:02d}:{m:02d}:{s:02d}"

    def journald(self) -> str:
        day, h, m, s = self.hms()
        return f"Dec {day:02d} {h:02d}:{m:02d}:{s:02d}"

    def rfc3339(self) -> str:
        day, h, m, s = self.hms()
        nanos = int((self.t % 1) * 1e9)
        return f"2026-12-{day:02d}T{h:02d}:{m:02d}:{s:02d}.{nanos:09d}Z"


class _Writer:
    """Lines of one engine version, wrapped one way."""

    def __init__(self, version: str, wrap: str, rng: random.Random) -> None:
        self.version, self.wrap, self.rng = version, wrap, rng
        self.clock = _Clock()
        self.pid = 1234

    def wrapped(self, line: str) -> str:
        if self.wrap == "journald":
            return f"{self.clock.journald()} gpu-node-07 vllm[{self.pid}]: {line}"
        if self.wrap == "docker":
            return f"{self.clock.rfc3339()} {line}"
        return line

    def log(self, level: str, where: str, message: str, process: str | None = None) -> str:
        """One line of vLLM's logger: V1 puts the file in brackets and a process prefix first."""
        if self.version == "v0":
            head = f"{level} {self.clock.vllm()} {where}] {message}"
            return self.wrapped(f"({process}) {head}" if process else head)
        proc = process or f"APIServer pid={self.pid}"
        return self.wrapped(f"({proc}) {level} {self.clock.vllm()} [{where}] {message}")

    def raw(self, line: str) -> str:
        return self.wrapped(line)


def _startup(w: _Writer, lines: int, *, fail: bool) -> Iterator[str]:
    """A TP-4 start of a 125-shard checkpoint; ``fail``: the profile run runs out of memory."""
    v1 = w.version == "v1"
    core = "EngineCore_DP0 pid=1301" if v1 else None
    worker = (
        (lambda r: f"Worker_TP{r} pid={1310 + r}")
        if v1
        else (lambda r: f"VllmWorkerProcess pid={1310 + r}")
    )
    version = "0.11.0" if v1 else "0.6.6"
    model = "Qwen/Qwen2.5-72B-Instruct"
    yield w.log(
        "INFO",
        "api_server.py:1895" if v1 else "api_server.py:585",
        f"vLLM API server version {version}",
    )
    yield w.log(
        "INFO",
        "utils.py:328" if v1 else "api_server.py:586",
        f"non-default args: {{'model': '{model}', 'tensor_parallel_size': {TP}, "
        "'max_model_len': 32768, 'gpu_memory_utilization': 0.92, 'port': 8000}",
    )
    yield w.log(
        "INFO",
        "config.py:3440" if v1 else "config.py:510",
        "Resolved architecture: Qwen2ForCausalLM",
    )
    yield w.log("INFO", "config.py:1604" if v1 else "config.py:1020", "Using max model len 32768")
    yield w.log(
        "INFO",
        "core.py:74" if v1 else "llm_engine.py:249",
        f"Initializing a V1 LLM engine (v{version}) with config: model='{model}', "
        f"tensor_parallel_size={TP}, max_seq_len=32768, enforce_eager=False"
        if v1
        else f"Initializing an LLM engine (v{version}) with config: model='{model}', "
        f"tensor_parallel_size={TP}, max_seq_len=32768",
        core,
    )
    for r in range(TP):
        yield w.log(
            "INFO",
            "parallel_state.py:1165",
            f"rank {r} in world size {TP} is assigned as DP rank 0, PP rank 0, TP rank {r}, EP rank {r}",
            worker(r),
        )
    yield w.log("INFO", "pynccl.py:69", "vLLM is using nccl==2.21.5", worker(0))
    used = 12 + SHARDS + 20 + 12
    nccl = max(0, lines - used)
    for i in range(nccl):  # a TP-4 setup at NCCL_DEBUG=INFO: the bulk of a real start's lines
        r = i % TP
        w.clock.tick(0.002)
        yield w.raw(
            f"gpu-node-07:{1310 + r}:{1400 + r} [{r}] NCCL INFO Channel {i % 32:02d}/0 : "
            f"{r}[{r}] -> {(r + 1) % TP}[{(r + 1) % TP}] via P2P/CUMEM/read"
        )
    yield w.log(
        "INFO",
        "gpu_model_runner.py:2338" if v1 else "model_runner.py:1072",
        f"Starting to load model {model}...",
        worker(0),
    )
    for k in range(1, SHARDS + 1):
        w.clock.tick(0.9)
        pct = k * 100 // SHARDS
        yield (
            w.log(
                "INFO",
                "default_loader.py:267",
                f"Loading safetensors checkpoint shards: {pct:3d}% Completed | {k}/{SHARDS} "
                f"[{int(w.clock.t) % 60:02d}:{k % 60:02d}<00:{(SHARDS - k) % 60:02d}, 1.1it/s]",
                worker(0),
            )
            if v1
            else w.raw(
                f"Loading safetensors checkpoint shards: {pct:3d}% Completed | {k}/{SHARDS} "
                f"[01:{k % 60:02d}<00:{(SHARDS - k) % 60:02d}, 1.1it/s]"
            )
        )
    took = (
        "Model loading took 34.2 GiB and 112.4 seconds"
        if v1
        else "Loading model weights took 34.2110 GB"
    )
    yield w.log(
        "INFO", "gpu_model_runner.py:2370" if v1 else "model_runner.py:1099", took, worker(0)
    )
    if v1:
        yield w.log(
            "INFO",
            "backends.py:548",
            "Using cache directory: /root/.cache/vllm/torch_compile_cache/3c9d1a2b04/rank_0_0/backbone for vLLM's torch.compile",
            worker(0),
        )
        yield w.log("INFO", "monitor.py:34", "torch.compile takes 48.37 s in total", worker(0))
    if fail:
        yield from _profile_oom(w, worker(0))
        return
    if v1:
        yield w.log("INFO", "gpu_worker.py:298", "Available KV cache memory: 38.51 GiB", worker(0))
        yield w.log("INFO", "kv_cache_utils.py:1087", "GPU KV cache size: 504,704 tokens", core)
        yield w.log(
            "INFO",
            "kv_cache_utils.py:1091",
            "Maximum concurrency for 32,768 tokens per request: 15.40x",
            core,
        )
    else:
        yield w.log(
            "INFO", "distributed_gpu_executor.py:57", "# GPU blocks: 31544, # CPU blocks: 3276"
        )
    for k in range(0, 68, 4):
        w.clock.tick(0.7)
        yield w.raw(
            f"Capturing CUDA graph shapes: {k * 100 // 67:3d}%|{'█' * (k // 7):10s}| {k}/67 [00:{k // 5:02d}<00:09,  5.12it/s]"
        )
    yield w.raw("Capturing CUDA graph shapes: 100%|██████████| 67/67 [00:13<00:00,  5.12it/s]")
    yield w.log(
        "INFO",
        "gpu_model_runner.py:3102" if v1 else "model_runner.py:1535",
        "Graph capturing finished in 13 secs, took 1.12 GiB",
        worker(0),
    )
    if v1:
        yield w.log(
            "INFO",
            "core.py:210",
            "init engine (profile, create kv cache, warmup model) took 71.66 seconds",
            core,
        )
    yield w.log(
        "INFO",
        "api_server.py:1971" if v1 else "api_server.py:640",
        "Starting vLLM API server 0 on http://0.0.0.0:8000",
    )
    for route in ("/health", "/v1/models", "/v1/chat/completions", "/v1/completions", "/metrics"):
        yield w.log(
            "INFO",
            "launcher.py:36",
            f"Route: {route}, Methods: {'GET' if route in ('/health', '/v1/models', '/metrics') else 'POST'}",
        )
    yield w.raw(f"INFO:     Started server process [{w.pid}]")
    yield w.raw("INFO:     Waiting for application startup.")
    yield w.raw("INFO:     Application startup complete.")


def _profile_oom(w: _Writer, worker: str) -> Iterator[str]:
    """The profile run's out-of-memory error, as torch raises it inside a worker."""
    yield w.log(
        "ERROR",
        "core.py:708" if w.version == "v1" else "multiproc_worker_utils.py:116",
        "EngineCore failed to start."
        if w.version == "v1"
        else "Exception in worker VllmWorkerProcess while processing method determine_num_available_blocks.",
        worker,
    )
    yield w.raw(f"({worker}) Traceback (most recent call last):")
    yield w.raw(
        f'({worker})   File "/usr/lib/python3/site-packages/vllm/worker/worker.py", line 229, in determine_num_available_blocks'
    )
    yield w.raw(f"({worker})     self.model_runner.profile_run()")
    yield w.raw(
        f"({worker}) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.32 GiB. GPU 0 has a total "
        "capacity of 79.19 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has "
        "78.16 GiB memory in use."
    )


def _serving(w: _Writer, count: int) -> Iterator[str]:
    """``count`` serving lines: stats every few seconds, access lines, per-request logs."""
    rng = w.rng
    v1 = w.version == "v1"
    running = 0
    for _i in range(count):
        w.clock.tick(rng.uniform(0.05, 0.4))
        r = rng.random()
        if r < 0.30:
            running = max(0, min(64, running + rng.randint(-3, 3)))
            prompt, gen = rng.uniform(0, 9000), rng.uniform(0, 2500)
            kv = rng.uniform(0, 95)
            if v1:
                yield w.log(
                    "INFO",
                    "loggers.py:123",
                    f"Engine 000: Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation "
                    f"throughput: {gen:.1f} tokens/s, Running: {running} reqs, Waiting: "
                    f"{rng.randint(0, 4)} reqs, GPU KV cache usage: {kv:.1f}%, Prefix cache hit "
                    f"rate: {rng.uniform(0, 80):.1f}%",
                )
            else:
                yield w.log(
                    "INFO",
                    "metrics.py:449",
                    f"Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation throughput: "
                    f"{gen:.1f} tokens/s, Running: {running} reqs, Swapped: 0 reqs, Pending: "
                    f"{rng.randint(0, 4)} reqs, GPU KV cache usage: {kv:.1f}%, CPU KV cache usage: 0.0%.",
                )
        elif r < 0.85:
            path = rng.choice(
                (
                    "/v1/chat/completions",
                    "/v1/chat/completions",
                    "/v1/completions",
                    "/v1/models",
                    "/health",
                )
            )
            method = "GET" if path in ("/v1/models", "/health") else "POST"
            code = "200 OK" if rng.random() < 0.995 else "400 Bad Request"
            ip = f"10.0.{rng.randint(0, 40)}.{rng.randint(2, 250)}"
            yield w.raw(
                f'INFO:     {ip}:{rng.randint(30000, 65000)} - "{method} {path} HTTP/1.1" {code}'
            )
        elif r < 0.95:
            req = f"chatcmpl-{rng.getrandbits(64):016x}"
            yield w.log(
                "INFO",
                "logger.py:43" if v1 else "logger.py:37",
                f"Received request {req}: prompt: '', params: SamplingParams(n=1, temperature={rng.choice((0.0, 0.7, 1.0))}, top_p=1.0, max_tokens={rng.randint(16, 4096)}), prompt_token_ids: None, lora_request: None.",
            )
        else:
            yield w.log(
                "WARNING",
                "protocol.py:93" if v1 else "protocol.py:70",
                "The following fields were present in the request but ignored: {'stream_options'}",
            )


def journal(
    version: str, wrap: str, lines: int, *, failure: bool, startup_lines: int = 2000, seed: int = 11
) -> Iterator[str]:
    """The lines of one journal (without newlines)."""
    w = _Writer(version, wrap, random.Random(seed))
    start = list(_startup(w, startup_lines, fail=False))
    yield from start
    tail: list[str] = []
    if failure:  # systemd restarts the server; the new start fails in its profile run
        w2 = _Writer(version, wrap, random.Random(seed + 1))
        w2.clock.t = w.clock.t + 86400 * 0.9
        w2.pid = 5678
        tail = list(_startup(w2, 400, fail=True))
    yield from _serving(w, max(0, lines - len(start) - len(tail)))
    yield from tail


def write_journal(
    path: Path, version: str, wrap: str, lines: int, *, failure: bool, startup_lines: int = 2000
) -> Path:
    """Write one journal to ``path`` (buffered: about 200 MB for a million lines)."""
    with path.open("w", encoding="utf-8", buffering=1 << 20) as out:
        for line in journal(version, wrap, lines, failure=failure, startup_lines=startup_lines):
            out.write(line)
            out.write("\n")
    return path


def name_of(version: str, wrap: str, failure: bool) -> str:
    return f"serving_{version}_{wrap}_{'failed' if failure else 'ok'}.log"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--lines", type=int, default=1_000_000)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for version in VERSIONS:
        for wrap in WRAPS:
            for failure in (False, True):
                p = write_journal(
                    args.out / name_of(version, wrap, failure),
                    version,
                    wrap,
                    args.lines,
                    failure=failure,
                )
                print(p, p.stat().st_size)


if __name__ == "__main__":
    main()
