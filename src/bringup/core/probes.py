"""What the HTTP probes of a starting server saw: observations only (``core.startup`` decides)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ProbeKind(StrEnum):
    """The three probes, in the order readiness needs them."""

    HEALTH = "health"  # GET the engine's health path
    MODELS = "models"  # GET /v1/models for the served model name
    SMOKE = "smoke"  # a 1-token completion: the model really answers


@dataclass(frozen=True, slots=True)
class ProbeObservation:
    """What one HTTP probe saw. Observations only; ``StartupMachine`` decides."""

    kind: ProbeKind
    url: str
    ok: bool  # health 200 / models listed / smoke answered
    status: int | None = None  # HTTP status, None when no response
    refused: bool = False  # connection refused (vLLM's "not listening yet")
    error: str | None = None  # short error text when not ok
    latency_seconds: float = 0.0
    model: str | None = None  # models: the first served model id; smoke: the model used
    text: str | None = None  # smoke: the answer text


def probe_fields(obs: ProbeObservation) -> dict[str, Any]:
    """The fields of a ``probe`` event."""
    return {
        "probe": obs.kind.value,
        "url": obs.url,
        "ok": obs.ok,
        "status": obs.status,
        "refused": obs.refused,
        "error": obs.error,
        "latency_seconds": round(obs.latency_seconds, 4),
        "model": obs.model,
        **({"answer": obs.text} if obs.kind is ProbeKind.SMOKE and obs.ok else {}),
    }
