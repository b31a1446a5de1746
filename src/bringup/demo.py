"""``bringup demo``: the motivating story end to end, on a machine without a GPU.

MiniMax-M2.5 in FP8, tensor parallel 4, on four 96 GB GPUs (the engine twin plays vLLM 0.33
and the GPUs, through a readings file):

1. ``plan`` predicts the CUDA OOM in the sampler warmup before launch, and the flag that avoids it;
2. ``run`` with the default ``--max-num-seqs`` catches the worker's OOM while the API server
   process is still alive, and names the root-cause line and the remedy;
3. ``run`` again with the plan's value reaches ready, and the model answers;
4. a summary of what happened and when.

Everything runs for real (processes, sockets, sd-style readings); only vLLM and the GPUs are
stand-ins. The demo uses ``--gpu-memory-utilization 0.97``, pushed up to get more KV cache:
following vLLM 0.33's code (the V2 model runner's warmup needs 12 bytes per logit element
beyond its profile run), 1024 warmup requests fit at the default 0.92 and at 0.95, and not at
0.97.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import psutil

from bringup.adapters.gpus import ReadingsFile
from bringup.adapters.model_source import load_model, locate_model
from bringup.core import gpu_catalog
from bringup.core.checkpoint import TensorInfo
from bringup.core.gpu import select_visible
from bringup.core.live import FailureFound, LiveEvent, ProbeSeen
from bringup.core.plan import (
    GpuSet,
    Requested,
    assemble,
    decode,
    parse_architecture,
)
from bringup.core.plan.remedy import with_plan
from bringup.core.plan.result import Plan
from bringup.core.plan.settings import use_v1_from_env
from bringup.core.probes import ProbeKind
from bringup.core.story import Attempt, Story
from bringup.core.vocab import Engine
from bringup.errors import InputError
from bringup.follow import startup_time
from bringup.follow.types import StartupConfig
from bringup.follow.wiring import follow_local
from bringup.render.json_out import to_jsonable

GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell"
GPU_TOTAL_BYTES = 102005473280
GPU_COUNT = 4
MODEL = "minimax-m2.5"
UTILIZATION = "0.97"


def write_readings(path: Path) -> None:
    """Four idle 96 GB GPUs, in the readings-file format the twin and ``--gpus-from`` share."""
    gpus = [
        {
            "index": i,
            "name": GPU_NAME,
            "uuid": f"GPU-demo-{i:04d}",
            "memory_total_bytes": GPU_TOTAL_BYTES,
            "memory_used_bytes": 1 << 20,
            "processes": [],
        }
        for i in range(GPU_COUNT)
    ]
    path.write_text(json.dumps({"gpus": gpus}, indent=1))


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def plan_argv(readings: Path) -> list[str]:
    """The ``bringup plan`` command the demo runs."""
    return [
        "plan",
        MODEL,
        "--gpus-from",
        str(readings),
        "-tp",
        str(GPU_COUNT),
        "--gpu-memory-utilization",
        UTILIZATION,
        "--json",
    ]


def twin_argv(readings: Path, port: int, time_scale: float, extra: list[str]) -> list[str]:
    """The server command: the engine twin playing ``vllm serve MiniMaxAI/MiniMax-M2.5 -tp 4``."""
    return [
        sys.executable,
        "-m",
        "bringup",
        "twin",
        "vllm",
        "--scenario",
        "oom_warmup",
        "--port",
        str(port),
        "--tp",
        str(GPU_COUNT),
        "--gpus-file",
        str(readings),
        "--gpu-memory-utilization",
        UTILIZATION,
        "--time-scale",
        f"{time_scale:g}",
        *extra,
    ]


def make_plan(readings: Path, environ: Mapping[str, str]) -> Plan:
    """The plan ``bringup plan`` makes for :func:`plan_argv`, through the same library steps
    (``core.plan.assemble``): the bundled model's config, the GPUs of the readings file,
    vLLM's settings for ``-tp 4 --gpu-memory-utilization 0.97``, and the decode speed on the
    catalog's GPU (a test checks it equals ``bringup plan --json``)."""
    config, tensors = _model(MODEL, environ)
    arch = parse_architecture(config)
    gpus = _gpus(readings, environ)
    req = Requested(
        tensor_parallel_size=GPU_COUNT,
        gpu_memory_utilization=float(UTILIZATION),
        use_v1=use_v1_from_env(environ.get("VLLM_USE_V1")),
    )
    plan = assemble.gpu_plan(
        arch, tensors, gpus, req, setup=decode.DecodeSetup(), gpu=gpu_catalog.find(gpus.name)
    )
    startup = startup_time.for_plan(plan, MODEL, (), environ)
    return dataclasses.replace(plan, startup=startup)


