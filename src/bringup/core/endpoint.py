"""Where a server answers: its base URL from ``--url`` or its command line."""

from __future__ import annotations

from bringup.core import engine_args


def resolve_url(
    url: str | None, argv: list[str] | tuple[str, ...] | None, default_port: int
) -> str:
    """``--url``, else the command's --host/--port, else 127.0.0.1 and the engine's default port."""
    if url:
        return url.rstrip("/") if "://" in url else "http://" + url.rstrip("/")
    words = list(argv or [])
    host = engine_args.get_flag(words, "--host", "--hostname") or "127.0.0.1"
    port = engine_args.get_flag(words, "--port") or str(default_port)
    if host in ("0.0.0.0", "::", "[::]", "", "*"):
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"
