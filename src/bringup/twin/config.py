"""The twin's flags, its scenarios, and the startup timeline it replays.

Durations are written in *real* seconds, the pace of a vLLM 0.33 start of a
MiniMax-M2.5-like model on 4 GPUs (about five minutes); ``--time-scale X`` multiplies every
one of them (X=0.01 replays the start in about 3 s, the default 0.05 in about 15 s).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

SCENARIOS: dict[str, str] = {
    "ready": "a clean start to a serving server",
    "oom_warmup": "a worker dies of CUDA OOM in the sampler warmup when max_num_seqs is too high",
    "kv_insufficient": "the KV cache cannot hold one request of max_model_len",
    "hang_nccl": "stops after `vLLM is using nccl==...` (TP > 1) and prints nothing more",
    "slow_load": "weight shards keep loading, slowly",
    "port_in_use": "the port is taken: OSError [Errno 98] at bind",
    "die_after_ready": "ready, then the EngineCore dies; /health 503; the API server exits 0",
    "guard_wait": "an earlier instance still holds the GPUs and releases them after a while",
}

VLLM_VERSION = "0.33.0"
DEFAULT_MODEL = "MiniMaxAI/MiniMax-M2.5"
DEFAULT_TIME_SCALE = 0.05
DEFAULT_UTILIZATION = 0.92
# kv_insufficient replays a start where the operator asked for less of the GPU.
KV_INSUFFICIENT_UTILIZATION = 0.72
# oom_warmup replays a start at 0.97, where the sampler warmup no longer fits (memory.py, rule 4).
OOM_WARMUP_UTILIZATION = 0.97


@dataclass(frozen=True)
class TwinConfig:
    """Everything one twin start needs; passed to the child processes as JSON."""

    scenario: str = "ready"
    host: str = "0.0.0.0"
    port: int = 8000
    tp: int = 4
    time_scale: float = DEFAULT_TIME_SCALE
    gpus_file: str | None = None
    max_num_seqs: int = 1024
    max_num_batched_tokens: int = 8192
    gpu_memory_utilization: float = DEFAULT_UTILIZATION
    max_model_len: int = 196608
    model: str = DEFAULT_MODEL
    token_rate: float = 50.0
    api_key: str | None = None
    cuda_visible_devices: str | None = None
    # after an engine death once ready: answer 503 until this file exists, then shut down
    # (instead of the watchdog period), so a test's watcher never races a wall-clock window
    watchdog_file: str | None = None
    # flag name -> value, as the user gave them (for `non-default args: {...}`)
    given: dict[str, Any] = field(default_factory=dict)

    def seconds(self, real_seconds: float) -> float:
        """Wall-clock seconds for a step that takes ``real_seconds`` in a real start."""
        return real_seconds * self.time_scale

    def linger_seconds(self, real_seconds: float) -> float:
        """Like ``seconds`` but never under 2 s: windows a watcher must be able to see."""
        return max(2.0, self.seconds(real_seconds))

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> TwinConfig:
        return cls(**json.loads(text))


# The timeline, in real seconds (see the module docstring).
API_IMPORTS_SECONDS = 12.0
CONFIG_SECONDS = 2.0
ENGINE_IMPORTS_SECONDS = 8.0
WORKER_IMPORTS_SECONDS = 9.0
NCCL_INIT_SECONDS = 5.0
DEVICE_INIT_SECONDS = 2.0
NUM_SHARDS = 126
SHARD_SECONDS = 0.95
SLOW_SHARD_SECONDS = 9.0  # slow_load: a cold network filesystem
COMPILE_SECONDS = 48.0
PROFILE_SECONDS = 5.0
KV_SECONDS = 1.0
CAPTURE_SECONDS = 25.0
SAMPLER_SECONDS = 2.0
APP_SECONDS = 2.0
HOLDER_SECONDS = 90.0  # guard_wait: the earlier instance releases the GPUs after this
ENGINE_DEATH_AFTER_READY_SECONDS = 20.0  # die_after_ready: time from ready to the death
WATCHDOG_SECONDS = 5.0  # VLLM_WATCHDOG_TIME_S: engine death -> API server shutdown
ENGINE_FAILED_LINGER_SECONDS = 6.0  # startup failure -> the API server's traceback