def _model(name: str, environ: Mapping[str, str]) -> tuple[dict[str, Any], list[TensorInfo] | None]:
    loaded = load_model(locate_model(name, environ))
    return loaded.config, loaded.tensors


def _gpus(readings: Path, environ: Mapping[str, str]) -> GpuSet:
    """The GPUs of the readings file that ``CUDA_VISIBLE_DEVICES`` leaves visible."""
    visible = select_visible(
        ReadingsFile(str(readings)).read(), environ.get("CUDA_VISIBLE_DEVICES")
    )
    if not visible:
        raise InputError("no visible GPU in the demo's readings", hint="unset CUDA_VISIBLE_DEVICES")
    return assemble.gpus_from_readings(visible, GPU_COUNT, None)


def follow(
    attempt: Attempt,
    readings: Path,
    observer: Any,
    environ: dict[str, str],
    on_event: Callable[[LiveEvent], None] | None = None,
) -> None:
    """Start the twin under the supervisor and follow it to a verdict (stopped afterwards)."""
    me = psutil.Process()

    def hook(event: LiveEvent) -> None:
        if isinstance(event, FailureFound) and attempt.failure_t is None:
            attempt.failure_t = event.t
            attempt.server_alive_at_failure = [
                c.pid
                for c in me.children()
                if c.is_running() and c.status() != psutil.STATUS_ZOMBIE
            ]
        if isinstance(event, ProbeSeen) and event.obs.kind is ProbeKind.SMOKE and event.obs.ok:
            attempt.answer = event.obs.text
        if on_event is not None:
            on_event(event)

    config = StartupConfig(
        argv=tuple(attempt.argv),
        engine=Engine.VLLM,
        gpus_from=str(readings),
        stall_seconds=60.0,
        deadline_seconds=180.0,
        grace_seconds=5.0,
        exit_when_ready=True,
        environ=environ,
    )
    started = time.monotonic()
    attempt.result = follow_local(config, observer=observer, on_event=hook)
    attempt.wall_seconds = time.monotonic() - started


def tell(
    *,
    say: Callable[[str], None],
    observer_for: Callable[[int], Any],
    environ: dict[str, str],
    time_scale: float,
    on_event: Callable[[LiveEvent], None] | None = None,
) -> Story:
    """Tell the whole story; ``say`` prints bringup's narration, ``observer_for(n)`` renders run n."""
    story = Story()
    with tempfile.TemporaryDirectory(prefix="bringup-demo-") as tmp:
        readings = Path(tmp) / "gpus.json"
        write_readings(readings)
        say(f"1/4  bringup {' '.join(plan_argv(readings)[:-1])}")
        plan = make_plan(readings, environ)
        story.plan = to_jsonable(plan)
        story.recommended_max_num_seqs = next(
            (r["value"] for r in story.plan["recommendations"] if r["flag"] == "--max-num-seqs"),
            None,
        )
        for extra in ([], ["--max-num-seqs", story.recommended_max_num_seqs or "256"]):
            attempt = Attempt(twin_argv(readings, free_port(), time_scale, extra))
            story.attempts.append(attempt)
            n = len(story.attempts)
            label = (
                "with the default --max-num-seqs (1024)"
                if not extra
                else f"again with {' '.join(extra)}"
            )
            say(
                f"{n + 1}/4  bringup run -- vllm serve MiniMaxAI/MiniMax-M2.5 -tp 4 "
                f"--gpu-memory-utilization {UTILIZATION} {' '.join(extra)}".rstrip()
                + f"   ({label}, engine twin)"
            )
            follow(attempt, readings, observer_for(n), environ, on_event)
            failure = attempt.result.failure if attempt.result is not None else None
            if failure is not None:
                attempt.remedies = with_plan(failure, plan)
    return story
