"""Knowledge packs: one per engine, all data. ``get(engine)`` and ``all_packs()`` are the API.

The supervisor reads ``get(engine).http`` (an ``HttpSpec``) to probe readiness; the
analyzer walks a pack's tables to read a log. Every pack also carries the engine-agnostic
signatures of ``common``; ``generic()`` is what the analyzer reads with while the engine is
not known: the common signatures first, then every pack's own (each marked with its owner,
so a line only one engine prints names that engine).
"""

from __future__ import annotations

import dataclasses
from functools import cache

from bringup.core.packs import common, llamacpp, messages, ollama, sglang, tgi, vllm
from bringup.core.packs.index import required
from bringup.core.packs.types import EngineFlags, HttpSpec, Pack, Signature
from bringup.core.vocab import Engine

__all__ = ["HttpSpec", "Pack", "all_packs", "declared", "generic", "get"]

# every line a common signature matches carries one of these ("NCCL" alone would let every
# NCCL INFO line through the screen: 55 % of a multi-GPU log, 150x slower)
_COMMON_SCREEN = (
    *("rror", "out of memory", "Killed", "NCCL WARN", "oom-kill", "actor is dead"),
    *("gfx", "ROCm", "HSA_"),  # the platform and the GPU architecture ROCm remedies name
)
# in vLLM's lines these carry "rror", ".py" or "Killed" too: no extra scan for them
_COVERED_IN_VLLM = ("out of memory", "oom-kill")

# A line none of these occur in matches no pack's signature or phase marker: what the analyzer
# reads with while the engine is unknown (every engine but vLLM reads all lines once known).
_GENERIC_SCREEN = (
    *_COMMON_SCREEN,
    *("ERROR", "Error", "xception", "Traceback", "WARN", "fatal", "Fatal", "panic", "abort"),
    *("failed", "Failed", "fail", ".py", "signal", "bind", "listen", "Listening", "ready"),
    *("oad", "llama", "ggml", "gguf", "GGUF", "cuda", "CUDA", "Shard", "shard", "Capture"),
    *("KV", "kv", "erver", "eight", "model", "Uvicorn", "Application", "Start", "start"),
    *("nccl", "init", "Init", "Args", "build", "version", "memory", "graph", "Graph"),
    *("max seq len", "custom code", "PC: @", "device", "runner", "Processed prompts", "200"),
    *("Waiting", "waiting", "Connected", "offload", "ServerArgs", "rank", "torch", "throughput"),
)


# a signature's own required string this long is specific enough to screen for (shorter ones,
# "NCCL " or "in use", would let most lines of a log through)
_MIN_SCREEN_STRING = 10


def _signature_screen(
    signatures: tuple[Signature, ...], screen: tuple[str, ...]
) -> tuple[str, ...]:
    """The screen tokens a fragment needs so that every line a signature states a cause in
    reaches it while the engine is not known: the long required strings the hand-written
    screen does not cover already."""
    extra: dict[str, None] = {}
    for sig in signatures:
        for token in sorted(sig.required or required(sig.pattern) or ()):
            if len(token) >= _MIN_SCREEN_STRING and not any(t in token for t in screen):
                extra[token] = None
    return tuple(extra)


def _with_common(pack: Pack) -> Pack:
    screen = pack.screen
    if screen is not None:  # a token another already covers adds a scan, not a line
        extra = [t for t in _COMMON_SCREEN if not any(o in t for o in screen)]
        if pack.engine is Engine.VLLM:
            extra = [t for t in extra if t not in _COVERED_IN_VLLM]
        screen = screen + tuple(extra)
        screen += _signature_screen(common.EARLY + common.SIGNATURES, screen)
    # the engine's own messages last: a hand-written signature says more where both match
    own = messages.signatures(pack.engine) if pack.engine is not None else ()
    first = tuple(s for s in pack.signatures if not s.fallback)
    last = tuple(s for s in pack.signatures if s.fallback)
    return dataclasses.replace(
        pack,
        signatures=common.EARLY + first + common.SIGNATURES + own + last,
        facts=pack.facts + common.FACTS,
        screen=screen,
    )


_DECLARED: dict[Engine, Pack] = {
    pack.engine: pack
    for pack in (vllm.PACK, sglang.PACK, tgi.PACK, ollama.PACK, llamacpp.PACK)
    if pack.engine is not None
}
# each engine's whole pack, made at its first use: a log of one engine never pays for the
# others' message tables (hundreds of signatures each)
_PACKS: dict[Engine, Pack] = {}


def get(engine: Engine) -> Pack:
    """The pack for ``engine``."""
    engine = Engine(engine)
    pack = _PACKS.get(engine)
    if pack is None:  # two threads may both make it: the first one stored is everyone's
        pack = _PACKS.setdefault(engine, _with_common(_DECLARED[engine]))
    return pack


def all_packs() -> tuple[Pack, ...]:
    """Every pack, vLLM first (the order auto-detection tries them in)."""
    return tuple(get(engine) for engine in _DECLARED)


def declared() -> tuple[Pack, ...]:
    """Every pack as its module declares it, vLLM first: without what :func:`get` merges in
    (the common signatures, facts and screen tokens, the message tables). For what the merge
    leaves as it is: detection, flags, entry points, HTTP, phases and restarts."""
    return tuple(_DECLARED.values())


@cache
def generic() -> Pack:
    """The pack for a log whose engine is not known: every pack's tables, merged."""
    # a signature two packs share (Ollama embeds llama.cpp's) belongs to the one it came from
    seen = set(common.SIGNATURES) | set(common.EARLY)
    own = []
    for pack in sorted(all_packs(), key=lambda p: p.engine is Engine.OLLAMA):
        for sig in pack.signatures:
            if sig not in seen:
                seen.add(sig)
                own.append(dataclasses.replace(sig, owner=pack.engine))
    base = all_packs()[0]
    signatures = common.EARLY + common.SIGNATURES + tuple(own)
    return dataclasses.replace(
        base,
        engine=None,
        detect=(),
        version=(),
        phases=tuple(m for p in all_packs() for m in p.phases),
        progress=tuple(r for p in all_packs() for r in p.progress),
        facts=tuple({id(f): f for p in all_packs() for f in p.facts}.values()),
        signatures=signatures,
        exclusions=tuple(x for p in all_packs() for x in p.exclusions),
        frames=tuple(f for p in all_packs() for f in p.frames),
        # the hand-written signatures' strings; a message table's lines carry the screen's
        # "rror"/"ERROR"/"failed" (its thousands of phrases would slow every line's scan)
        screen=_GENERIC_SCREEN
        + _signature_screen(tuple(s for s in signatures if s.required is None), _GENERIC_SCREEN),
        heartbeats=(),
        hang_classes={k: v for p in all_packs() for k, v in p.hang_classes.items()},
        phase_after={k: v for p in all_packs() for k, v in p.phase_after.items()},
        restart=(),
        echoes=tuple(e for p in all_packs() for e in p.echoes),
        hang_points=tuple(h for p in all_packs() for h in p.hang_points),
        entry_points=(),
        flags=EngineFlags(known=False),  # the engine is not known (signatures know their owner)
    )
