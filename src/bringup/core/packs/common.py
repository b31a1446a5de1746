"""Failure signatures that do not depend on the engine.

Every Python engine prints PyTorch's, NCCL's, uvicorn's and the kernel's own messages, and a
pasted fragment often holds nothing else: these signatures apply to every pack, and they are
what bringup reads when the engine is not (yet) known (``packs.generic()``).
"""

from __future__ import annotations

from bringup.core.packs import memory_remedies as mem
from bringup.core.packs import remedies as r
from bringup.core.packs.torch import ACCELERATOR_OOM
from bringup.core.packs.types import FactRule, Signature, rx
from bringup.core.vocab import FailureClass, Phase

F = FailureClass
P = Phase

# The port groups let the analyzer tell this server's bind error from another server's.
BIND = (
    r"\[Errno 98\] (?:error while attempting to bind on address \('?(?P<host>[^',]*)'?, "
    r"(?P<port>\d+)\): )?(?:\[errno 98\] )?[Aa]ddress already in use"
    r"|EADDRINUSE"
)

# before every pack's own: a 401 is an access problem whichever exception carries it
EARLY = (
    Signature(
        "hf_gated",
        rx(
            r"GatedRepoError|Cannot access gated repo|401 Client Error|Access to model \S+ is restricted"
            r"|You are trying to access a gated repo"
        ),
        F.MISSING_OR_CORRUPT_WEIGHTS,
        "The model's Hugging Face repository is gated or private and this token may not read it.",
        r.hf_token,
        P.CONFIG,
    ),
)

# The platform the log shows: ROCm's own words (its allocator, runtime errors, libraries, the
# override variable, vLLM's platform line); and the GPU's architecture name (gfx1031).
_ROCM_WORDS = (
    r"\bHIP (?:out of memory|error)|\bhipError\w+|\bROCm\b|\brocBLAS\b|\bRCCL\b|\brocm-smi\b"
    r"|HSA_OVERRIDE_GFX_VERSION[=:] ?\d|detected platform rocm"
)
FACTS = (
    FactRule(rx(rf"(?P<platform>{_ROCM_WORDS})"), {"platform": lambda _: "rocm"}),
    FactRule(rx(r"\b(?P<gpu_arch>gfx\d{3,4}[a-z]?)\b")),
)

