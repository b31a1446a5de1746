"""HTTP probes of a starting server. Each returns a ``ProbeObservation``; deciding is elsewhere.

Command line equivalents::

    curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/health
    curl -s http://127.0.0.1:8000/v1/models
    curl -s http://127.0.0.1:8000/v1/completions -H 'Content-Type: application/json' \\
         -d '{"model": "MODEL", "prompt": "Hello", "max_tokens": 1}'
"""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx2

from bringup.core.probes import ProbeKind, ProbeObservation

_FALLBACK_STATUSES = frozenset({400, 404, 405, 422, 501})  # completions not offered: try chat
SMOKE_PROMPT = "Hello"


def api_key_from(explicit: str | None, environ: Mapping[str, str]) -> str | None:
    """``--api-key``, else OPENAI_API_KEY, else VLLM_API_KEY."""
    return explicit or environ.get("OPENAI_API_KEY") or environ.get("VLLM_API_KEY") or None


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class HttpProber:
    """Probes one server at ``base_url`` (e.g. ``http://127.0.0.1:8000``)."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        client: httpx2.Client | None = None,
        health_timeout_seconds: float = 3.0,
        smoke_timeout_seconds: float = 60.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.has_key = bool(api_key)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = client or httpx2.Client(trust_env=False)
        self._client.headers.update(headers)
        self._health_timeout = health_timeout_seconds
        self._smoke_timeout = smoke_timeout_seconds

    def close(self) -> None:
        """Release connections."""
        self._client.close()

    def get_text(self, path: str, limit: int = 4_000_000) -> str | None:
        """GET ``path`` (``/metrics``, ``/v1/models``): its text on 200, else None."""
        try:
            response = self._client.get(self.base_url + path, timeout=self._health_timeout)
        except httpx2.HTTPError:
            return None
        return response.text[:limit] if response.status_code == 200 else None

    def probe(
        self, kind: ProbeKind, *, health_path: str = "/health", model: str | None = None
    ) -> ProbeObservation:
        """Run one probe of ``kind``."""
        if kind is ProbeKind.HEALTH:
            return self.health(health_path)
        if kind is ProbeKind.MODELS:
            return self.models()
        return self.smoke(model)

    def health(self, path: str) -> ProbeObservation:
        """GET the health path: ok on 200."""
        url = self.base_url + path
        obs, response = self._request(ProbeKind.HEALTH, "GET", url, None, self._health_timeout)
        if response is None:
            return obs
        ok = response.status_code == 200
        return dataclasses.replace(
            obs,
            ok=ok,
            error=None if ok else _short(response.text) or f"HTTP {response.status_code}",
        )

    def models(self) -> ProbeObservation:
        """GET /v1/models: ok when it lists at least one model; the first id is the model."""
        url = self.base_url + "/v1/models"
        obs, response = self._request(ProbeKind.MODELS, "GET", url, None, self._health_timeout)
        if response is None:
            return obs
        model = _first_model(_json(response))
        ok = response.status_code == 200 and model is not None
        error = None if ok else _short(response.text) or f"HTTP {response.status_code}"
        return dataclasses.replace(obs, ok=ok, model=model, error=error)

    def smoke(self, model: str | None) -> ProbeObservation:
        """A 1-token completion; /v1/chat/completions when /v1/completions is not offered."""
        body: dict[str, Any] = {"prompt": SMOKE_PROMPT, "max_tokens": 1, "temperature": 0}
        if model:
            body["model"] = model
        obs = self._smoke_once("/v1/completions", body, model)
        if obs.ok or obs.status not in _FALLBACK_STATUSES:
            return obs
        chat = {k: v for k, v in body.items() if k != "prompt"}
        chat["messages"] = [{"role": "user", "content": SMOKE_PROMPT}]
        return self._smoke_once("/v1/chat/completions", chat, model)

    def _smoke_once(self, path: str, body: dict[str, Any], model: str | None) -> ProbeObservation:
        url = self.base_url + path
        obs, response = self._request(ProbeKind.SMOKE, "POST", url, body, self._smoke_timeout)
        if response is None:
            return dataclasses.replace(obs, model=model)
        data = _json(response)
        text = _answer_text(data)
        ok = response.status_code == 200 and text is not None
        error = None if ok else _short(response.text) or f"HTTP {response.status_code}"
        return dataclasses.replace(obs, ok=ok, model=model, text=text, error=error)

    def _request(
        self, kind: ProbeKind, method: str, url: str, body: dict[str, Any] | None, timeout: float
    ) -> tuple[ProbeObservation, httpx2.Response | None]:
        started = time.monotonic()
        try:
            response = self._client.request(method, url, json=body, timeout=timeout)
        except httpx2.ConnectError as exc:
            refused = "refused" in str(exc).lower() or "errno 111" in str(exc).lower()
            return _failed(
                kind, url, started, refused, "connection refused" if refused else _short(str(exc))
            ), None
        except httpx2.TimeoutException:
            return _failed(kind, url, started, False, f"no answer within {timeout:g}s"), None
        except httpx2.HTTPError as exc:
            return _failed(kind, url, started, False, _short(f"{type(exc).__name__}: {exc}")), None
        latency = time.monotonic() - started
        return ProbeObservation(
            kind, url, ok=False, status=response.status_code, latency_seconds=latency
        ), response


def _failed(
    kind: ProbeKind, url: str, started: float, refused: bool, error: str
) -> ProbeObservation:
    return ProbeObservation(
        kind,
        url,
        ok=False,
        refused=refused,
        error=error,
        latency_seconds=time.monotonic() - started,
    )


def _json(response: httpx2.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _first_model(data: Any) -> str | None:
    items = data.get("data") if isinstance(data, Mapping) else None
    if isinstance(items, Sequence) and items and isinstance(items[0], Mapping):
        ident = items[0].get("id")
        return str(ident) if ident else None
    return None


def _answer_text(data: Any) -> str | None:
    choices = data.get("choices") if isinstance(data, Mapping) else None
    if not isinstance(choices, Sequence) or not choices or not isinstance(choices[0], Mapping):
        return None
    choice = choices[0]
    if isinstance(choice.get("text"), str):
        return str(choice["text"])
    message = choice.get("message")
    if isinstance(message, Mapping):
        content = message.get("content")
        return content if isinstance(content, str) else ""
    return None


def port_busy(url: str) -> bool:
    """Whether something already accepts connections at the URL's host and port."""
    try:
        hostport = url.split("://", 1)[1].split("/", 1)[0]
        host, _, port = hostport.rpartition(":")
        with socket.create_connection((host.strip("[]"), int(port)), timeout=0.5):
            return True
    except (OSError, ValueError):
        return False
