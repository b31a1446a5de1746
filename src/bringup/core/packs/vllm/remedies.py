"""vLLM's own remedies: the ones that name its flags, environment variables or executors
(``--max-model-len`` above the model's limit, parallel sizes that differ between nodes, Ray,
the engine-ready timeout, the custom all-reduce's P2P probe)."""

from __future__ import annotations

from bringup.core.diagnosis import Remedy
from bringup.core.packs.types import RemedyContext


def config_len(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """--max-model-len above what the model supports."""
    derived = ctx.groups.get("derived")
    if derived:
        return (
            Remedy(
                f"Set --max-model-len {derived}, the model's own limit.", "--max-model-len", derived
            ),
        )
    return (Remedy("Lower --max-model-len to the model's limit."),)


def parallel_sizes_differ(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """One node of a multi-node start has other parallel sizes than the others."""
    return (
        Remedy(
            "Start every node with the same --tensor-parallel-size, --pipeline-parallel-size "
            "and --data-parallel-size (`bringup run --nodes` derives each node's command from "
            "one); look for what changes them on this node (a wrapper script, an alias)."
        ),
    )


def ray_unsupported_platform(_: RemedyContext) -> tuple[Remedy, ...]:
    """The platform (vLLM's CPU build) has no Ray device: the Ray executor cannot run on it."""
    return (
        Remedy(
            "Drop --distributed-executor-backend ray: on this platform vLLM runs its workers with "
            "its own multiprocessing executor (over several nodes: --nnodes/--node-rank, which "
            "`bringup run --nodes` sets)."
        ),
    )


def engine_timeout(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """vLLM's own startup timeout fired."""
    secs = ctx.groups.get("seconds")
    value = str(int(secs) * 3) if secs and secs.isdigit() else "1800"
    return (
        Remedy(
            f"Give the engine longer to start: VLLM_ENGINE_READY_TIMEOUT_S={value}.",
            env=f"VLLM_ENGINE_READY_TIMEOUT_S={value}",
        ),
    )


def p2p(_: RemedyContext) -> tuple[Remedy, ...]:
    """vLLM's custom all-reduce P2P probe failed or hung."""
    return (
        Remedy(
            "Skip vLLM's custom all-reduce (it needs the P2P probe): --disable-custom-all-reduce.",
            "--disable-custom-all-reduce",
        ),
        Remedy(
            "If the GPUs cannot reach each other directly, disable NCCL's P2P transport.",
            env="NCCL_P2P_DISABLE=1",
        ),
    )


def ray_gpus(_: RemedyContext) -> tuple[Remedy, ...]:
    """Ray sees fewer GPUs than the parallel layout needs."""
    return (
        Remedy(
            "Check `ray status`: every node must have joined with its GPUs, and "
            "tensor x pipeline parallel must not exceed the GPUs Ray reports; start the server "
            "on a node that has GPUs."
        ),
    )
