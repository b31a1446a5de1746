"""``bringup bench URL``: what a ready server delivers, beside what the hardware allows.

Exit codes: 0 no request failed (levels cut short by --duration are reported, still 0); 1
some requests failed or the server kept failing and the run stopped; 2 bad usage or input; 3 the server could
not be asked at all (unreachable, no model, a first streamed request failed).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path

from bringup.bench_runner import BenchConfig, run_bench
from bringup.cli.main import Context
from bringup.core.bench_report import BenchReport
from bringup.core.plan import decode
from bringup.errors import BringupError, UsageError
from bringup.render import bench as bench_render
from bringup.render.bench_progress import BenchProgress
from bringup.render.busy import Busy, busy, quiet
from bringup.render.console import make_console
from bringup.render.json_out import print_json
from bringup.units import parse_duration

API_KEY_VARIABLES = ("OPENAI_API_KEY", "VLLM_API_KEY")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", metavar="URL", help="the server, e.g. http://127.0.0.1:8000")
    parser.add_argument(
        "--model",
        metavar="NAME",
        help="served model name (default: the first /v1/models lists);"
        " a local checkpoint folder or config.json also feeds the plan's prediction",
    )
    parser.add_argument(
        "--input-tokens", metavar="TOKENS", type=int, default=512, help="prompt length (512)"
    )
    parser.add_argument(
        "--dataset",
        metavar="FILE",
        help='prompts from a ShareGPT JSON or a JSONL of {"prompt": ...} (as vllm bench '
        "serve takes them) instead of made-up prompts of --input-tokens",
    )
    parser.add_argument(
        "--output-tokens", metavar="TOKENS", type=int, default=128, help="tokens per answer (128)"
    )
    parser.add_argument(
        "--concurrency", metavar="LIST", default="1,2,4,8,16", help="levels, e.g. 1,2,4,8,16"
    )
    parser.add_argument(
        "--requests",
        metavar="N",
        type=int,
        help="requests per level (default 4 x concurrency, at least 8)",
    )
    parser.add_argument(
        "--duration", metavar="DURATION", default="60s", help="bound on the whole run (60s)"
    )
    parser.add_argument(
        "--api-key", metavar="KEY", help="bearer token (default $OPENAI_API_KEY or $VLLM_API_KEY)"
    )
    parser.add_argument(
        "--endpoint",
        choices=("completions", "chat"),
        default="completions",
        help="/v1/completions (default) or /v1/chat/completions",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--plot", metavar="FILE", help="write throughput and latency against concurrency (SVG)"
    )
    plan = parser.add_argument_group("the plan's decode speed, beside the measurement")
    plan.add_argument(
        "--checkpoint",
        metavar="MODEL",
        help="what `plan` accepts: a bundled model name, a model folder, an HF cache name, "
        "a GGUF file or any config JSON",
    )
    plan.add_argument("--gpu", metavar="NAME", help="GPU model, e.g. H100, L40S, 'RTX PRO 6000'")
    plan.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default="cuda",
        help="cpu: the server decodes on this machine's CPU (vLLM CPU, llama.cpp)",
    )
    plan.add_argument(
        "--gpus", metavar="N", type=int, help="number of GPUs the server uses (default: -tp)"
    )
    plan.add_argument(
        "-tp",
        "--tensor-parallel-size",
        metavar="N",
        dest="tp",
        type=int,
        help="tensor parallel size (default: --gpus, else 1)",
    )
    plan.add_argument(
        "-pp",
        "--pipeline-parallel-size",
        metavar="N",
        dest="pp",
        type=int,
        default=1,
        help="pipeline parallel size (1)",
    )
    plan.add_argument(
        "--enable-expert-parallel",
        action="store_true",
        help="the server runs with --enable-expert-parallel (experts spread over the TP GPUs)",
    )
    plan.add_argument(
        "-dcp",
        "--decode-context-parallel-size",
        metavar="N",
        dest="dcp",
        type=int,
        default=1,
        help="the server's decode context parallel size (1)",
    )
    plan.add_argument(
        "-q",
        "--quantization",
        metavar="METHOD",
        help="the server's --quantization (sets the weight format of a bundled model, as in plan)",
    )
    plan.add_argument("--interconnect", choices=decode.INTERCONNECTS, help="link between GPUs")
    plan.add_argument(
        "--disable-custom-all-reduce",
        action="store_true",
        help="the server runs with --disable-custom-all-reduce (NCCL's all-reduces)",
    )
    plan.add_argument(
        "--memory-bandwidth", metavar="RATE", help="per GPU or of the CPU, e.g. 20GB/s"
    )
    plan.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="--device cpu: threads the engine decodes with (default: every core)",
    )
    plan.add_argument(
        "--engine-python",
        metavar="PATH",
        help="--device cpu: measure the bandwidth with PyTorch's matrix-vector product in this "
        "interpreter (the engine's: vLLM's CPU build runs its linears through it), not float32 "
        "dot products",
    )


def run(args: argparse.Namespace, ctx: Context) -> int:
    if args.passthrough:
        raise UsageError("bench takes no server command after --")
    if args.plot and not args.plot.lower().endswith(".svg"):
        raise UsageError(f"--plot {args.plot}: only SVG is written", hint="name the file *.svg")
    config = build_config(args, ctx)
    with BenchProgress(ctx.stderr, ctx.environ) as progress:
        report = run_bench(dataclasses.replace(config, progress=progress.update))
    if args.plot:
        write_plot(report, args.plot)
    if args.json:
        print_json(report, ctx.stdout)
    else:
        bench_render.print_report(report, make_console(ctx.stdout, ctx.environ))
        if args.plot:
            ctx.stdout.write(f"Plot written to {args.plot}\n")
    return 0 if report.is_clean else 1


def build_config(args: argparse.Namespace, ctx: Context) -> BenchConfig:
    """Flags and environment to a ``BenchConfig`` (the ceiling predicted here, if possible)."""
    spinner = busy(ctx.stderr, ctx.environ, json_output=bool(args.json))
    predicted, reason = predict(args, ctx.environ, spinner)
    model = args.model
    if model and _is_local_model(model) and not args.checkpoint:
        model = None  # a path: the served name is whatever /v1/models says
    return BenchConfig(
        url=args.url,
        model=model,
        input_tokens=args.input_tokens,
        output_tokens=args.output_tokens,
        concurrency=parse_concurrency(args.concurrency),
        requests=args.requests,
        duration_seconds=parse_duration(args.duration),
        api_key=args.api_key
        or next((ctx.environ[v] for v in API_KEY_VARIABLES if ctx.environ.get(v)), None),
        endpoint=args.endpoint,
        predicted=predicted,
        no_ceiling_reason=reason,
        prompts=_dataset(args),
        dataset=args.dataset,
    )


def _dataset(args: argparse.Namespace) -> tuple[str, ...]:
    """The ``--dataset`` prompts, as many as the run can send (none without the flag)."""
    if not args.dataset:
        return ()
    from bringup.adapters.datasets import load_prompts

    levels = parse_concurrency(args.concurrency)
    wanted = sum(args.requests or max(8, 4 * c) for c in levels)
    return tuple(load_prompts(args.dataset, max(1, wanted)))


def parse_concurrency(text: str) -> tuple[int, ...]:
    """``"1,2,4"`` → ``(1, 2, 4)``; anything else is a UsageError."""
    try:
        levels = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        levels = ()
    if not levels or min(levels) < 1:
        raise UsageError(
            f"--concurrency {text!r} is not a list of positive integers",
            hint="use e.g. --concurrency 1,2,4,8",
        )
    return levels


def predict(
    args: argparse.Namespace, environ: Mapping[str, str], spinner: Busy = quiet
) -> tuple[decode.DecodeSpeed | None, str]:
    """The plan's decode prediction for the checkpoint, or None and the reason why not
    (``spinner``: shown while this CPU's bandwidth is measured)."""
    from bringup.cli.commands import plan_make as plan_cmd
    from bringup.cli.commands.plan_shared import parse_rate

    path = args.checkpoint or (args.model if args.model and _is_local_model(args.model) else None)
    cpu = args.device == "cpu"
    if not path or not (args.gpu or cpu):
        missing = [
            n
            for n, v in (("--checkpoint", path), ("--gpu or --device cpu", args.gpu or cpu))
            if not v
        ]
        return None, f"no prediction: give {' and '.join(missing)} to compare with the plan"
    pp = args.pp
    if pp < 1 or args.dcp < 1:
        raise UsageError("-pp and -dcp must be at least 1")
    tp = args.tp or (args.gpus // pp if args.gpus else 1)
    if tp < 1:
        raise UsageError("-tp/--gpus must be at least 1")
    if args.gpus and args.tp and args.gpus != tp * pp:
        raise UsageError(
            f"--gpus {args.gpus} is not -tp {tp} x -pp {pp}",
            hint="give -tp and -pp, or --gpus alone",
        )
    if plan_cmd.is_gguf(path):
        from bringup.cli.commands.plan_gguf import check_gguf_layout

        check_gguf_layout(
            tensor_parallel=args.tp,
            pipeline_parallel=pp,
            expert_parallel=args.enable_expert_parallel,
            decode_context_parallel=args.dcp,
            quantization=args.quantization,
            what="a GGUF --checkpoint",
        )
        if args.gpus not in (None, 1):
            raise UsageError(
                f"--gpus {args.gpus}: a GGUF --checkpoint is predicted on one device "
                "(llama.cpp's --tensor-split over GPUs is not)",
                hint="leave --gpus out for a GGUF --checkpoint",
            )
    bandwidth = parse_rate(args.memory_bandwidth) if args.memory_bandwidth else None
    speed = plan_cmd.predict_decode(
        path,
        gpu=None if cpu else args.gpu,
        memory_bandwidth=bandwidth,
        tensor_parallel=tp,
        setup=decode.DecodeSetup(
            args.interconnect,
            args.dcp,
            args.input_tokens,
            custom_all_reduce=not args.disable_custom_all_reduce,
        ),
        environ=environ,
        cpu_threads=args.threads,
        pipeline_parallel=pp,
        expert_parallel=args.enable_expert_parallel,
        quantization=args.quantization,
        busy=spinner,
        engine_python=args.engine_python,
    )
    return speed, ""


def _is_local_model(text: str) -> bool:
    return os.path.sep in text and Path(text).exists()


def write_plot(report: BenchReport, path: str) -> None:
    """Write the SVG plot; InputError when the file cannot be written."""
    from bringup.adapters.commands import write_local

    write_local(path, bench_render.render_svg(report), hint="give a path in a folder you can write")


def run_after_ready(url: str, ctx: Context, *, api_key: str | None, as_json: bool) -> int:
    """A short benchmark of a server that just became ready (``run --bench``, ``up --bench``):
    30 s at concurrency 1 and 4, no prediction. With ``--json`` on the caller, its human report
    goes to stderr so stdout stays JSON Lines. Errors are one line, as the command's are."""
    config = BenchConfig(
        url=url,
        concurrency=(1, 4),
        duration_seconds=30.0,
        api_key=api_key
        or next((ctx.environ[v] for v in API_KEY_VARIABLES if ctx.environ.get(v)), None),
        no_ceiling_reason=(
            "no prediction: give --checkpoint and --gpu or --device cpu to compare with the plan"
        ),
    )
    try:
        with BenchProgress(ctx.stderr, ctx.environ) as progress:
            report = run_bench(dataclasses.replace(config, progress=progress.update))
    except BringupError as exc:
        ctx.stderr.write(f"bringup: error: {exc}\n")
        return exc.exit_code
    bench_render.print_report(
        report, make_console(ctx.stderr if as_json else ctx.stdout, ctx.environ)
    )
    return 0 if report.is_clean else 1
