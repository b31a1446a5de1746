"""Remedy builders shared by the packs: concrete flags, with values taken from the log."""

from __future__ import annotations

import math
import re

from bringup.core.diagnosis import Remedy
from bringup.core.packs.types import EngineFlags, RemedyContext
from bringup.core.vocab import Phase


def number(ctx: RemedyContext, name: str) -> float | None:
    """A number from the line's groups, else from the facts; None when absent."""
    raw = ctx.groups.get(name)
    value: object = raw if raw is not None else ctx.facts.get(name)
    try:
        return float(str(value).replace(",", "")) if value is not None else None
    except ValueError:
        return None


def _fmt_util(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") if value < 1 else "1.0"


def lower_util(ctx: RemedyContext, why: str) -> Remedy:
    """--gpu-memory-utilization 0.05 below the current value (0.85 when unknown)."""
    util = number(ctx, "gpu_memory_utilization")
    value = round(util - 0.05, 2) if util is not None and util > 0.5 else 0.85
    return Remedy(
        f"Lower --gpu-memory-utilization to {_fmt_util(value)}: {why}",
        "--gpu-memory-utilization",
        _fmt_util(value),
    )


def raise_util(ctx: RemedyContext, why: str) -> Remedy:
    """--gpu-memory-utilization 0.05 above the current value, at most 0.95."""
    util = number(ctx, "gpu_memory_utilization")
    value = min(0.95, round(util + 0.05, 2)) if util is not None else 0.95
    return Remedy(
        f"Raise --gpu-memory-utilization to {_fmt_util(value)}: {why}",
        "--gpu-memory-utilization",
        _fmt_util(value),
    )


def more_tp(ctx: RemedyContext) -> Remedy:
    """Double the tensor-parallel size, so each GPU holds half the weights."""
    tp = number(ctx, "tensor_parallel_size")
    value = str(int(tp) * 2) if tp else "2"
    return Remedy(
        f"Spread the weights over more GPUs with --tensor-parallel-size {value}, "
        "or use a quantized checkpoint.",
        "--tensor-parallel-size",
        value,
    )


def cap_max_model_len(ctx: RemedyContext, without_estimate: str) -> Remedy:
    """``--max-model-len`` set to the estimate the log gives, else ``auto`` with ``without_estimate``."""
    est = ctx.groups.get("estimated")
    if est:
        return Remedy(
            f"Set --max-model-len {est}: the log says that is the longest request "
            "the available KV cache can hold.",
            "--max-model-len",
            est,
        )
    return Remedy(without_estimate, "--max-model-len", "auto")


def max_model_len(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """KV cache too small for one max-length request: cap the length at what fits."""
    out: list[Remedy] = [
        cap_max_model_len(
            ctx,
            "Lower --max-model-len (or pass --max-model-len auto on vLLM >= 0.21) "
            "so one full-length request fits in the KV cache.",
        )
    ]
    out.append(raise_util(ctx, "more memory for the KV cache."))
    out.append(
        Remedy(
            "Store the KV cache in FP8 with --kv-cache-dtype fp8 to halve its size.",
            "--kv-cache-dtype",
            "fp8",
        )
    )
    return tuple(out)


def no_kv_memory(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """Nothing left for the KV cache after weights and activations."""
    return (
        raise_util(ctx, "weights and activations used the whole budget."),
        more_tp(ctx),
        _halve(
            ctx,
            "max_num_batched_tokens",
            "--max-num-batched-tokens",
            8192,
            "a smaller profiling batch leaves more for the KV cache.",
        ),
    )


def _halve(ctx: RemedyContext, fact: str, flag: str, default: int, why: str) -> Remedy:
    current = number(ctx, fact)
    base = int(current) if current else default
    value = str(max(1, base // 2))
    was = f" from {base}" if current else ""
    return Remedy(f"Halve {flag}{was} to {value}: {why}", flag, value)


def sampler_oom(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """The sampler warmup allocates max_num_seqs x vocab logits: quarter (>=1024) or halve it."""
    n = int(number(ctx, "requests") or number(ctx, "max_num_seqs") or 1024)
    if n >= 1024:
        value, how = max(1, n // 4), "a quarter of"
    else:
        value, how = max(1, n // 2), "half of"
    first = Remedy(
        f"Set --max-num-seqs {value} ({how} {n}): the sampler warmup allocates "
        f"{n} x vocabulary float32 logits at once, and that did not fit.",
        "--max-num-seqs",
        str(value),
    )
    return (first, lower_util(ctx, "leaves more headroom outside vLLM's budget for the warmup."))


def own(flags: EngineFlags, remedies: tuple[Remedy, ...]) -> tuple[Remedy, ...]:
    """The remedies whose flag the engine has: a builder shared by several packs (or a common
    signature) may name another engine's flag, which is dropped here. An engine not known
    (``flags.known`` False) keeps them all, as hints."""
    if not flags.known:
        return remedies
    vocabulary = flags.vocabulary()
    return tuple(r for r in remedies if r.flag is None or r.flag in vocabulary)


def _lower_share(ctx: RemedyContext, why: str) -> Remedy:
    """The engine's memory share 0.05 lower (vLLM's --gpu-memory-utilization when not known)."""
    flag = ctx.flags.memory_share or "--gpu-memory-utilization"
    util = number(ctx, ctx.flags.facts.get(flag, "gpu_memory_utilization"))
    value = round(util - 0.05, 2) if util is not None and util > 0.5 else 0.85
    return Remedy(f"Lower {flag} to {_fmt_util(value)}: {why}", flag, _fmt_util(value))


def _eager(ctx: RemedyContext, text: str) -> Remedy:
    """No CUDA graphs, by the engine's own switch (vLLM's --enforce-eager when not known)."""
    flag = ctx.flags.eager or "--enforce-eager"
    return Remedy(text.format(flag=flag), flag)


def cuda_oom(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """GPU out of memory: what to change depends on the phase it happened in (the engine's
    own flags; the ones it lacks are left out). On ROCm the GPU's tool is rocm-smi."""
    out = own(ctx.flags, _cuda_oom(ctx))
    if on_rocm(ctx):
        out = tuple(_rocm_tools(r) for r in out)
    return out


def on_rocm(ctx: RemedyContext) -> bool:
    """The log shows an AMD GPU under ROCm (the ``platform`` fact, from HIP/ROCm lines)."""
    return ctx.facts.get("platform") == "rocm"


def _rocm_tools(r: Remedy) -> Remedy:
    text = r.text.replace("`nvidia-smi`", "`rocm-smi`")
    return r if text == r.text else Remedy(text, r.flag, r.value, r.env)


# HSA_OVERRIDE_GFX_VERSION=X.Y.Z makes ROCm (on Linux) load the code objects of gfxXYZ: a card
# of the same family as a supported one runs them. Public ROCm issues: gfx1031 (RX 6700 XT)
# runs gfx1030's with 10.3.0 (ROCm/ROCm#2353); RDNA 3 cards use 11.0.0, reported as gfx1100
# (ROCm/legacy-rocm-build#4188), and 10.3.0 does not work on them; it has no effect on
# Windows (ROCm/TheRock#1719).
_GFX_FAMILIES = (("gfx103", "10.3.0", "gfx1030"), ("gfx110", "11.0.0", "gfx1100"))


def _cuda_oom(ctx: RemedyContext) -> tuple[Remedy, ...]:
    if ctx.phase in (Phase.WEIGHTS_LOADING, Phase.WEIGHTS_LOADED, Phase.DISTRIBUTED_INIT):
        return (more_tp(ctx), Remedy("Free the GPU of other processes (check `nvidia-smi`)."))
    if ctx.phase is Phase.MEMORY_PROFILING:
        return (
            _halve(
                ctx,
                "max_num_batched_tokens",
                "--max-num-batched-tokens",
                8192,
                "the profiling forward pass scales with it.",
            ),
            _halve(
                ctx,
                "max_num_seqs",
                "--max-num-seqs",
                1024,
                "the sampler part of profiling scales with it.",
            ),
        )
    if ctx.phase is Phase.CUDA_GRAPH_CAPTURE:
        return (
            _lower_share(ctx, "CUDA graphs are captured outside the KV budget."),
            _eager(ctx, "Skip CUDA graphs with {flag} (slower decoding, no graph memory)."),
        )
    if ctx.phase is Phase.WARMUP:
        return sampler_oom(ctx)
    return (
        _lower_share(ctx, "leaves headroom for allocations outside the KV cache."),
        _eager(ctx, "Skip CUDA graphs with {flag}."),
    )


def free_memory(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """Another process holds GPU memory: free it, or ask for no more than is free."""
    out = [
        Remedy(
            "Stop the other processes holding GPU memory (often a leftover server from an "
            "earlier run); `nvidia-smi --query-compute-apps=pid,used_memory --format=csv` "
            "lists them."
        )
    ]
    free, total = number(ctx, "free_gib"), number(ctx, "total_gib")
    share = ctx.flags.memory_share  # the engine's own flag (vLLM --gpu-memory-utilization)
    weights = number(ctx, "weights_gib_per_gpu") or _weights_from_name(ctx)
    if free is not None and total and share is not None:
        value = math.floor((free / total - 0.02) * 100) / 100
        budget = value * total
        # never ask for less than the weights need: a share below them cannot start either
        fits = weights is not None and budget >= weights * 1.1 + 1.0
        if value >= 0.1 and fits:
            out.append(
                Remedy(
                    f"Or ask for what is free: {share} "
                    f"{_fmt_util(value)} ({free:g} of {total:g} GiB are free; the weights "
                    f"take about {weights:.3g} GiB).",
                    share,
                    _fmt_util(value),
                )
            )
        elif value >= 0.1:
            out.append(
                Remedy(
                    f"Asking for only what is free ({share} {_fmt_util(value)}, {budget:.1f} "
                    f"GiB) works only if the weights and a KV cache fit in that; "
                    f"{'they take about ' + format(weights, '.3g') + ' GiB per GPU' if weights else 'the log does not say how much the weights take'}: "
                    "free the GPU instead, or check with `bringup plan`."
                )
            )
    return tuple(out)


_PARAMS = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)[Bb](?![A-Za-z])")


def _weights_from_name(ctx: RemedyContext) -> float | None:
    """GiB of weights per GPU guessed from a model name ("Llama-3.1-8B" in bf16: ~15 GiB),
    lower for FP8 and 4-bit names; None when the name gives no size."""
    name = str(ctx.facts.get("model", ""))
    m = _PARAMS.search(name.rsplit("/", 1)[-1])
    if not m:
        return None
    low = name.lower()
    per_param = 0.5 if re.search(r"awq|gptq|int4|4bit|q4", low) else 1.0 if "fp8" in low else 2.0
    tp = number(ctx, "tensor_parallel_size") or 1
    return float(m.group(1)) * 1e9 * per_param / 2**30 / tp


def port_in_use(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """The port is taken: name the next one."""
    port = ctx.groups.get("port") or str(ctx.facts.get("port", "")) or None
    check = Remedy(
        f"See who holds the port: `ss -ltnp | grep :{port or '<port>'}` "
        "(often a server left over from an earlier run)."
    )
    if port and port.isdigit():
        nxt = str(int(port) + 1)
        return (check, Remedy(f"Or serve on another port: --port {nxt}.", "--port", nxt))
    return (check,)


def nccl(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """NCCL failed or hung between GPUs; a /dev/shm the log shows too small comes first."""
    shm = number(ctx, "shm_bytes")
    line = " ".join(str(v) for v in ctx.groups.values())
    out = []
    if shm is not None or "/dev/shm" in line:
        size = f" (it has {shm / 2**20:.0f} MiB)" if shm else ""
        out.append(
            Remedy(
                f"/dev/shm is too small for NCCL{size}: run the container with --ipc=host or "
                "--shm-size=16g (Kubernetes: an emptyDir with medium Memory on /dev/shm)."
            )
        )
    if on_rocm(ctx):  # RCCL is ROCm's NCCL and reads the same NCCL_* variables
        out.append(
            Remedy(
                "On ROCm this is RCCL, which reads the same NCCL_* variables below; "
                "`rocm-smi --showtopo` shows how the GPUs are linked."
            )
        )
    out += [
        Remedy("Rerun with NCCL_DEBUG=INFO to see which transport failed.", env="NCCL_DEBUG=INFO"),
        Remedy(
            "Disable peer-to-peer transfers if the GPUs cannot reach each other directly.",
            env="NCCL_P2P_DISABLE=1",
        ),
    ]
    if "--disable-custom-all-reduce" in ctx.flags.vocabulary():  # vLLM and SGLang have it
        out.append(Remedy("Disable the custom all-reduce kernel.", "--disable-custom-all-reduce"))
    if not out[0].text.startswith("/dev/shm"):
        out.append(Remedy("In a container, run with --ipc=host (or a large --shm-size)."))
    return tuple(out)


def trust_remote_code(_: RemedyContext) -> tuple[Remedy, ...]:
    """The model ships its own code."""
    return (
        Remedy(
            "Allow the model's own code with --trust-remote-code (read it first).",
            "--trust-remote-code",
        ),
    )


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


def fix_flags(_: RemedyContext) -> tuple[Remedy, ...]:
    """Generic configuration error."""
    return (
        Remedy(
            "Fix the flag or model configuration the error names; it fails the same way "
            "on every retry."
        ),
    )


def redownload(_: RemedyContext) -> tuple[Remedy, ...]:
    """Weights missing or corrupt."""
    return (
        Remedy(
            "Check the checkpoint (`bringup verify <dir>`) and download the missing or "
            "damaged files again; a git-lfs pointer file is not a weight file."
        ),
    )


def local_model_missing(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """A model path that does not exist on this machine (or node)."""
    path = ctx.groups.get("path") or "the model path"
    return (
        Remedy(
            f"Give the model folder's path as it is on this machine, or copy the model to {path} "
            "(a folder with config.json and the weights); `bringup verify` checks it."
        ),
    )


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


def bf16_half(_: RemedyContext) -> tuple[Remedy, ...]:
    """bf16 on a pre-Ampere GPU."""
    return (
        Remedy("Run in float16 with --dtype half: this GPU has no bfloat16.", "--dtype", "half"),
    )


def wrong_build(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """The wheel or kernels were not built for this GPU (on ROCm: the override for a card of
    a supported family, when the log names its architecture)."""
    build = Remedy(
        "Use a build (wheel or container) compiled for this GPU's architecture, or "
        "a quantization/attention backend this GPU supports."
    )
    if not on_rocm(ctx):
        return (build,)
    arch = str(ctx.groups.get("gpu_arch") or ctx.facts.get("gpu_arch") or "")
    for prefix, version, target in _GFX_FAMILIES:
        if arch.startswith(prefix) and arch != target:
            return (
                Remedy(
                    f"This {arch} is of the same family as {target}, which ROCm supports: on "
                    f"Linux, set HSA_OVERRIDE_GFX_VERSION={version} in the server's "
                    f"environment so ROCm runs {target}'s code on it (no effect on Windows).",
                    env=f"HSA_OVERRIDE_GFX_VERSION={version}",
                ),
                Remedy(f"Or use a ROCm build (wheel or container) compiled for {arch} itself."),
            )
    named = f" ({arch})" if arch else ""
    return (
        Remedy(
            f"Use a ROCm build (wheel or container) compiled for this GPU's architecture{named} "
            "(`rocminfo | grep gfx` names it), or a quantization/attention backend this GPU "
            "supports."
        ),
    )


def rocm_hw_exception(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """A GPU hardware exception under ROCm: most often code for another architecture, run
    because HSA_OVERRIDE_GFX_VERSION names a target outside this card's family."""
    arch = ctx.facts.get("gpu_arch")
    seen = f" (the log shows it as {arch})" if arch else ""
    return (
        Remedy(
            "If HSA_OVERRIDE_GFX_VERSION is set, this GPU may be running code built for "
            f"another architecture{seen}: the override only works within one family (an "
            "RDNA 2 card as gfx1030, an RDNA 3 card as gfx1100). Unset it and use a build "
            "compiled for the card's own gfx target (`rocminfo | grep gfx`)."
        ),
    )


def host_oom(_: RemedyContext) -> tuple[Remedy, ...]:
    """The kernel's OOM killer ended the process."""
    return (
        Remedy(
            "The kernel killed the process for host RAM: check `dmesg | grep -i oom`, "
            "give the machine or container more RAM, or lower --swap-space / CPU "
            "offload."
        ),
    )


def engine_died(_: RemedyContext) -> tuple[Remedy, ...]:
    """A process died without saying why."""
    return (
        Remedy(
            "A process died without a cause in the log: check `dmesg` and the system "
            "journal, and rerun with the engine's debug logging (vLLM: VLLM_LOGGING_LEVEL=DEBUG)."
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


def stalled(_: RemedyContext) -> tuple[Remedy, ...]:
    """No progress for a long time, no error."""
    return (
        Remedy(
            "The startup made no progress; if it waits on other ranks, check NCCL "
            "(NCCL_DEBUG=INFO) and that every GPU is visible and healthy.",
            env="NCCL_DEBUG=INFO",
        ),
    )


def mem_fraction_lower(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """SGLang: OOM or graph-capture failure: less static memory, smaller graphs."""
    frac = number(ctx, "mem_fraction_static")
    value = f"{round(frac - 0.05, 2):g}" if frac else "0.8"
    return (
        Remedy(f"Lower --mem-fraction-static to {value}.", "--mem-fraction-static", value),
        Remedy("Capture fewer CUDA graphs: --cuda-graph-max-bs 64.", "--cuda-graph-max-bs", "64"),
        Remedy(
            "Shrink prefill chunks: --chunked-prefill-size 4096.", "--chunked-prefill-size", "4096"
        ),
    )


def mem_fraction_raise(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """SGLang: the weights left nothing for the KV pool."""
    low = number(ctx, "minimum")
    frac = number(ctx, "mem_fraction_static")
    if low is not None:
        value = f"{math.ceil((low + 0.02) * 100) / 100:g}"
    else:
        value = f"{min(0.95, round(frac + 0.05, 2)):g}" if frac else "0.9"
    return (
        Remedy(
            f"Raise --mem-fraction-static to {value} so the KV pool gets memory.",
            "--mem-fraction-static",
            value,
        ),
        more_tp(ctx),
    )


def tgi_prefill(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """TGI: the warmup prefill batch did not fit."""
    tokens = number(ctx, "tokens")
    value = str(max(256, int(tokens) // 2)) if tokens else "2048"
    return (
        Remedy(
            f"Lower --max-batch-prefill-tokens to {value}.", "--max-batch-prefill-tokens", value
        ),
        Remedy(
            "Or lower --max-total-tokens / --max-input-tokens, or use more shards (--num-shard)."
        ),
    )


def spawn(_: RemedyContext) -> tuple[Remedy, ...]:
    """Workers forked after CUDA was initialised."""
    return (
        Remedy(
            "Start workers with the spawn method: VLLM_WORKER_MULTIPROC_METHOD=spawn (and do "
            "not touch CUDA in the launching script before the engine starts).",
            env="VLLM_WORKER_MULTIPROC_METHOD=spawn",
        ),
    )


def hf_token(_: RemedyContext) -> tuple[Remedy, ...]:
    """A gated or private Hugging Face repository."""
    return (
        Remedy(
            "Accept the model's licence on its Hugging Face page with the account whose token "
            "the server uses, then pass that token: HF_TOKEN=<token> (or `hf auth login`).",
            env="HF_TOKEN=<token>",
        ),
    )


def rendezvous_timeout(_: RemedyContext) -> tuple[Remedy, ...]:
    """torch.distributed's store waited for ranks that never came."""
    return (
        Remedy(
            "The other ranks never joined: their own log has the error (look for the first "
            "traceback of every rank), or they could not reach this node's address and port."
        ),
    )


def exception(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """An unhandled exception no signature knows: say what it is, invent nothing."""
    kind = ctx.groups.get("type", "exception")
    return (
        Remedy(
            f"The process stopped on this {kind}; bringup knows no remedy for it. Search the "
            "message with the engine's version, and check the versions of the packages the "
            "traceback names."
        ),
    )


def ollama_gpu_layers(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """Ollama put more layers on the GPU than fit."""
    layers = number(ctx, "layers_offloaded")
    fewer = f" (it offloaded {int(layers)})" if layers else ""
    return (
        Remedy(
            f"Put fewer layers on the GPU{fewer}: set the model's num_gpu parameter lower "
            "(a Modelfile `PARAMETER num_gpu N`, or options.num_gpu in the request)."
        ),
        Remedy(
            "Or free the GPU (another process may hold its memory), use a smaller quant, or "
            "a smaller context (OLLAMA_CONTEXT_LENGTH).",
        ),
    )


def ollama_pull(_: RemedyContext) -> tuple[Remedy, ...]:
    """The model is not in Ollama's store."""
    return (Remedy("Pull the model first: `ollama pull <model>`."),)


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


def reinstall(_: RemedyContext) -> tuple[Remedy, ...]:
    """The engine's compiled extension does not match the installed torch."""
    return (
        Remedy(
            "Install the engine with the torch it was built against (the CUDA or ROCm build "
            "the wheel or container names), in a fresh virtual environment."
        ),
    )


def no_device(_: RemedyContext) -> tuple[Remedy, ...]:
    """No accelerator visible."""
    return (
        Remedy(
            "Run on a machine (or container: --gpus all) where the GPU and its driver are "
            "visible (`nvidia-smi` or `rocm-smi` works), or install the engine's CPU build."
        ),
    )


def upgrade_transformers(_: RemedyContext) -> tuple[Remedy, ...]:
    """transformers does not know the architecture."""
    return (
        Remedy(
            "Upgrade transformers (and the engine) to a version that knows this model type, "
            "or use an image that ships one."
        ),
    )


def version_skew(_: RemedyContext) -> tuple[Remedy, ...]:
    """Two packages' APIs do not match."""
    return (
        Remedy(
            "Install the versions of the two packages the traceback names that the engine's "
            "release pins (its requirements file), in a fresh environment."
        ),
    )


def ollama_port(ctx: RemedyContext) -> tuple[Remedy, ...]:
    """Ollama's port is taken, most often by an Ollama server already running."""
    port = ctx.groups.get("port") or "11434"
    host = ctx.groups.get("host") or "127.0.0.1"
    nxt = str(int(port) + 1) if port.isdigit() else "11435"
    return (
        Remedy(
            f"An Ollama server is probably running already (`systemctl status ollama`, "
            f"`ss -ltnp | grep :{port}`): use it, or stop it before starting another."
        ),
        Remedy(
            f"Or serve on another address: OLLAMA_HOST={host or '127.0.0.1'}:{nxt}.",
            env=f"OLLAMA_HOST={host or '127.0.0.1'}:{nxt}",
        ),
    )


def local_proxy(_: RemedyContext) -> tuple[Remedy, ...]:
    """The server's request to itself went through a proxy from its environment."""
    return (
        Remedy(
            "Keep local requests off the proxy: start the server with "
            "no_proxy=localhost,127.0.0.1,0.0.0.0 (and NO_PROXY), or without "
            "http_proxy/https_proxy/all_proxy in its environment.",
            env="no_proxy=localhost,127.0.0.1,0.0.0.0",
        ),
    )
