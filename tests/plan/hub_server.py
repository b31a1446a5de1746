"""A local HTTP server that speaks the two Hugging Face Hub endpoints huggingface_hub uses to
read a model without its weights (the Hub cannot be reached from here).

``HEAD/GET /{org}/{name}/resolve/{revision}/{file}``: the file's bytes (a ``Range: bytes=a-b``
request gets 206 and that slice), with the headers huggingface_hub reads (``ETag``,
``X-Repo-Commit``, ``Content-Length``, ``Accept-Ranges``); a file the repo lacks is 404 with
``X-Error-Code: EntryNotFound`` and a repo that is not there 404 ``RepoNotFound``, as the Hub
answers. Each request is recorded (method, path, range, bytes sent) so a test can check that
no weights were fetched.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class Hub:
    """The served repos (``org/name`` -> folder) and what was asked of them."""

    repos: dict[str, Path]
    url: str = ""
    requests: list[tuple[str, str, str, int]] = field(default_factory=list)

    def bytes_sent(self, suffix: str) -> int:
        """Bytes sent in bodies of files whose name ends with ``suffix``."""
        return sum(n for _, path, _, n in self.requests if path.endswith(suffix))


def _handler(hub: Hub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            return

        def do_HEAD(self) -> None:
            self._serve(body=False)

        def do_GET(self) -> None:
            self._serve(body=True)

        def _serve(self, *, body: bool) -> None:
            m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", self.path.split("?")[0])
            folder = hub.repos.get(m.group(1)) if m else None
            if m is None or folder is None:
                self._error(404, "RepoNotFound")
                return
            path = folder / m.group(3)
            if not path.is_file():
                self._error(404, "EntryNotFound")
                return
            size = path.stat().st_size
            start, end, status = 0, size - 1, 200
            wanted = self.headers.get("Range") or ""
            r = re.fullmatch(r"bytes=(\d+)-(\d*)", wanted)
            if r:
                start = int(r.group(1))
                end = min(int(r.group(2)) if r.group(2) else size - 1, size - 1)
                status = 206
            with path.open("rb") as fh:  # only the asked-for bytes are read
                fh.seek(start)
                chunk = fh.read(end + 1 - start) if body or status == 206 else b""
            digest = hashlib.sha256(f"{path}:{size}".encode()).hexdigest()
            self.send_response(status)
            self.send_header("Content-Length", str(len(chunk) if status == 206 else size))
            self.send_header("ETag", f'"{digest}"')
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("Accept-Ranges", "bytes")
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            self.end_headers()
            sent = len(chunk) if body else 0
            hub.requests.append((self.command, self.path, wanted, sent))
            if body:
                self.wfile.write(chunk)

        def _error(self, status: int, code: str) -> None:
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", f"{code} (test hub)")
            self.send_header("Content-Length", "0")
            self.end_headers()
            hub.requests.append((self.command, self.path, "", 0))

    return Handler


@contextmanager
def serve(repos: dict[str, Path]) -> Iterator[Hub]:
    """Serve ``repos`` on a loopback port for the ``with`` block."""
    hub = Hub(repos)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
