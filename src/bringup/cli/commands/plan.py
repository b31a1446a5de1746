"""``bringup plan``: predict per-GPU memory of a vLLM server, and the failure, before launch.

Exit codes: 0 fits, 1 does not fit, 2 usage or bad input; an uncertain verdict
(``verdict.confidence``) exits as its nominal one.

The plan is made in ``plan_make`` (the model, GPUs and calibration log read, ``core.plan``
planning), printed by ``render.plan`` (``render.gguf_plan`` for a GGUF file).
"""

from __future__ import annotations

import argparse
from typing import Any

from bringup.cli import report_flags
from bringup.cli.commands import plan_decode
from bringup.cli.commands.plan_make import make
from bringup.cli.main import Context
from bringup.core.plan.flags import VLLM_FLAGS, reader
from bringup.core.plan.result import Plan
from bringup.render.console import make_console
from bringup.render.gguf_plan import print_gguf_plan
from bringup.render.json_out import print_json
from bringup.render.plan import print_for_people

# dest -> (metavar: the value's unit, help) of each flag above
_FLAG_HELP: dict[str, tuple[str, str]] = {
    "tensor_parallel_size": ("N", "GPUs each copy of the model is split over (default 1)"),
    "pipeline_parallel_size": ("N", "pipeline stages, each on its own tp GPUs (default 1)"),
    "data_parallel_size": (
        "N",
        "engines, each with its own weights (over its tp x pp GPUs) and KV cache (default 1)",
    ),
    "data_parallel_size_local": ("N", "of the -dp engines, how many run on this node"),
    "gpu_memory_utilization": (
        "FRACTION",
        "share of each GPU's memory vLLM may use, 0 to 1 (default 0.92 from vLLM 0.33, else 0.9)",
    ),
    "max_model_len": (
        "TOKENS",
        (
            "longest request in tokens (32k is 32000, 32K 32768, as vLLM reads it), or auto"
            " (default: the model's context)"
        ),
    ),
    "max_num_seqs": (
        "N",
        "requests in one batch (default by GPU: 1024 on 70 GiB or more, else 256)",
    ),
    "max_num_batched_tokens": (
        "TOKENS",
        "tokens in one forward step, the profile run's size (default by GPU: 8192 or 2048)",
    ),
    "kv_cache_dtype": (
        "DTYPE",
        "element type of the KV cache: auto (the model's), fp8, fp8_e4m3, fp8_e5m2 (default auto)",
    ),
    "quantization": (
        "METHOD",
        "how the weights are stored when the config does not say: fp8, awq, gptq, mxfp4, nvfp4, ...",
    ),
    "block_size": ("TOKENS", "tokens per KV cache block (default: vLLM's, 16)"),
    "cpu_offload_gb": ("GIB", "GiB of each GPU's weights kept in CPU memory (default 0)"),
    "dtype": ("DTYPE", "the weights' type: auto (the config's), bfloat16, float16, float32"),
    "speculative_config": ("JSON", "vLLM's speculative decoding config, as JSON"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bringup plan``."""
    parser.add_argument(
        "model",
        nargs="?",
        help="model folder, HF cache snapshot, config.json, or a bundled "
        "model name (e.g. MiniMax-M2.5); optional when the server command after -- names it",
    )
    gpu = parser.add_argument_group("GPUs (detected through NVML when none is given)")
    gpu.add_argument(
        "--gpu", metavar="NAME", help="a GPU from the catalog, e.g. H100, H200, 'RTX PRO 6000'"
    )
    gpu.add_argument(
        "--gpu-memory", metavar="SIZE", help="memory per GPU as CUDA reports it, e.g. 79.19GiB"
    )
    gpu.add_argument(
        "--gpu-free",
        metavar="SIZE",
        help="free memory per GPU at start when other processes hold some (default: all of it)",
    )
    gpu.add_argument("--gpus", type=int, metavar="N", help="GPUs available (default: tp x pp)")
    gpu.add_argument(
        "--gpus-from", metavar="FILE", help="read GPUs from a readings file instead of NVML"
    )
    eng = parser.add_argument_group(
        "engine settings (vLLM's names; also read from the command after --)"
    )
    for names, dest, kind in VLLM_FLAGS:
        metavar, text = _FLAG_HELP.get(dest, (None, None))
        # a number read as the server command's (core.plan.flags.convert): one wording, and
        # vLLM's suffixes where vLLM takes them (--max-num-batched-tokens 8k)
        read = reader(names[0], kind) if kind in (int, float) else kind
        eng.add_argument(*names, dest=dest, type=read, default=None, metavar=metavar, help=text)
    eng.add_argument(
        "--enable-expert-parallel",
        action="store_true",
        default=None,
        help="MoE experts spread whole over the GPUs (expert parallel) instead of each split",
    )
    eng.add_argument(
        "--enforce-eager",
        action="store_true",
        default=None,
        help="no CUDA graphs: no graph pool in memory, a slower decode",
    )
    eng.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default=None,
        help="cuda (GPUs, the default) or cpu: vLLM's CPU build, KV pool from "
        "VLLM_CPU_KVCACHE_SPACE",
    )
    eng.add_argument(
        "--kv-cache-memory-bytes",
        dest="kv_cache_memory_bytes",
        metavar="SIZE",
        default=None,
        help="the KV pool size vLLM is given (overrides the profile; on cpu, "
        "VLLM_CPU_KVCACHE_SPACE wins)",
    )
    eng.add_argument(
        "--engine-version", metavar="V", help="vLLM version the defaults follow (default 0.33)"
    )
    gg = parser.add_argument_group(
        "GGUF (llama.cpp): -c/-np/-ctk/-ctv/-fa are read from the llama.cpp command after --"
    )
    gg.add_argument(
        "--n-ctx",
        metavar="N",
        help="context length for a GGUF plan (default: the model's training context)",
    )
    plan_decode.add_arguments(parser)
    parser.add_argument(
        "--calibrate", metavar="LOG", help="a successful startup log of this model and GPUs"
    )
    parser.add_argument(
        "--force-calibrate",
        action="store_true",
        help="calibrate even with a log that looks like another model's",
    )
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    report_flags.add_markdown(parser)
    parser.add_argument(
        "--force",
        action="store_true",
        help="plan a checkpoint with missing or broken weight files from the tensors that "
        "are there (refused otherwise)",
    )
    parser.add_argument(
        "--list-models",
        action="store_true",
        help="list the bundled models (their Hugging Face ids, size and source) and exit",
    )
    parser.add_argument(
        "--list-gpus",
        action="store_true",
        help="list the GPU catalog (memory, bandwidth, datasheet) and exit",
    )
    parser.add_argument(
        "--compare",
        nargs=argparse.REMAINDER,
        metavar="MODEL [FLAGS]",
        help="plan another setup beside this one (repeatable): its model and its own flags; "
        "GPU, interconnect, nodes, bandwidth, context and engine flags given once apply to all",
    )


def run(args: argparse.Namespace, ctx: Context) -> int:
    """Make the plan (or the plans of ``--compare``) and print it; 0 fits, 1 does not fit."""
    if args.list_models or args.list_gpus:
        from bringup.cli.commands import plan_lists

        if args.list_models:
            return plan_lists.list_models(ctx, args.json)
        return plan_lists.list_gpus(ctx, args.json)
    if args.compare is not None:
        from bringup.cli.commands import plan_compare

        return plan_compare.run_compare(args, ctx, make)
    report_flags.check(args)
    made = make(args, ctx)
    if report_flags.markdown_target(args):
        from bringup.cli.plan_report import write_plan_report

        write_plan_report(args, ctx, made)
        ctx = report_flags.human_context(args, ctx)
    if args.json:
        print_json(made, ctx.stdout)
    elif isinstance(made, Plan):
        print_for_people(made, ctx.stdout, ctx.stderr, ctx.environ)
    else:
        print_gguf_plan(made, make_console(ctx.stdout, ctx.environ))
    return 0 if fits(made) else 1


def fits(made: Plan | dict[str, Any]) -> bool:
    """Whether a plan (vLLM's, or the GGUF plan's JSON object) fits."""
    return made.verdict.fits if isinstance(made, Plan) else bool(made["verdict"]["fits"])
