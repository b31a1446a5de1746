"""Remedy builders shared by the packs: concrete flags, with values taken from the log.

This module holds what every builder reads with (``number``, ``own``, ``on_rocm``) and the
remedies for causes any engine can meet: a taken port, NCCL, flags and configuration, weights,
a build for another GPU (ROCm's overrides), dead or stalled processes, the environment. GPU
memory's remedies are in ``memory_remedies``, the CPU platform's in ``cpu_remedies``, and the
ones that name a single engine's flags in that engine's pack.
"""

from __future__ import annotations

from bringup.core.diagnosis import Remedy
from bringup.core.packs.types import EngineFlags, RemedyContext


def number(ctx: RemedyContext, name: str) -> float | None:
    """A number from the line's groups, else from the facts; None when absent."""
    raw = ctx.groups.get(name)
    value: object = raw if raw is not None else ctx.facts.get(name)
    try:
        return float(str(value).replace(",", "")) if value is not None else None
    except ValueError:
        return None


def own(flags: EngineFlags, remedies: tuple[Remedy, ...]) -> tuple[Remedy, ...]:
    """The remedies whose flag the engine has: a builder shared by several packs (or a common
    signature) may name another engine's flag, which is dropped here. An engine not known
    (``flags.known`` False) keeps them all, as hints."""
    if not flags.known:
        return remedies
    vocabulary = flags.vocabulary()
    return tuple(r for r in remedies if r.flag is None or r.flag in vocabulary)


def on_rocm(ctx: RemedyContext) -> bool:
    """The log shows an AMD GPU under ROCm (the ``platform`` fact, from HIP/ROCm lines)."""
    return ctx.facts.get("platform") == "rocm"


# HSA_OVERRIDE_GFX_VERSION=X.Y.Z makes ROCm (on Linux) load the code objects of gfxXYZ: a card
# of the same family as a supported one runs them. Public ROCm issues: gfx1031 (RX 6700 XT)
# runs gfx1030's with 10.3.0 (ROCm/ROCm#2353); RDNA 3 cards use 11.0.0, reported as gfx1100
# (ROCm/legacy-rocm-build#4188), and 10.3.0 does not work on them; it has no effect on
# Windows (ROCm/TheRock#1719).
_GFX_FAMILIES = (("gfx103", "10.3.0", "gfx1030"), ("gfx110", "11.0.0", "gfx1100"))


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


def stalled(_: RemedyContext) -> tuple[Remedy, ...]:
    """No progress for a long time, no error."""
    return (
        Remedy(
            "The startup made no progress; if it waits on other ranks, check NCCL "
            "(NCCL_DEBUG=INFO) and that every GPU is visible and healthy.",
            env="NCCL_DEBUG=INFO",
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
