"""Signatures read from the engines' own source: the message tables beside the packs.

``tools/engine_messages.py`` lists every failure an engine's startup path can print (its
``raise``, error-log, ``panic!``, ``LLAMA_LOG_ERROR``, ``fmt.Errorf`` sites, per version) with a
pattern and a class, into ``bringup/data/messages/<engine>-<version>.jsonl`` (package data, read
like the packs' code is: part of the program, not of the machine). A pack carries, after its
hand-written signatures (first match wins, so those keep what the code cannot say: the CUDA
driver, NCCL, the kernel, and the lines whose numbers a remedy reads), one signature per
distinct pattern of its engine's tables, newest version first. Their required strings go into
the pack's Aho-Corasick index like every other pattern's (``packs.index``), so a line costs
the same automaton pass; a table signature is searched only when its literal text occurs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from importlib import resources
from typing import cast

from bringup.core.diagnosis import Remedy
from bringup.core.packs import memory_remedies as mem
from bringup.core.packs import remedies as r
from bringup.core.packs.types import RemedyBuilder, RemedyContext, Signature
from bringup.core.vocab import Engine, FailureClass, Phase

F = FailureClass

_NAMES = {
    Engine.VLLM: "vLLM",
    Engine.SGLANG: "SGLang",
    Engine.TGI: "TGI",
    Engine.LLAMACPP: "llama.cpp",
    Engine.OLLAMA: "Ollama",
}
# what a failure of the class means, and what to change (the class's general remedy)
_MEANING: dict[FailureClass, tuple[str, RemedyBuilder]] = {
    F.CONFIG_ERROR: ("the flags or the model's configuration are refused", r.fix_flags),
    F.MISSING_OR_CORRUPT_WEIGHTS: (
        "the checkpoint's files are missing, incomplete or not what it expects",
        r.redownload,
    ),
    F.UNSUPPORTED_HARDWARE: (
        "this device, platform or build cannot do what was asked",
        r.wrong_build,
    ),
    F.CUDA_OOM: ("GPU memory ran out", mem.cuda_oom),
    F.KV_CACHE_INSUFFICIENT: ("the KV cache is too small for what was asked", mem.no_kv_memory),
    F.GPU_MEMORY_UTILIZATION: (
        "the memory it may take does not match the memory that is free",
        mem.free_memory,
    ),
    F.NCCL_ERROR: ("communication between its processes or GPUs failed", r.nccl),
    F.PORT_IN_USE: ("a port it needs is taken", r.port_in_use),
    F.TIMEOUTS: ("it waited for a step that did not finish in time", r.stalled),
    F.HOST_OOM: ("host memory ran out", r.host_oom),
    F.ENGINE_CORE_DIED: ("a process of the engine stopped", r.engine_died),
}


@cache
def _owned(builder: RemedyBuilder) -> RemedyBuilder:
    """The class's remedy with only the flags the engine has (the classes' remedies are shared
    by every engine's tables; SGLang has no --gpu-memory-utilization)."""

    def build(ctx: RemedyContext) -> tuple[Remedy, ...]:
        return r.own(ctx.flags, builder(ctx))

    return build


def _rows(engine: Engine) -> Iterator[dict[str, object]]:
    """The rows of the engine's tables that are loaded, newest version first."""
    folder = resources.files("bringup.data").joinpath("messages")
    if not folder.is_dir():
        return
    tables = [t for t in folder.iterdir() if t.name.startswith(f"{engine.value}-")]
    for table in sorted(tables, key=lambda t: _version_key(t.name), reverse=True):
        for line in table.read_text(encoding="utf-8").splitlines()[1:]:
            row = json.loads(line)
            if row.get("load"):
                yield row


class _Lazy:
    """A table's pattern, compiled at its first search: the index searches one only when its
    literal text occurs in a line, so most are never compiled (hundreds per engine, each
    ~0.3 ms to compile). Has what the analyzer uses of a ``re.Pattern``."""

    __slots__ = ("_compiled", "flags", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.flags = re.UNICODE
        self._compiled: re.Pattern[str] | None = None

    def search(self, text: str) -> re.Match[str] | None:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern)
        return self._compiled.search(text)


_ESCAPED = re.compile(r"\\(.)")


def _literals(pattern: str) -> list[str]:
    """The literal runs of a table pattern (escaped text joined by ``.*?``)."""
    return [_ESCAPED.sub(_unescape, run) if "\\" in run else run for run in pattern.split(".*?")]


def _unescape(m: re.Match[str]) -> str:
    return m.group(1)


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", name.rpartition("-")[2]))


# a message that carries another: its text says an error came and the value after its last
# colon is that error ("error loading model: {}", "failed to open x: {}"); "unknown load mode:
# {}" ends in a value that is no message
_CARRIER = re.compile(
    r"(?:error|fail|exception|could not|couldn't|cannot|unable)[^:]*:\s*\{\}\W*$", re.IGNORECASE
)


@cache
def signatures(engine: Engine) -> tuple[Signature, ...]:
    """One signature per distinct pattern of the engine's tables, the most literal first (a
    more specific message is tried before a shorter one its text contains)."""
    name = _NAMES[engine]
    seen: dict[str, Signature] = {}
    carriers: set[str] = set()
    lengths: dict[str, int] = {}  # of each pattern's literal text
    for row in _rows(engine):
        pattern = str(row["pattern"])
        if pattern in seen:
            continue
        literals = _literals(pattern)
        lengths[pattern] = sum(len(run) for run in literals)
        cls = FailureClass(str(row["class"]))
        meaning, remedy = _MEANING[cls]
        where = f"{row['file']}:{row['line']}"
        if _CARRIER.search(str(row["template"])):
            carriers.add(f"code:{where}")
        seen[pattern] = Signature(
            f"code:{where}",
            cast("re.Pattern[str]", _Lazy(pattern)),
            cls,
            f"{name} stopped at its own check in {where}: {meaning}.",
            _owned(remedy),
            Phase(str(row["phase"])) if row.get("phase") else None,
            # a death or a failed start is a summary: the line that says why comes first
            is_wrapper=cls is F.ENGINE_CORE_DIED,
            required=frozenset({max(literals, key=len)}),
            loud_only=True,
        )
    # a message that ends in another message ("error loading model: {}") goes after the
    # messages it may carry
    return tuple(
        sorted(
            seen.values(),
            key=lambda s: (s.name in carriers, -lengths[s.pattern.pattern]),
        )
    )
