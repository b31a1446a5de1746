"""General rules for a line no signature knows: what its error says, by its type, its message
and the frames it was raised in (issue 24, rule c).

A signature is one message of one engine; these rules are stated once for every engine and
apply only where no signature matched. An unhandled exception (``ValueError: ...``), a Rust
panic (``thread 'main' panicked at '...'``), a C++ ``what():`` or a summary that carries a
signal or an exit code is read here:

- its **message** names the resource or the setting: GPU memory, a port, a compute
  capability or kernel the build lacks, a device ordinal, a file, a flag;
- its **type** says what kind of failure it is: ``TimeoutError`` waited, ``FileNotFoundError``
  found nothing, ``ValueError``/``TypeError``/``AssertionError`` raised from an argument or
  config check refused the setup;
- its **frames** say what was being done: which file was read (``load_weights``,
  ``safetensors``), which check failed (``verify_*``, ``__post_init__``, ``parse_args``);
- a **signal** says how the process ended: SIGILL is an instruction this CPU/GPU lacks,
  SIGKILL most often the kernel's OOM killer, SIGBUS a shared-memory mapping that ran out.

A rule gives a class and a reason; the remedy says which file or flag to look at. A type a
rule does not explain (``TypeError: 'array.array' object is not subscriptable``: a bug, not a
setup) stays ``engine_core_died``: a confident wrong class is worse than an honest one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bringup.core.vocab import FailureClass, Phase

F = FailureClass


@dataclass(frozen=True, slots=True)
class Cause:
    """What a rule concluded from an error: its class, why, and where to look."""

    failure_class: FailureClass
    why: str  # the rule that decided, in words ("its message names GPU memory")
    look_at: str  # the file, flag or setting to look at (a full sentence)


@dataclass(frozen=True, slots=True)
class _Rule:
    failure_class: FailureClass
    message: re.Pattern[str] | None  # searched in "Type: message"
    types: frozenset[str]  # the rule holds for these types only (empty: any)
    frames: frozenset[str]  # ... or when one of these functions is in the traceback
    why: str
    look_at: str


def _rule(
    cls: FailureClass,
    message: str | None,
    why: str,
    look_at: str,
    *,
    types: Sequence[str] = (),
    frames: Sequence[str] = (),
) -> _Rule:
    return _Rule(
        cls,
        re.compile(message) if message is not None else None,
        frozenset(types),
        frozenset(frames),
        why,
        look_at,
    )


# the types Python raises for a value or an argument it refuses
_REFUSALS = (
    "ValueError",
    "TypeError",
    "AssertionError",
    "KeyError",
    "NotImplementedError",
    "ArgumentError",
    "ArgumentTypeError",
    "ValidationError",
    "RuntimeError",
    "Exception",
)
# functions that check a configuration or parse arguments (vLLM's config __post_init__ and
# verify_*, SGLang's ServerArgs checks, argparse, pydantic)
_CHECKS = (
    "__post_init__",
    "parse_args",
    "from_cli_args",
    "create_engine_config",
    "check_server_args",
    "_verify_args",
    "verify_with_parallel_config",
    "_verify_quantization",
    "_verify_cuda_graph",
    "verify_async_output_proc",
    "validate",
    "_handle_missing_default_values",
    "get_config",
    "get_hf_text_config",
    "get_quant_config",
)
# functions that read the checkpoint
_READS_WEIGHTS = (
    "load_weights",
    "safetensors_weights_iterator",
    "_prepare_weights",
    "download_weights_from_hf",
    "pt_weights_iterator",
    "load_model_weights",
    "get_model_loader",
)

_MEMORY = (
    r"(?i:out of memory)|OutOfMemory|would exceed allowed memory|CUBLAS_STATUS_ALLOC_FAILED"
    r"|cudaErrorMemoryAllocation|hipErrorOutOfMemory|(?:Not enough|insufficient) (?:GPU |device )?memory"
    r"|failed to allocate \S+ buffer|cudaMalloc failed"
)
_HARDWARE = (
    r"compute capability|\bsm_?\d{2,3}\b.*(?:not supported|required|and above|or newer)"
    r"|(?:GPU|device|hardware|architecture|platform)s?(?: \w+)? (?:is |are )?not supported"
    r"|not supported (?:on|by|for) (?:this|the current|your) (?:GPU|device|hardware|platform)"
    r"|unsupported (?:GPU|device|hardware|architecture)|no kernel image|invalid device function"
    r"|[Ii]llegal instruction|operation not supported on this device|operation not permitted"
    r"|only supports? \w+ GPUs|requires? (?:a )?(?:GPU|NVIDIA|AMD|CUDA) .*(?:newer|above|or later)"
)
_SETTING = (
    r"--[a-z][\w-]+|`[a-z_]+`|\b(?:argument|option|flag|parameter|config(?:uration)? file|"
    r"setting|environment variable)\b|\b(?:should|must) (?:be|provide|specify|set|pass)\b"
    r"|\bplease (?:set|provide|specify|pass|use)\b|\b(?:invalid|unknown|unrecognized|unsupported) "
    r"(?:value|choice|option|argument|quantization|dtype|model type|architecture)"
    r"|\bis not (?:a valid|one of|supported (?:with|when|for))|\bcannot be (?:used|combined) with"
)

RULES: tuple[_Rule, ...] = (
    # a model's config or implementation lacks what the code asks of it
    _rule(
        F.CONFIG_ERROR,
        r"'\w*(?:Config|For(?:CausalLM|ConditionalGeneration)\w*)' object has no attribute",
        "the model's configuration lacks what this version's code expects (an architecture "
        "this version does not support, or a mismatched transformers)",
        "Check that this engine version supports the model's architecture, and the installed "
        "transformers version.",
    ),
    # the message says what the setup must be or provide (a setting, a scale, a mode)
    _rule(
        F.CONFIG_ERROR,
        r"\b(?:must|need to|needs to) be (?:calibrated|set|provided|specified|configured|enabled|"
        r"disabled|one of)\b|[.,;] *(?:or |please |)(?:provide|set|specify|pass) (?:the |a |an |"
        r"checkpoint )?[\w-]+",
        "its message names a setting or an input this launch did not give",
        "Give the setting or the input its message names.",
    ),
    _rule(
        F.PORT_IN_USE,
        r"[Aa]ddress already in use|errno:? ?98\b|EADDRINUSE",
        "its message says the address is already in use",
        "Another process holds the port it names: stop it, or give this server another port.",
    ),
    _rule(
        F.CUDA_OOM,
        _MEMORY,
        "its message says the device ran out of memory",
        "Lower the memory the engine takes (its memory-share, batch or context flags), or "
        "free the GPU of other processes.",
    ),
    _rule(
        F.CONFIG_ERROR,
        r"invalid device ordinal|(?:number|count) of (?:available )?(?:GPUs|devices)"
        r"|larger than the number of available GPUs|world[_ ]size",
        "its message says more devices were asked for than are visible",
        "Check that tensor x pipeline parallel is at most the GPUs this process sees "
        "(CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES and the -tp/-pp flags).",
    ),
    _rule(
        F.UNSUPPORTED_HARDWARE,
        _HARDWARE,
        "its message says this GPU, kernel or instruction is not supported",
        "Check the GPU's compute capability against the build's, the --dtype (bfloat16 needs "
        "compute capability 8.0) and the attention backend; a build for this GPU may be needed.",
    ),
    _rule(
        F.TIMEOUTS,
        r"[Tt]imed out|[Tt]imeout (?:expired|reached)|deadline exceeded",
        "it waited and gave up",
        "Something it waited for never came: look for the process that was being waited on; "
        "a longer timeout only helps when the start was merely slow.",
        types=("TimeoutError", "ReadTimeout", "DistStoreError", "ReadTimeoutError"),
    ),
    _rule(
        F.MISSING_OR_CORRUPT_WEIGHTS,
        r"(?:safetensors|\.gguf|\.bin\b|\.pt\b|checkpoint|weights?|config\.json|tokenizer)"
        r"|No such file or directory|does not exist|not found|[Cc]orrupt|truncated|unexpected EOF"
        r"|HeaderTooLarge|invalid magic",
        "it failed while reading the model's files",
        "Check the model path and its files (config.json, the weight shards); download it "
        "again if a file is missing or truncated.",
        types=(
            "FileNotFoundError",
            "OSError",
            "EntryNotFoundError",
            "SafetensorError",
            "HFValidationError",
            "UnpicklingError",
            "EOFError",
        ),
        frames=_READS_WEIGHTS,
    ),
    _rule(
        F.CONFIG_ERROR,
        _SETTING,
        "its message names a setting, an argument or a config file",
        "Check the flag or the config entry its message names.",
        types=_REFUSALS,
    ),
    _rule(
        F.CONFIG_ERROR,
        None,
        "it was raised by a check of the arguments or the model's configuration",
        "Check the flags and the model's config.json against what the check in the traceback "
        "expects.",
        types=_REFUSALS,
        frames=_CHECKS,
    ),
)

# what each signal ends a process for (signal(7)); only the informative ones
_SIGNALS: dict[int, Cause] = {
    4: Cause(
        F.UNSUPPORTED_HARDWARE,
        "it was ended by SIGILL: an instruction this CPU does not have",
        "The build uses instructions this CPU lacks (AVX2/AVX-512 most often): use a build "
        "for this CPU, or run on one that has them.",
    ),
    9: Cause(
        F.HOST_OOM,
        "it was ended by SIGKILL, most often the kernel's OOM killer",
        "Check the kernel log (journalctl -k, dmesg) for the OOM killer; give the host (or the "
        "container) more RAM, or load the weights with less of it.",
    ),
    7: Cause(
        F.HOST_OOM,
        "it was ended by SIGBUS: a mapped file or /dev/shm ran out",
        "Give the container a larger /dev/shm (docker --shm-size) or free host memory.",
    ),
}
_SIGNAL = re.compile(r"\bsignal:? (?P<num>\d{1,2})\b|\b(?P<name>SIGILL|SIGKILL|SIGBUS)\b")
_EXIT = re.compile(r"exit(?:ed with)?(?: code|status)?:? ?\(?(?P<code>-?\d{1,3})\b")
_NAMES = {"SIGILL": 4, "SIGKILL": 9, "SIGBUS": 7}


def classify(kind: str, text: str, frames: Sequence[str] = ()) -> Cause | None:
    """The cause an error of type ``kind`` with message ``text``, raised in ``frames``
    (function names, innermost last), states; None when no rule explains it."""
    whole = f"{kind}: {text}" if kind else text
    names = frozenset(frames)
    for rule in RULES:
        if rule.types and kind not in rule.types and not (rule.frames & names):
            continue
        if rule.message is None:
            if rule.frames & names:
                return Cause(rule.failure_class, rule.why, rule.look_at)
            continue
        if rule.message.search(whole):
            return Cause(rule.failure_class, rule.why, rule.look_at)
    return None


def of_signal(text: str) -> Cause | None:
    """The cause a summary line's signal or exit code states (``signal 4``, ``exit code:
    -9``, ``exit code 137``), or None when it names none or an uninformative one."""
    m = _SIGNAL.search(text)
    if m:
        num = int(m.group("num")) if m.group("num") else _NAMES[m.group("name")]
        return _SIGNALS.get(num)
    m = _EXIT.search(text)
    if m:
        code = int(m.group("code"))
        num = -code if code < 0 else code - 128 if code > 128 else 0
        return _SIGNALS.get(num)
    return None


# the step a message or a frame names (a fragment that shows no phase line): searched in the
# message, then in the frames from the innermost out ("file function"); first match wins
_STEPS: tuple[tuple[re.Pattern[str], Phase], ...] = tuple(
    (re.compile(pattern), phase)
    for pattern, phase in (
        (
            r"(?i:cuda ?graph|cudagraph|graph captur|capture_model|capture_end)",
            Phase.CUDA_GRAPH_CAPTURE,
        ),
        (r"(?i:warm(?:ing)? ?up|sampler)", Phase.WARMUP),
        (r"(?i:kv[ _]cache)", Phase.KV_CACHE_ALLOC),
        (r"(?i:profile_run|memory profil|determine_available_memory)", Phase.MEMORY_PROFILING),
        (
            (
                r"(?i:load(?:ing)?[ _](?:the )?(?:model|weights?)|model loading|weights?\b|safetensors"
                r"|model_loader|weight_utils|create_weights|checkpoint)"
            ),
            Phase.WEIGHTS_LOADING,
        ),
        (
            (
                r"(?i:distributed|init_device|parallel_state|nccl|process group|rendezvous"
                r"|server socket|TCPStore|c10d|device ordinal)"
            ),
            Phase.DISTRIBUTED_INIT,
        ),
        (r"(?i:arg_utils|argparse|config\.json|/config/|tokenizer)", Phase.CONFIG),
    )
)

# where a failure of each class happens when nothing in a fragment says: NCCL communicators,
# the device's capability and its free memory are met at device init; the rest at their step
CLASS_PHASE: dict[FailureClass | None, Phase] = {
    F.NCCL_ERROR: Phase.DISTRIBUTED_INIT,
    F.UNSUPPORTED_HARDWARE: Phase.DISTRIBUTED_INIT,
    F.GPU_MEMORY_UTILIZATION: Phase.DISTRIBUTED_INIT,
    F.KV_CACHE_INSUFFICIENT: Phase.KV_CACHE_ALLOC,
    F.MISSING_OR_CORRUPT_WEIGHTS: Phase.WEIGHTS_LOADING,
    F.CONFIG_ERROR: Phase.CONFIG,
}


def step_of(text: str, places: Sequence[str] = ()) -> Phase | None:
    """The startup step ``text`` or, failing that, the frames (innermost first) name."""
    for where in (text, *places):
        for pattern, phase in _STEPS:
            if pattern.search(where):
                return phase
    return None