SIGNATURES = (
    Signature(
        "bind",
        rx(BIND),
        F.PORT_IN_USE,
        "Port {port} is already in use, so the server could not bind it.",
        r.port_in_use,
    ),
    Signature(
        "accelerator_oom",
        rx(ACCELERATOR_OOM),
        F.CUDA_OOM,
        "The GPU ran out of memory.",
        mem.cuda_oom,
    ),
    Signature(
        "nccl",
        rx(
            r"NCCL [Ee]rror|ncclSystemError|ncclInternalError|ncclUnhandledCudaError|ncclRemoteError"
            # torch's c10d watchdog (ProcessGroupNCCL.cpp), whichever engine runs it
            r"|Watchdog caught collective operation timeout"
            r"|NCCL WARN (?:Cuda failure|Call to|NET/|Error|ncclOsSocketPollConnect|.*failed to extend (?P<shm>/dev/shm))"
        ),
        F.NCCL_ERROR,
        "NCCL (GPU-to-GPU communication) failed.",
        r.nccl,
        priority=2,
    ),
    # ROCm has no code objects for this GPU's architecture (a consumer RDNA card most often)
    Signature(
        "rocm_no_code_object",
        rx(
            r"hipErrorNoBinaryForGpu|Unable to find code object for all current devices"
            r"|Cannot read \S*TensileLibrary\S*.*?GPU arch ?: ?(?P<gpu_arch>gfx\w+)"
            r"|No GPU code object found"
        ),
        F.UNSUPPORTED_HARDWARE,
        "ROCm has no GPU code for this GPU's architecture ({gpu_arch}).",
        r.wrong_build,
        priority=2,
    ),
    # the GPU faulted running a kernel: code for another architecture (a spoofed gfx) or a bug
    Signature(
        "hsa_hw_exception",
        rx(r"HSA_STATUS_ERROR_EXCEPTION|An HSAIL operation resulted in a hardware exception"),
        F.UNSUPPORTED_HARDWARE,
        "The AMD GPU raised a hardware exception while running a kernel (ROCm).",
        r.rocm_hw_exception,
        priority=2,
    ),
    Signature(
        "no_kernel_image",
        rx(
            r"no kernel image is available for execution on the device|HIP error: invalid device function"
            r"|is not compatible with the current PyTorch installation"
        ),
        F.UNSUPPORTED_HARDWARE,
        "This build has no GPU kernels for this GPU's architecture.",
        r.wrong_build,
        priority=2,
    ),
    Signature(
        "forked_cuda",
        rx(r"Cannot re-initialize CUDA in forked subprocess"),
        F.CONFIG_ERROR,
        "A worker was forked after CUDA was initialised; CUDA needs the 'spawn' start method.",
        r.spawn,
        P.DISTRIBUTED_INIT,
    ),
    Signature(
        "kernel_oom_kill",
        rx(r"Out of memory: Killed process|oom-kill:|invoked oom-killer"),
        F.HOST_OOM,
        "The kernel's OOM killer ended a process: host RAM ran out.",
        r.host_oom,
        priority=2,
    ),
    Signature(
        "usage",
        rx(
            r"^error: (?:a value is required for|unexpected argument|invalid value|the following required arguments)|^\S+: error: (?:argument |unrecognized arguments)"
        ),
        F.CONFIG_ERROR,
        "The command line is invalid.",
        r.fix_flags,
        P.START,
    ),
    Signature(
        "unknown_architecture",
        rx(
            r"Transformers does not recognize this architecture|model type `[^`]+` but Transformers does not"
        ),
        F.CONFIG_ERROR,
        "The installed transformers does not know this model's architecture.",
        r.upgrade_transformers,
        P.CONFIG,
    ),
    Signature(
        "api_skew",
        rx(r"TypeError: \S+ got an unexpected keyword argument"),
        F.CONFIG_ERROR,
        "Two installed packages do not match: one calls the other with an argument it does not know.",
        r.version_skew,
    ),
    Signature(
        "ray_actor_died",
        rx(
            r"The actor is dead because its worker process has died.*killed by SIGKILL by OOM killer"
        ),
        F.HOST_OOM,
        "A Ray worker died; Ray names the kernel's OOM killer (host RAM) as the first suspect.",
        r.host_oom,
    ),
    # A request the server makes to itself (SGLang's warmup and model-info wait, a health wait)
    # that an http_proxy from the environment took. Two general rules show it:
    # - a gateway status (502 Bad Gateway, 504 Gateway Timeout; RFC 9110 15.6.3/15.6.5) is what
    #   a proxy answers when it cannot reach the server behind it; no engine's HTTP server
    #   returns it for its own routes (requests' ``<Response [502]>``);
    # - a request line in absolute form (``GET http://0.0.0.0:PORT/... HTTP/1.1``) is sent only
    #   to a proxy (RFC 9112 3.2.2); urllib3's connection log prints it after the proxy's
    #   address, and a non-2xx answer to a local address that way is the proxy refusing it.
    Signature(
        "local_request_via_proxy",
        rx(
            r"<Response \[50[24]\]>|\b502 Bad Gateway\b|\b504 Gateway Time-?out\b"
            r'|https?://(?P<proxy>[\w.-]+:\d+) "[A-Z]+ https?://(?:0\.0\.0\.0|127\.0\.0\.1|localhost)'
            r'[:/]\S* HTTP/1\.[01]" [3-5]\d\d\b'
        ),
        F.CONFIG_ERROR,
        "A request the server made to itself went through a proxy from its environment "
        "(http_proxy/https_proxy) and failed there.",
        r.local_proxy,
        loud_only=True,
    ),
    Signature(
        "rendezvous_timeout",
        rx(r"DistStoreError: Timed out after \d+ seconds waiting for clients|Socket Timeout"),
        F.TIMEOUTS,
        "torch.distributed waited for the other ranks and they never joined.",
        r.rendezvous_timeout,
        P.DISTRIBUTED_INIT,
    ),
)


# What a healthy OpenAI-compatible server prints all day once it is ready: uvicorn's access line
# (its access format '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s',
# uvicorn/config.py LOGGING_CONFIG; vLLM and SGLang serve through uvicorn) for the routes that
# clients and health checks poll. Once a start is ready, a rule's string found in these lines is
# not what a line is screened for where the rule's pattern needs another (core.after_ready):
# "model" (in every /v1/models request) or " HTTP/1." would let every request line by.
ROUTINE_LINES = tuple(
    f'INFO:     127.0.0.1:40312 - "{route} HTTP/1.1" 200 OK'
    for route in (
        "GET /v1/models",
        "GET /health",
        "GET /metrics",
        "POST /v1/chat/completions",
        "POST /v1/completions",
    )
)
