"""Where a server answers and how to ask it: its base URL from ``--url`` or its command line,
the API key it was started with, ``${NAME}`` words filled in from a unit's environment."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bringup.core import engine_args


def resolve_url(
    url: str | None,
    argv: list[str] | tuple[str, ...] | None,
    default_port: int,
    host_value: str | None = None,
) -> str:
    """``--url``, else the command's --host/--port, else ``host_value`` (the engine's host
    variable, e.g. OLLAMA_HOST), else 127.0.0.1 and the engine's default port."""
    if url:
        return url.rstrip("/") if "://" in url else "http://" + url.rstrip("/")
    words = list(argv or [])
    host = engine_args.get_flag(words, "--host", "--hostname")
    port = engine_args.get_flag(words, "--port")
    scheme = "http"
    if host is None and port is None and host_value:
        scheme, host, port = _split_host(host_value.strip(), str(default_port))
    host = host or "127.0.0.1"
    port = port or str(default_port)
    if host in ("0.0.0.0", "::", "[::]", "", "*"):
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


def _split_host(value: str, default_port: str) -> tuple[str, str, str]:
    """``host``, ``host:port``, ``:port``, ``[v6]:port`` or ``scheme://host:port/`` as
    (scheme, host, port), the way Ollama reads OLLAMA_HOST (port 11434 when none is given)."""
    scheme = "http"
    if "://" in value:
        scheme, value = value.split("://", 1)
    value = value.split("/", 1)[0]
    if value.startswith("["):  # [v6] or [v6]:port
        host, _, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif value.count(":") == 1:
        host, port = value.split(":")
    else:  # a bare host (or a bare IPv6 address)
        host, port = value, ""
    return scheme or "http", host, port if port.isdigit() else default_port


def variable_value(name: str, argv: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """``NAME``'s value for a command: from its own ``NAME=value`` words (``env NAME=v cmd``
    or ``NAME=v cmd``), else from the environment it inherits."""
    for word in argv:
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
        if "=" not in word and word != "env" and not word.startswith("-"):
            break  # the program: the words after it are its arguments
    return environ.get(name)


API_KEY_FLAG = "--api-key"  # vLLM, SGLang, llama.cpp's server and TGI's router all spell it so
API_KEY_VARIABLES = ("VLLM_API_KEY", "OPENAI_API_KEY")  # what the engines read when no flag


def server_api_key(argv: Sequence[str], environment: Mapping[str, str] | None = None) -> str | None:
    """The key the server itself was started with: its ``--api-key`` (first one: vLLM accepts
    several), else ``VLLM_API_KEY`` in its environment; None when it needs none, or when the
    value is still an unexpanded ``${NAME}``."""
    key = engine_args.get_flag(list(argv), API_KEY_FLAG)
    if key and not key.startswith("$"):
        return key
    for name in API_KEY_VARIABLES[:1]:
        value = (environment or {}).get(name)
        if value:
            return value
    return None


def expand_references(argv: Sequence[str], environment: Mapping[str, str]) -> list[str]:
    """``${NAME}`` and ``$NAME`` words replaced by their value in ``environment`` (as systemd
    does for a unit's ``ExecStart=``); unknown names are kept as written."""
    out: list[str] = []
    for word in argv:
        name = word[2:-1] if word.startswith("${") and word.endswith("}") else None
        if name is None and word.startswith("$") and word[1:].replace("_", "a").isalnum():
            name = word[1:]
        out.append(environment.get(name, word) if name else word)
    return out
