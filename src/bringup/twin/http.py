"""The twin's HTTP server: bound early, listening only once the engine is ready.

vLLM binds its port before creating the engine (so a TCP connect is refused, not hung,
during the whole startup) and calls ``listen()`` right after uvicorn's ``Application
startup complete.``. ``EarlyBoundServer`` does the same with the standard library:
``bind()`` in ``bind_early``, ``listen()`` in ``start``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bringup.twin.logfmt import LogWriter
from bringup.twin.openai import ApiError, ServerState, accept

ROUTES: list[tuple[str, str]] = [
    ("/openapi.json", "GET, HEAD"),
    ("/docs", "GET, HEAD"),
    ("/redoc", "GET, HEAD"),
    ("/health", "GET"),
    ("/load", "GET"),
    ("/ping", "GET"),
    ("/ping", "POST"),
    ("/tokenize", "POST"),
    ("/detokenize", "POST"),
    ("/v1/models", "GET"),
    ("/version", "GET"),
    ("/v1/chat/completions", "POST"),
    ("/v1/completions", "POST"),
    ("/metrics", "GET"),
]


def bind_early(host: str, port: int) -> socket.socket:
    """vLLM's create_server_socket: SO_REUSEADDR, bind, no listen (raises OSError)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


class EarlyBoundServer(ThreadingHTTPServer):
    """A threading HTTP server over an already bound socket."""

    daemon_threads = True
    request_queue_size = 1024

    def __init__(self, sock: socket.socket, state: ServerState, log: LogWriter) -> None:
        super().__init__(sock.getsockname()[:2], Handler, bind_and_activate=False)
        self.socket.close()
        self.socket = sock
        self.state = state
        self.log = log
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """listen() and serve in a background thread."""
        self.server_activate()
        self._thread = threading.Thread(target=self.serve_forever, name="uvicorn", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self.shutdown()
        self.server_close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that resets or drops its connection is not an error (uvicorn logs nothing
        for it); anything else prints its traceback, as the standard library does.

        Without this a benchmark client closing a kept-alive connection printed a
        ``ConnectionResetError`` traceback into the engine's log, which a follower rightly reads
        as the engine dying."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    """Routes for the endpoints vLLM serves; logs each request in uvicorn's access format."""

    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""
    server: EarlyBoundServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # access lines are written by _access in uvicorn's format

    def _access(self, status: int) -> None:
        host, port = self.client_address[:2]
        path = self.path
        self.server.log.access(
            f"{host}:{port}", self.command, path, status, HTTPStatus(status).phrase
        )

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self._access(status)

    def _json(self, status: int, payload: Any) -> None:
        self._send(status, json.dumps(payload).encode())

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            raise ApiError(400, "BadRequestError", f"JSON decode error: {exc}") from exc
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequestError", "the request body must be a JSON object")
        return body

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def _route(self, method: str) -> None:
        state = self.server.state
        path = self.path.split("?", 1)[0]
        try:
            if not state.authorized(path, self.headers.get("authorization")):
                self._json(401, {"error": "Unauthorized"})
                return
            self._dispatch(method, path, state)
        except ApiError as exc:
            self._json(exc.status, exc.body())
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _dispatch(self, method: str, path: str, state: ServerState) -> None:
        simple = {
            ("GET", "/v1/models"): lambda: self._json(200, state.models()),
            ("GET", "/version"): lambda: self._json(200, state.version()),
            ("GET", "/load"): lambda: self._json(200, {"server_load": state.running}),
            ("GET", "/metrics"): lambda: self._send(
                200, state.metrics().encode(), "text/plain; version=0.0.4; charset=utf-8"
            ),
        }
        if (method, path) in simple:
            simple[(method, path)]()
        elif path in ("/health", "/ping"):
            self._send(503 if state.engine_dead else 200, b"", "text/plain")
        elif (method, path) == ("POST", "/tokenize"):
            self._json(200, state.tokenize(self._body()))
        elif method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            self._complete(path.endswith("chat/completions"))
        elif any(path == p for p, _ in ROUTES):
            self._json(405, {"detail": "Method Not Allowed"})
        else:
            self._json(404, {"detail": "Not Found"})

    def _complete(self, chat: bool) -> None:
        generation = accept(self.server.state, self._body(), chat)
        if not generation.stream:
            self._json(200, generation.response())
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self._access(200)
        try:
            for chunk in generation.chunks():
                self._chunk(f"data: {json.dumps(chunk)}\n\n")
        except ApiError as exc:
            self._chunk(f"data: {json.dumps(exc.body())}\n\n")
        self._chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        with contextlib.suppress(OSError):
            self.wfile.flush()

    def _chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()
