"""Knowledge packs: one per engine, all data. ``get(engine)`` and ``all_packs()`` are the API.

The supervisor reads ``get(engine).http`` (an ``HttpSpec``) to probe readiness; the
analyzer walks a pack's tables to read a log.
"""

from __future__ import annotations

from bringup.core.packs import llamacpp, sglang, tgi, vllm
from bringup.core.packs.types import HttpSpec, Pack
from bringup.core.vocab import Engine

__all__ = ["HttpSpec", "Pack", "all_packs", "get"]

_PACKS: dict[Engine, Pack] = {
    pack.engine: pack for pack in (vllm.PACK, sglang.PACK, tgi.PACK, llamacpp.PACK)
}


def get(engine: Engine) -> Pack:
    """The pack for ``engine``."""
    return _PACKS[Engine(engine)]


def all_packs() -> tuple[Pack, ...]:
    """Every pack, vLLM first (the order auto-detection tries them in)."""
    return tuple(_PACKS.values())
