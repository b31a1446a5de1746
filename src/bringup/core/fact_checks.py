"""Facts that contradict a healthy start (issue 24, rule b), stated once for every engine.

An engine reports figures while it starts (the KV cache memory it has left, the tokens it
profiled, the free memory it found, its parallel sizes); some values no healthy start can
have. When one is read, the line that carries it is the cause, with its numbers in the
summary, even when nothing is logged as an error (vLLM's ``Available KV cache memory: -2.14
GiB`` is an INFO line; the ValueError that follows may be cut from a pasted fragment). A
check reads only the analyzer's facts (``FactRule`` names): a pack that reads a figure under
the same name gets the check for free.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from bringup.core.packs import memory_remedies as mem
from bringup.core.packs import remedies as r
from bringup.core.packs.types import RemedyBuilder
from bringup.core.vocab import FailureClass, Phase

Facts = Mapping[str, float | int | str]


@dataclass(frozen=True)
class FactCheck:
    """``broken(facts)`` is true when the facts ``needs`` names contradict a healthy start."""

    name: str
    needs: frozenset[str]
    broken: Callable[[Facts], bool]
    failure_class: FailureClass
    summary: str  # str.format over the facts
    remedy: RemedyBuilder
    phase: Phase


def _num(facts: Facts, name: str) -> float:
    value = facts.get(name)
    return float(value) if isinstance(value, int | float) else float("nan")


def _over_share(facts: Facts) -> bool:
    free, total = _num(facts, "free_gib_at_start"), _num(facts, "total_gib")
    share = _num(facts, "gpu_memory_utilization")
    return free < share * total  # nan compares false: a missing figure decides nothing


def _more_ranks_than_gpus(facts: Facts) -> bool:
    world = _num(facts, "tensor_parallel_size") * (
        _num(facts, "pipeline_parallel_size") if "pipeline_parallel_size" in facts else 1.0
    )
    return world > _num(facts, "gpus_visible")


CHECKS: tuple[FactCheck, ...] = (
    FactCheck(
        "kv_memory_not_positive",
        frozenset({"available_kv_gib"}),
        lambda f: _num(f, "available_kv_gib") <= 0,
        FailureClass.KV_CACHE_INSUFFICIENT,
        "The engine has {available_kv_gib} GiB left for the KV cache: weights and activations "
        "took all the memory it may use.",
        mem.no_kv_memory,
        Phase.KV_CACHE_ALLOC,
    ),
    FactCheck(
        "profiled_tokens_negative",
        frozenset({"profiled_max_tokens"}),
        lambda f: _num(f, "profiled_max_tokens") < 0,
        FailureClass.KV_CACHE_INSUFFICIENT,
        "The engine profiled room for {profiled_max_tokens} KV cache tokens (below zero): the "
        "weights and activations took all the memory it may use.",
        mem.no_kv_memory,
        Phase.KV_CACHE_ALLOC,
    ),
    FactCheck(
        "free_below_share",
        frozenset({"free_gib_at_start", "total_gib", "gpu_memory_utilization"}),
        _over_share,
        FailureClass.GPU_MEMORY_UTILIZATION,
        "Only {free_gib_at_start} of {total_gib} GiB were free at start, below the "
        "{gpu_memory_utilization} share the engine was told to take.",
        mem.free_memory,
        Phase.DISTRIBUTED_INIT,
    ),
    FactCheck(
        "ranks_above_gpus",
        frozenset({"tensor_parallel_size", "gpus_visible"}),
        _more_ranks_than_gpus,
        FailureClass.CONFIG_ERROR,
        "Tensor x pipeline parallel asks for more GPUs than the {gpus_visible} this process "
        "sees (tensor parallel {tensor_parallel_size}).",
        r.fix_flags,
        Phase.DISTRIBUTED_INIT,
    ),
)


def broken(facts: Facts, changed: set[str]) -> FactCheck | None:
    """The first check a fact just read (``changed``) breaks, with all it needs known."""
    for check in CHECKS:
        if check.needs & changed and check.needs <= facts.keys() and check.broken(facts):
            return check
    return None
