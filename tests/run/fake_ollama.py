"""A small scripted stand-in for ``ollama serve``, for end-to-end tests of ``bringup run``.

Real Ollama cannot be installed on the machines bringup is tested on, so this script plays
its part from Ollama's own formats: its logfmt server log on stderr (``time=... level=INFO
source=routes.go:1384 msg="Listening on 127.0.0.1:PORT (version 0.11.10)"``), GIN's request
lines, and the llama.cpp runner's lines while a model loads; and its HTTP API: ``GET /``,
``/api/version``, ``/api/tags``, ``/v1/models``, ``POST /v1/completions``,
``/v1/chat/completions`` and ``/api/generate``.

As Ollama does, it starts with no model loaded and listens on ``OLLAMA_HOST`` (host:port,
default 127.0.0.1:11434); the first request naming a model it has loads that model (a runner
starts, prints its load, then "llama runner started in N seconds") and only then answers.
A model it does not have is a 404 ``model "X" not found, try pulling it first``.

Environment: ``FAKE_OLLAMA_MODELS`` (comma-separated models in the store, default
``tiny:1b``), ``FAKE_OLLAMA_MODE``: ``ready`` (default), ``oom`` (the runner cannot allocate
its CUDA0 buffer and terminates; the request gets a 500 and the server goes on running), and
``FAKE_OLLAMA_LOAD_SECONDS`` (how long the load takes, default 1).

Stdlib only; lines are flushed one by one.
"""

from __future__ import annotations

import datetime as dt
import http.server
import json
import os
import sys
import threading
import time

VERSION = "0.11.10"
MODELS = [m for m in os.environ.get("FAKE_OLLAMA_MODELS", "tiny:1b").split(",") if m]
MODE = os.environ.get("FAKE_OLLAMA_MODE", "ready")
LOAD_SECONDS = float(os.environ.get("FAKE_OLLAMA_LOAD_SECONDS", "1"))
_lock = threading.Lock()
_loaded: set[str] = set()


def say(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def log(source: str, msg: str, *fields: str, level: str = "INFO") -> None:
    now = dt.datetime.now().astimezone().isoformat(timespec="milliseconds")
    quoted = msg if " " not in msg and "=" not in msg else json.dumps(msg)
    say(" ".join([f"time={now} level={level} source={source} msg={quoted}", *fields]))


def gin(status: int, seconds: float, method: str, path: str) -> None:
    stamp = time.strftime("%Y/%m/%d - %H:%M:%S")
    say(f'[GIN] {stamp} | {status} | {seconds:>10.6f}s |       127.0.0.1 | {method:<7} "{path}"')


def load(model: str) -> str | None:
    """Load ``model`` as Ollama's scheduler does, printing what the runner prints; the
    error text when the runner dies."""
    blob = "/root/.ollama/models/blobs/sha256-" + "5f" * 32
    step = LOAD_SECONDS / 4
    log(
        "server.go:398",
        "starting runner",
        f'cmd="/usr/local/bin/ollama runner --model {blob} --port 40123"',
    )
    log("runner.go:864", "starting go runner")
    log("server.go:1250", "waiting for llama runner to start responding")
    log(
        "server.go:1284",
        "waiting for server to become available",
        'status="llm server loading model"',
    )
    say(
        f"llama_model_loader: loaded meta data with 30 key-value pairs and 147 tensors from {blob} "
        "(version GGUF V3 (latest))"
    )
    time.sleep(step)
    say("load_tensors: loading model tensors, this can take a while... (mmap = true)")
    time.sleep(step)
    if MODE == "oom":
        say(
            "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB on device 0: "
            "cudaMalloc failed: out of memory"
        )
        say("alloc_tensor_range: failed to allocate CUDA0 buffer of size 4294967296")
        say("llama_model_load: error loading model: unable to allocate CUDA0 buffer")
        error = "llama runner process has terminated: error loading model: unable to allocate CUDA0 buffer"
        log("sched.go:489", "error loading llama server", f'error="{error}"', level="ERROR")
        return error
    say("load_tensors: offloaded 0/17 layers to GPU")
    say("load_tensors:   CPU_Mapped model buffer size =   636.18 MiB")
    time.sleep(step)
    say("llama_context: n_ctx         = 4096")
    say("llama_kv_cache_unified:        CPU KV buffer size =   128.00 MiB")
    time.sleep(step)
    log("server.go:1288", f"llama runner started in {LOAD_SECONDS + 0.02:.2f} seconds")
    return None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass  # GIN lines are written by the handlers

    def _send(self, code: int, body: object, started: float) -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        gin(code, time.monotonic() - started, self.command, self.path)

    def do_GET(self) -> None:
        started = time.monotonic()
        if self.path == "/":
            self._send(200, "Ollama is running", started)
        elif self.path == "/api/version":
            self._send(200, {"version": VERSION}, started)
        elif self.path == "/api/tags":
            self._send(200, {"models": [{"name": m, "model": m} for m in MODELS]}, started)
        elif self.path == "/v1/models":
            data = [{"id": m, "object": "model", "owned_by": "library"} for m in MODELS]
            self._send(200, {"object": "list", "data": data}, started)
        else:
            self._send(404, "404 page not found", started)

    def do_POST(self) -> None:
        started = time.monotonic()
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = {}
        if self.path not in ("/v1/completions", "/v1/chat/completions", "/api/generate"):
            self._send(404, "404 page not found", started)
            return
        model = str(body.get("model") or "")
        if model not in MODELS:
            message = f'model "{model}" not found, try pulling it first'
            error = {"error": message if self.path.startswith("/api") else {"message": message}}
            self._send(404, error, started)
            return
        with _lock:  # one load at a time, as the scheduler does
            failed = None if model in _loaded else load(model)
            if failed is None:
                _loaded.add(model)
        if failed is not None:
            self._send(500, {"error": failed}, started)
            return
        if self.path == "/api/generate":
            answer: object = {"model": model, "response": "Hi", "done": True}
        elif self.path == "/v1/completions":
            answer = {
                "object": "text_completion",
                "model": model,
                "choices": [{"text": "Hi", "index": 0}],
            }
        else:
            message = {"role": "assistant", "content": "Hi"}
            answer = {
                "object": "chat.completion",
                "model": model,
                "choices": [{"message": message, "index": 0}],
            }
        self._send(200, answer, started)


def main() -> int:
    if sys.argv[1:2] != ["serve"]:
        say("Error: unknown command; this stand-in only serves")
        return 1
    value = os.environ.get("OLLAMA_HOST", "127.0.0.1:11434").split("://")[-1]
    host, _, port = value.rpartition(":")
    log(
        "routes.go:1331",
        "server config",
        f'env="map[OLLAMA_HOST:http://{value} OLLAMA_KEEP_ALIVE:5m0s OLLAMA_MODELS:/root/.ollama/models]"',
    )
    log("images.go:477", f"total blobs: {len(MODELS)}")
    log("images.go:484", "total unused blobs removed: 0")
    try:
        server = http.server.ThreadingHTTPServer((host or "127.0.0.1", int(port)), Handler)
    except OSError:
        say(f"Error: listen tcp {value}: bind: address already in use")
        return 1
    log("routes.go:1384", f"Listening on {value} (version {VERSION})")
    log("gpu.go:217", "looking for compatible GPUs")
    log("gpu.go:377", "no compatible GPUs were discovered")
    log(
        "types.go:130",
        "inference compute",
        'id=0 library=cpu variant="" compute="" driver=0.0 name="" total="23.5 GiB" available="20.1 GiB"',
    )
    server.daemon_threads = True
    server.serve_forever()
    return 0


if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    raise SystemExit(main())
