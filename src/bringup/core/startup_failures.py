"""The failures the live supervisor states itself, from what it saw rather than from a log line.

``core.startup.StartupMachine`` decides when one applies; this module words it (class, phase,
summary, remedy): bringup's probe refused with 401/403, the smoke request's model missing on a
server that loads models on request, the health check lost after ready, the process exited
with no root cause, no progress for ``--stall`` (with the server's stopped processes, if any),
and ``--deadline`` passed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from bringup import exit_codes
from bringup.core.diagnosis import Failure, Remedy
from bringup.core.probes import ProbeObservation
from bringup.core.vocab import FailureClass, Phase

_STALL_HINTS: dict[Phase, str] = {
    Phase.DISTRIBUTED_INIT: (
        "A hang right after NCCL init usually means GPU peer-to-peer or the network fabric: "
        "rerun with NCCL_DEBUG=INFO, and try NCCL_P2P_DISABLE=1 to confirm."
    ),
    Phase.WEIGHTS_LOADING: (
        "Weight loading stopped moving: check the storage the checkpoint is read from "
        "(network filesystem, disk) and that no download is stuck."
    ),
    Phase.START: (
        "Nothing came from the engine: check that the command starts the server at all, "
        "and that imports are not blocked (e.g. waiting on a network filesystem)."
    ),
}


def auth_refused(
    obs: ProbeObservation, phase: Phase, line_count: int, *, probe_has_key: bool
) -> Failure:
    """401/403: the server is up but refuses bringup's requests. Waiting cannot help, so
    this is the verdict at once (never a stall), with where the key comes from."""
    sent = "the API key bringup sent" if probe_has_key else "no API key"
    return Failure(
        failure_class=FailureClass.CONFIG_ERROR,
        phase=phase,
        line=f"HTTP {obs.status} from {obs.url}: {obs.error or 'refused'}",
        line_number=line_count,
        summary=(
            f"authentication failed: the server answers, but refused bringup's {obs.kind} "
            f"request with HTTP {obs.status} ({sent}); it was started with an API key"
        ),
        remedy=(
            Remedy(
                "Give bringup the server's key: --api-key KEY, or VLLM_API_KEY/OPENAI_API_KEY "
                "in its environment. bringup run reads it from the server's own --api-key; "
                "up and status from the unit's command line and its EnvironmentFile=."
            ),
        ),
    )


def missing_model(
    obs: ProbeObservation, model: str, hint: str | None, phase: Phase, line_count: int
) -> Failure:
    """404 to the smoke request of a server that loads models on request: it has no such
    model (Ollama: "model ... not found, try pulling it first"); waiting cannot help.
    ``hint``: the engine's remedy, ``{model}`` in it replaced."""
    hint = (hint or "Name a model the server has.").replace("{model}", model)
    return Failure(
        failure_class=FailureClass.MISSING_OR_CORRUPT_WEIGHTS,
        phase=phase,
        line=f"HTTP 404 from {obs.url}: {obs.error or 'not found'}",
        line_number=line_count,
        summary=f"the server has no model {model!r} to load for the smoke request",
        remedy=(Remedy(hint),),
    )


def health_lost(obs: ProbeObservation, times: int, last_line: str, line_count: int) -> Failure:
    """After ready, the health check failed ``times`` times in a row."""
    why = f"HTTP {obs.status}" if obs.status is not None else (obs.error or "no answer")
    return Failure(
        failure_class=FailureClass.ENGINE_CORE_DIED,
        phase=Phase.READY,
        line=last_line,
        line_number=line_count,
        summary=f"the server stopped answering its health check after it was ready ({why}, {times} times in a row)",
        remedy=(
            Remedy(
                "Read the server log above the last line for the error that stopped the engine, then restart it."
            ),
        ),
    )


def process_exit(
    exit_code: int | None, phase: Phase, *, after_ready: bool, last_line: str, line_count: int
) -> Failure:
    """The process ended and no root-cause line was recognised."""
    when = "after it was ready" if after_ready else f"during {phase}"
    code = "with an unknown status" if exit_code is None else f"with status {exit_code}"
    killed = exit_code in exit_codes.KILLED_EXIT_CODES
    cls = FailureClass.HOST_OOM if killed else FailureClass.ENGINE_CORE_DIED
    summary = f"the server process exited {code} {when}"
    if killed:
        summary += (
            "; SIGKILL usually means the kernel's OOM killer (see `journalctl -k | grep -i oom`)"
        )
    return Failure(
        failure_class=cls,
        phase=phase,
        line=last_line,
        line_number=line_count,
        summary=summary,
        remedy=(
            Remedy(
                "Read the last lines of the server log for the error; no root-cause line was recognised."
            ),
        ),
    )


def stall(limit_seconds: float, why: str, phase: Phase, line_count: int) -> Failure:
    """No progress: no line says why, so none is named (the last line is where it stopped)."""
    hint = _STALL_HINTS.get(
        phase,
        "Check what the engine is waiting for, or raise --stall if this phase is legitimately slow.",
    )
    last = f"; its last line was line {line_count}" if line_count else ""
    return Failure(
        failure_class=FailureClass.TIMEOUTS,
        phase=phase,
        line="",
        line_number=0,
        summary=f"{why} for {limit_seconds:g}s, in phase {phase}{last}",
        remedy=(Remedy(hint),),
    )


def stopped_processes(failure: Failure, stopped: Sequence[tuple[int, str]]) -> Failure:
    """A stall that names the server's stopped processes (pid, name): they are why nothing
    moves, and resuming them comes first."""
    names = ", ".join(f"{pid} ({name})" for pid, name in stopped)
    return dataclasses.replace(
        failure,
        summary=f"{failure.summary}; the server's process {names} is stopped (SIGSTOP or a debugger), so it cannot progress",
        remedy=(
            Remedy(
                f"Resume it with `kill -CONT {stopped[0][0]}` (or detach the debugger); "
                "a stopped process never makes progress."
            ),
            *failure.remedy,
        ),
    )


def deadline(
    deadline_seconds: float,
    idle_seconds: float,
    stall_seconds: float | None,
    phase: Phase,
    line_count: int,
) -> Failure:
    """Past --deadline: a deadline, not a stall, when the startup was still progressing."""
    if stall_seconds is not None and idle_seconds >= stall_seconds:
        return stall(deadline_seconds, "not ready within the deadline", phase, line_count)
    return Failure(
        failure_class=FailureClass.TIMEOUTS,
        phase=phase,
        line="",
        line_number=0,
        summary=(
            f"the deadline of {deadline_seconds:g}s passed while the startup was still "
            f"progressing (in phase {phase}, last progress {idle_seconds:.0f}s ago): a deadline, "
            "not a stall"
        ),
        remedy=(
            Remedy(
                f"It was still making progress: give it longer (--deadline "
                f"{int(deadline_seconds * 2)}), or plan a faster start (weights on local disk, "
                "fewer CUDA graphs)."
            ),
        ),
    )
