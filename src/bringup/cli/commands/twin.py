"""``bringup twin vllm``: run the engine twin, a stand-in vLLM 0.33 server for tests and demos.

The twin prints vLLM's own output (logging records on stdout; tqdm, tracebacks and uvicorn
on stderr), so it has no ``--json``: its output *is* what bringup reads. The exit status
is the server's: 0 after a clean shutdown (and, as in vllm#48966, after the engine died
once ready), 1 when the startup fails, 2 for bad flags.
"""

from __future__ import annotations

import argparse

from bringup.cli.main import Context
from bringup.errors import UsageError
from bringup.twin.config import (
    DEFAULT_MODEL,
    DEFAULT_TIME_SCALE,
    DEFAULT_UTILIZATION,
    KV_INSUFFICIENT_UTILIZATION,
    OOM_WARMUP_UTILIZATION,
    SCENARIOS,
    TwinConfig,
)

_DEFAULTS = {
    "host": "0.0.0.0",
    "port": 8000,
    "tp": 4,
    "time_scale": DEFAULT_TIME_SCALE,
    "max_num_seqs": 1024,
    "max_num_batched_tokens": 8192,
    "max_model_len": 196608,
    "model": DEFAULT_MODEL,
    "token_rate": 50.0,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("engine", choices=["vllm"], help="the engine to stand in for (vllm)")
    parser.add_argument(
        "--scenario",
        default="ready",
        choices=sorted(SCENARIOS),
        metavar="NAME",
        help="what happens: " + "; ".join(f"{k}: {v}" for k, v in SCENARIOS.items()),
    )
    parser.add_argument("--host", metavar="ADDR", help="address to bind (default 0.0.0.0)")
    parser.add_argument(
        "--port",
        metavar="PORT",
        type=int,
        help="port to bind early and listen on when ready (default 8000)",
    )
    parser.add_argument(
        "--tp",
        "--tensor-parallel-size",
        "-tp",
        metavar="N",
        dest="tp",
        type=int,
        help="tensor-parallel size: one worker process per rank when > 1 (default 4)",
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        metavar="X",
        help=f"multiply the ~5-minute real startup by X (default {DEFAULT_TIME_SCALE}; 0.01 is ~3 s)",
    )
    parser.add_argument(
        "--gpus-file",
        metavar="FILE",
        help="GPU readings file to write memory into (created with 4 GPUs when missing)",
    )
    parser.add_argument(
        "--max-num-seqs", metavar="N", type=int, help="vLLM --max-num-seqs (default 1024)"
    )
    parser.add_argument(
        "--max-num-batched-tokens",
        metavar="TOKENS",
        type=int,
        help="vLLM --max-num-batched-tokens (default 8192)",
    )
    parser.add_argument(
        "--gpu-memory-utilization",
        type=float,
        metavar="U",
        help=f"vLLM --gpu-memory-utilization (default {DEFAULT_UTILIZATION}; "
        f"{KV_INSUFFICIENT_UTILIZATION} in kv_insufficient, "
        f"{OOM_WARMUP_UTILIZATION} in oom_warmup)",
    )
    parser.add_argument(
        "--max-model-len", type=int, metavar="L", help="vLLM --max-model-len (default 196608)"
    )
    parser.add_argument(
        "--model", metavar="NAME", help=f"served model name (default {DEFAULT_MODEL})"
    )
    parser.add_argument(
        "--token-rate",
        type=float,
        metavar="TOKENS_PER_S",
        help="tokens per second per request (default 50)",
    )
    parser.add_argument(
        "--api-key",
        metavar="KEY",
        help="require `Authorization: Bearer KEY` on /v1 (or VLLM_API_KEY)",
    )
    parser.add_argument(
        "--watchdog-file",
        metavar="FILE",
        help="after the engine died once ready, answer /health 503 until FILE exists, then "
        "shut down (exit 0), instead of after vLLM's 5 s watchdog period (for tests)",
    )


def config_from_args(args: argparse.Namespace, environ: dict[str, str]) -> TwinConfig:
    """Validate the flags and build the twin's configuration."""
    given = {
        k: v
        for k, v in vars(args).items()
        if k in {*_DEFAULTS, "gpu_memory_utilization"} and v is not None
    }
    values = {**_DEFAULTS, **given}
    utilization = args.gpu_memory_utilization
    if utilization is None:
        utilization = {
            "kv_insufficient": KV_INSUFFICIENT_UTILIZATION,
            "oom_warmup": OOM_WARMUP_UTILIZATION,
        }.get(args.scenario, DEFAULT_UTILIZATION)
        if args.scenario in ("kv_insufficient", "oom_warmup"):
            given["gpu_memory_utilization"] = utilization
    _check(values, utilization)
    return TwinConfig(
        scenario=args.scenario,
        host=values["host"],
        port=values["port"],
        tp=values["tp"],
        time_scale=values["time_scale"],
        gpus_file=args.gpus_file,
        max_num_seqs=values["max_num_seqs"],
        max_num_batched_tokens=values["max_num_batched_tokens"],
        gpu_memory_utilization=utilization,
        max_model_len=values["max_model_len"],
        model=values["model"],
        token_rate=values["token_rate"],
        api_key=args.api_key or environ.get("VLLM_API_KEY") or None,
        cuda_visible_devices=environ.get("CUDA_VISIBLE_DEVICES"),
        watchdog_file=args.watchdog_file,
        given=given,
    )


def _check(values: dict[str, object], utilization: float) -> None:
    rules = [
        ("--port", 0 <= int(str(values["port"])) <= 65535, "a port between 0 and 65535"),
        ("--tp", int(str(values["tp"])) >= 1, "at least 1"),
        ("--time-scale", float(str(values["time_scale"])) > 0, "a positive factor, e.g. 0.01"),
        ("--max-num-seqs", int(str(values["max_num_seqs"])) >= 1, "at least 1"),
        ("--max-num-batched-tokens", int(str(values["max_num_batched_tokens"])) >= 1, "at least 1"),
        ("--max-model-len", int(str(values["max_model_len"])) >= 1, "at least 1"),
        (
            "--token-rate",
            float(str(values["token_rate"])) > 0,
            "a positive rate in tokens per second",
        ),
        ("--gpu-memory-utilization", 0 < utilization <= 1, "a fraction in (0, 1], e.g. 0.9"),
    ]
    for flag, ok, expected in rules:
        if not ok:
            raise UsageError(f"{flag} must be {expected}", hint="see `bringup twin --help`")


def run(args: argparse.Namespace, ctx: Context) -> int:
    from bringup.twin.api import ApiServer

    if args.passthrough:
        raise UsageError(
            "bringup twin takes no command after `--`", hint="pass the twin's own flags"
        )
    cfg = config_from_args(args, dict(ctx.environ))
    return ApiServer(cfg, ctx.stdout, ctx.stderr).run()
