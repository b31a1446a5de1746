"""A small scripted vLLM-like server for end-to-end tests of ``bringup run``/``watch``.

Prints vLLM 0.33-style startup lines, then (mode ``ready``) listens on ``--port`` and
answers /health, /v1/models and /v1/completions like vLLM does. Other modes:

- ``oom``: a worker's root-cause line, then the process stays alive (``--linger`` seconds)
  and exits with ``--exit-code``
- ``config``: a config error (``max_model_len`` above the model's), then ``--teardown`` seconds
  (at most ``--linger``) and exit 1
- ``exit0``: the engine dies (wrapper line only) and the process exits 0
- ``hang``: stops printing after NCCL init and sleeps
- ``slow``: weight-loading progress every ``--step`` seconds for ``--shards`` shards, then ready
- ``die_after_ready``: ready, then after ``--linger`` seconds a fatal engine error and exit 0
- ``chatty``: ready, then ``--rate`` access-log/stats/NCCL lines per second (benchmarks)
- ``spawn``: like ready, plus a grandchild process (``--pidfile``) to check group cleanup

Stdlib only; lines are flushed one by one.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import subprocess
import sys
import threading
import time

P = f"(APIServer pid={os.getpid()}) INFO 11-30 09:47:00 [api_server.py:1] "
E = f"(EngineCore pid={os.getpid() + 1}) INFO 11-30 09:47:01 [core.py:139] "
EE = f"(EngineCore pid={os.getpid() + 1}) ERROR 11-30 09:47:02 [core.py:700] "


def say(text: str, *, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        say(f'INFO:     127.0.0.1:1 - "{self.command} {self.path} HTTP/1.1" 200 OK')

    def _send(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._send(200, {})
        elif self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": "fake/model", "object": "model"}]})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path == "/v1/completions" and body.get("max_tokens") == 1:
            self._send(
                200, {"choices": [{"text": " world", "index": 0}], "model": body.get("model")}
            )
        else:
            self._send(404, {"error": "not found"})


def listen(port: int, stamp_path: str | None = None) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)  # listening from here
    stamp(stamp_path)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    say(f"INFO:     Started server process [{os.getpid()}]")
    say("INFO:     Application startup complete.")


def startup_lines(shards: int, step: float) -> None:
    say(P + "vLLM server version 0.33.0, serving model fake/model")
    say(P + "non-default args: {'model': 'fake/model'}")
    say(P + "Resolved architecture: LlamaForCausalLM")
    say(E + "Initializing a V1 LLM engine (v0.33.0) with config: model='fake/model'")
    say(E + "vLLM is using nccl==2.21.5")


def load_and_ready(args: argparse.Namespace) -> None:
    say(E + "Starting to load model fake/model...")
    for i in range(1, args.shards + 1):
        time.sleep(args.step)
        pct = int(100 * i / args.shards)
        say(
            f"Loading safetensors checkpoint shards: {pct:3d}% Completed | {i}/{args.shards} [00:01<00:00,  1.00it/s]",
            err=True,
        )
    say(E + "Model loading took 1.50 GiB memory and 0.100000 seconds")
    say(
        E
        + "GPU KV cache size: 123,456 tokens, Maximum concurrency for 4,096 tokens per request: 30.14x"
    )
    say(E + "init engine (profile, create kv cache, warmup model) took 1.00 s")
    time.sleep(args.listen_delay)
    listen(args.port, args.stamp)


def stamp(path: str | None) -> None:
    if path:
        with open(path, "w") as f:
            f.write(repr(time.time()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="ready")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--step", type=float, default=0.05)
    ap.add_argument("--linger", type=float, default=30.0)
    ap.add_argument("--listen-delay", type=float, default=0.0)
    ap.add_argument("--teardown", type=float, default=3.0, help="config: seconds before exit 1")
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--pidfile")
    ap.add_argument("--exit-code", type=int, default=0, help="oom: the status to exit with")
    ap.add_argument(
        "--stamp",
        help="write time.time() here when the root-cause line is written or the port listens",
    )
    ap.add_argument("--api-key", help="echoed in the arguments line, as vLLM echoes its own")
    args = ap.parse_args()
    if args.api_key:
        say(P + f"non-default args: {{'api_key': '{args.api_key}', 'port': {args.port}}}")
    startup_lines(args.shards, args.step)
    if args.mode == "hang":
        time.sleep(3600)
    if args.mode == "oom":
        say(E + "Starting to load model fake/model...")
        stamp(args.stamp)
        say(
            EE
            + "torch.OutOfMemoryError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine."
        )
        time.sleep(args.linger)
        sys.exit(args.exit_code)
    if args.mode == "config":  # a config error no later line refines, then vLLM tears down
        stamp(args.stamp)
        say(
            EE + "ValueError: User-specified max_model_len (4096) is greater than the derived "
            "max_model_len (max_position_embeddings=2048 or model_max_length=None in model's "
            "config.json)."
        )
        time.sleep(min(args.linger, args.teardown))
        sys.exit(1)
    if args.mode == "exit0":
        say(E + "Starting to load model fake/model...")
        say(
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
            err=True,
        )
        sys.exit(0)
    if args.mode == "spawn" and args.pidfile:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        with open(args.pidfile, "w") as f:
            f.write(str(child.pid))
    load_and_ready(args)
    if args.mode == "die_after_ready":
        time.sleep(args.linger)
        say(EE + "EngineCore encountered a fatal error.")
        say(
            f"(APIServer pid={os.getpid()}) ERROR 11-30 09:48:00 [async_llm.py:1] AsyncLLM output_handler failed."
        )
        sys.exit(0)
    if args.mode == "chatty":
        chatter(args.rate)
    time.sleep(3600)


def chatter(rate: float) -> None:
    lines = [
        P.replace("INFO", "INFO")
        + "Avg prompt throughput: 1234.5 tokens/s, Avg generation throughput: 456.7 tokens/s, Running: 12 reqs, Waiting: 0 reqs, GPU KV cache usage: 23.4%, Prefix cache hit rate: 45.6%",
        'INFO:     10.0.0.7:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        "gpu-node-3:1234:5678 [0] NCCL INFO Channel 00/24 : 0[0] -> 1[1] via P2P/IPC/read",
        'INFO:     10.0.0.8:40110 - "POST /v1/completions HTTP/1.1" 200 OK',
    ]
    interval = 1.0 / rate
    i = 0
    next_at = time.monotonic()
    while True:
        say(lines[i % len(lines)])
        i += 1
        next_at += interval
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)


if __name__ == "__main__":
    main()
