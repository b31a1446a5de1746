"""The words for each startup phase, shared by the renderers and sd_notify's STATUS line."""

from __future__ import annotations

from bringup.core.diagnosis import ProgressEvent
from bringup.core.vocab import Phase

PHASE_WORDS: dict[Phase, str] = {
    Phase.START: "starting",
    Phase.CONFIG: "reading the model config",
    Phase.DISTRIBUTED_INIT: "initialising devices",
    Phase.WEIGHTS_LOADING: "loading weights",
    Phase.WEIGHTS_LOADED: "weights loaded",
    Phase.TORCH_COMPILE: "compiling the model (torch.compile)",
    Phase.MEMORY_PROFILING: "profiling memory",
    Phase.KV_CACHE_ALLOC: "allocating the KV cache",
    Phase.CUDA_GRAPH_CAPTURE: "capturing CUDA graphs",
    Phase.WARMUP: "warming up",
    Phase.API_SERVER_STARTING: "starting the API server",
    Phase.READY: "ready",
}


def status_text(phase: Phase, progress: ProgressEvent | None) -> str:
    """One line for ``systemctl status``: ``loading weights 45/125``."""
    words = PHASE_WORDS[phase]
    if progress is not None and progress.phase is phase:
        return f"{words} {progress.done}/{progress.total}"
    return words
