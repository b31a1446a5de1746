"""The reviewable mapping from an engine's failure site to bringup's failure class.

A site is placed by the first rule of ``RULES`` whose conditions all hold: the message's text
(its literal parts, fields shown as ``…``), the exception type or log level, the file it is
in, the function. The classes are ``bringup.core.vocab.FailureClass`` values. Each rule is a
general statement about where failures come from (the resource a message names, the layer of
the engine that checks it), never one message: a rule that only one message needs is a smell.
A site no rule places has class None and counts as uncovered.

Resource and hardware words decide first (what was short), then the layer the check is in
(argument and configuration validation, the weight loader), then the exception type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """A condition on a site and the class it gives."""

    name: str
    cls: str
    text: re.Pattern[str] | None = None  # searched in the message's text
    types: frozenset[str] | None = None  # exception type or log level/macro
    path: re.Pattern[str] | None = None  # searched in the file's path
    function: re.Pattern[str] | None = None  # searched in the enclosing function's name
    not_text: re.Pattern[str] | None = None  # the rule does not apply when this occurs
    not_path: re.Pattern[str] | None = None  # nor in these files

    def applies(self, text: str, type_: str, path: str, function: str) -> bool:
        return (
            (self.not_path is None or self.not_path.search(path) is None)
            and (self.text is None or self.text.search(text) is not None)
            and (self.types is None or type_ in self.types)
            and (self.path is None or self.path.search(path) is not None)
            and (self.function is None or self.function.search(function) is not None)
            and (self.not_text is None or self.not_text.search(text) is None)
        )


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# words that make a sentence a refusal or a failure (not a description)
_NEGATIVE = (
    r"(?:not supported|unsupported|not support|does not support|doesn't support|only supported"
    r"|only support|is required|are required|requires?|not available|unavailable|cannot|can't"
    r"|could not|couldn't|unable|failed|failure|invalid|must|should|not allowed|not compatible"
    r"|incompatible|expected|not found|no such|missing|does not exist|exceed|too (?:large|small|"
    r"many|few|long|big)|greater than|larger than|less than|smaller than|at least|at most"
    r"|mismatch|not match|doesn't match|unknown|unrecognized|not recognized|error|not set"
    r"|not divisible|divisible by|mutually exclusive|conflict|deprecated and removed|no longer"
    r"|not equal|!=|cannot be used|not enabled|out of range|non-empty|not yet supported)"
)
# what a check says of a size: it is short
_CAPACITY = (
    r"(?:not enough|insufficient|no (?:available|free)|too (?:small|large|long|many)|larger than"
    r"|exceed|greater than|more than|at least|smaller than|less than|negative|zero|cannot hold"
    r"|cannot fit|does not fit|doesn't fit|out of|ran out|exhausted|is needed|are needed"
    r"|failed to find a slot)"
)
# what a check says of a setting (not "failed" or "error": those say something broke)
_REFUSAL = (
    r"(?:not supported|unsupported|does not support|only supported|is required|must|should"
    r"|not allowed|invalid|expected|exceed|too (?:large|small|many|few|long)|greater than"
    r"|larger than|less than|smaller than|at least|at most|not divisible|divisible by"
    r"|mutually exclusive|not equal|cannot be used|not enabled|out of range|not set"
    r"|does not match|doesn't match|cannot use|cannot be|is true but|are (?:both )?set|both be"
    r"|does not divide|conflicts? with)"
)
_HARDWARE = (
    r"(?:compute capability|device capability|GPU architecture|\bsm_?\d{2}|\bSM ?\d{2}\b|Volta"
    r"|Turing|Ampere|Hopper|Blackwell|hardware|\bplatform\b|Flash ?Attention|ROCm|\bHIP\b|\bXPU\b|\bTPU\b|\bHPU\b"
    r"|\bNPU\b|Gaudi|Neuron|\bMPS\b|Metal|Vulkan|\bCUDA (?:version|arch|capabilit|runtime|driver|"
    r"toolkit|device)|driver version|kernel image|FlashAttention|flash[_-]?attn|FlashInfer"
    r"|attention backend|MLA \w* ?backend|\bNVML\b|amdsmi|\bdevice type|\bPCI\b|infiniband|\bRDMA\b"
    r"|\bTriton\b|cutlass|Marlin|Machete|\bAVX|\bAMX\b|instruction set|bfloat16 is only"
    r"|(?:on|for|by) (?:this|the current|your) (?:GPU|device|hardware|platform|CPU))"
)

# the files that validate arguments and the model's configuration, per engine
_CONFIG_LAYER = _rx(
    r"(?:^|/)config(?:s)?(?:/|\.py$)|arg_utils\.py$|cli_args\.py$|server_args\.py$"
    r"|/cli\.py$|entrypoints/cli/|/arg\.cpp$|(?:^|/)envconfig/|arg_groups/"
    r"|model_config\.py$|load_config\.py$|/registry\.py$|quantization/__init__\.py$"
)
# the command-line parsers alone (a file they cannot open is a flag's value)
_ARG_PARSERS = _rx(r"/arg\.cpp$|arg_utils\.py$|cli_args\.py$|server_args\.py$|arg_groups/")

# "failed to load model: <the reason, in the message's own words>" is no summary
_REASON_GIVEN = _rx(r"failed to load (?:the )?models?: [a-z]")

RULES: tuple[Rule, ...] = (
    # -- what ran out: the resource named decides, wherever the check is --------------------
    # an allocation on the device failed, whatever it was for (the KV cache's buffer too)
    Rule(
        "allocation-failed",
        "cuda_oom",
        # reserving a buffer or a graph's compute buffers is allocating them
        text=_rx(
            r"failed to allocate|cudaMalloc|memory allocation failed"
            r"|failed to reserve (?:\w+ ){0,3}(?:buffers?|graph)"
        ),
        not_text=_rx(r"host memory|\bRAM\b|system memory|CPU (?:memory|buffer)|pinned"),
    ),
    Rule(
        "memory-exhausted",
        "cuda_oom",
        text=_rx(
            r"out.of.memory|\bOOM\b|not enough (?:GPU |device |CUDA )?memory|insufficient (?:GPU |"
            r"device )?memory|failed to allocate|cudaMalloc|memory allocation failed|unable to "
            r"allocate|cannot allocate"
        ),
        not_text=_rx(
            r"kv.?cache|cache blocks|host memory|\bRAM\b|system memory|CPU memory|max_total_tokens"
            r"|total tokens"
        ),
    ),
    Rule(
        "kv-cache-capacity",
        "kv_cache_insufficient",
        text=_rx(
            r"(?:kv.?cache|cache blocks|num_gpu_blocks|gpu blocks|blocks? (?:for|of) (?:the )?"
            r"cache|max_total_tokens|total tokens? (?:that )?can be stored|token capacity|"
            r"max(?:imum)? number of tokens that can be stored|kv pool|memory pool|n_ctx_slot"
            r"|context size).{0,80}"
            + _CAPACITY
            + r"|"
            + _CAPACITY
            + r".{0,80}(?:kv.?cache|cache blocks|num_gpu_blocks|max_total_tokens)"
            r"|no (?:available |free |)memory (?:left )?for (?:the )?(?:kv|cache)"
        ),
    ),
    Rule(
        "memory-share",
        "gpu_memory_utilization",
        text=_rx(
            r"gpu.memory.utilization|memory utilization|mem.fraction|free memory on device"
            r"|memory profiling|free (?:GPU )?memory.{0,60}(?:less|smaller|below|lower)"
            r"|available memory.{0,60}(?:less|smaller|below|lower|negative)"
        ),
    ),
    Rule(
        "host-memory",
        "host_oom",
        text=_rx(r"(?:host|system|CPU) memory.{0,60}(?:not enough|insufficient|exhausted|ran out)"),
    ),
    Rule(
        "port-taken",
        "port_in_use",
        text=_rx(
            r"address already in use|(?:\b|_)port\b.{0,40}(?:in use|already|not available|occupied|taken)"
            r"|EADDRINUSE|(?:failed|unable|couldn't|could not) (?:to )?bind|bind (?:failed|error)"
        ),
    ),
    Rule(
        "collective-communication",
        "nccl_error",
        text=_rx(
            r"\bNCCL\b|\bRCCL\b|\bHCCL\b|\bnccl\w*|custom all.?reduce|peer.to.peer|\bP2P\b"
            r"|communicator|process group|all.?reduce|\ball2all\b|\bGloo\b"
        ),
        not_text=_rx(r"requires? .{0,30}(?:install|version)|is not installed"),
        not_path=_CONFIG_LAYER,
    ),
    Rule(
        "deadline",
        "timeouts",
        text=_rx(
            r"timed? ?out|timeout|deadline exceeded|(?:did not|didn't) (?:receive|respond|reply)"
            r".{0,40}within|within (?:…|\d+) ?(?:seconds|secs|s\b|minutes|ms\b)"
        ),
    ),
    # -- more devices or nodes were asked for than the cluster gives --------------------------
    Rule(
        "resources-requested",
        "config_error",
        text=_rx(
            r"not enough resources|enough GPUs|not enough \w+ devices|only found … \w+ devices"
            r"|needs? (?:>=|at least) \S+ (?:devices|GPUs)"
            r"|exceeds the total number of available"
            r"|placement group|unique IP address|(?:number|count) of (?:GPUs|devices).{0,60}"
            + _NEGATIVE
            + r"|\bray\b.{0,40}"
            + _NEGATIVE
            + r"|"
            + _NEGATIVE
            + r".{0,40}\bray\b"
        ),
    ),
    # -- the hardware, the build or a kernel cannot do what was asked ----------------------
    Rule(
        "hardware-refusal",
        "unsupported_hardware",
        text=_rx(_HARDWARE + r".{0,120}" + _NEGATIVE + r"|" + _NEGATIVE + r".{0,120}" + _HARDWARE),
    ),
    # a call of the GPU's driver or runtime API failed or is missing (CUDA driver cu*, NVML
    # nvml*, HIP hip*, Vulkan vk*, Level Zero ze*): this device or its driver cannot be used
    Rule(
        "gpu-api-call",
        "unsupported_hardware",
        # case-sensitive: the API's prefix is lower case and its next word capitalised
        text=re.compile(r"\b(?:cu|nvml|hip|vk|ze)[A-Z]\w* (?:failed|unavailable|error|returned)"),
    ),
    Rule(
        "no-device",
        "unsupported_hardware",
        text=_rx(
            r"no (?:CUDA |GPU |HIP |ROCm )?(?:GPUs?|devices?|accelerators?) (?:found|available|"
            r"detected)|(?:CUDA|GPU|device) is not available|failed to infer device"
            r"|no CUDA-capable device|no usable GPU|no \w+ backend found|no backends are loaded"
            r"|runtime (?:DLL|library) (?:not )?found|no (?:host )?\S+ runtime|no suitable buffer type"
            r"|device … not found"
        ),
    ),
    Rule(
        "remote-code",
        "config_error",
        text=_rx(r"trust.remote.code|custom code"),
    ),
    # -- the checkpoint: files absent, unreadable, or not what the architecture expects ----
    # "failed to load model" with no reason of its own sums up the loader's line before it
    Rule(
        "load-summary",
        "engine_core_died",
        text=_rx(r"failed to load (?:the )?models?\b"),
        not_text=_REASON_GIVEN,
    ),
    # a quantization check: the method asked for and the checkpoint's do not agree (a flag)
    Rule(
        "quantization-setting",
        "config_error",
        function=_rx(r"quant"),
        not_text=_rx(r"not supported on|capability|GPU|device|hardware|platform"),
    ),
    Rule(
        "checkpoint-files",
        "missing_or_corrupt_weights",
        text=_rx(
            r"(?:weights?|checkpoint|safetensors|\.bin\b|\.pt\b|\.gguf|gguf|shards?|state.?dict"
            r"|model files?|tensor|config\.json|tokenizer (?:file|model)|tokenizer\.json|"
            r"\.index\.json|vocab|magic|header|file|model (?:path|directory|folder)|repo(?:sitory)?"
            r"|revision).{0,100}(?:not found|missing|no such|does not exist|doesn't exist|"
            r"could not (?:be )?(?:find|found|load|read|open)|cannot (?:find|load|read|open)|"
            r"failed to (?:load|read|open|find|download|mmap)|corrupt|truncated|invalid|"
            r"unexpected|mismatch|not (?:fully|a valid)|unable to (?:load|read|open|find)|"
            r"incomplete|unknown|not initialized|unsupported)"
            r"|(?:cannot|could not|couldn't|failed to|unable to) (?:find|load|read|open|download|"
            r"mmap|locate).{0,60}(?:weights?|checkpoint|safetensors|shards?|files?|model|gguf|"
            r"tensor|vocab|tokenizer)"
            r"|(?:invalid|unknown|no such|not found|no supported).{0,60}(?:repository|repo id"
            r"|local directory|config format|model path)|error loading (?:model|vocab|tensor|weights)"
            r"|invalid (?:magic|header|split file|gguf|tensor|checkpoint|weights?|model file)"
            r"|\b(?:read|load|fetch) (?:\w+ ){0,2}metadata|\bkey\b.{0,40}must be of type|no projector tensors|missing model metadata|out of array bounds"
            r"|incompatible with your version|no longer compatible|illegal split|pre-tokenizer"
            r"|list of splits|file is NULL|LoRA|adapter"
        ),
        not_path=_ARG_PARSERS,
    ),
    Rule(
        "loader-layer",
        "missing_or_corrupt_weights",
        path=_rx(
            r"model_loader/|model-loader|weight_utils|/weights\.py$|utils/hub\.py$|gguf\.cpp$|fs/ggml/"
            r"|llama-model-loader|/hub\.py$|llama-vocab|llama-adapter"
        ),
        not_text=_rx(
            r"not supported|unsupported|does not support|only supported|--|quantization|"
            r"must be|should be|is required|tensor.?parallel|pipeline|^\W*invalid|backend"
            r"|expected (?:one of|names)|configuration"
        ),
    ),
    # -- the arguments or the model's configuration ------------------------------------------
    Rule(
        "argument-or-config-layer",
        "config_error",
        path=_CONFIG_LAYER,
        types=frozenset(
            {
                "ValueError",
                "TypeError",
                "KeyError",
                "NotImplementedError",
                "AssertionError",
                "ArgumentTypeError",
                "ArgumentError",
                "RuntimeError",
                "Exception",
                "ImportError",
                "AttributeError",
                "error",
                "warning",
                "exception",
                "panic",
                "bail",
                "anyhow",
                "thiserror",
                "err",
                "expect",
                "errorf",
                "errors.New",
                "throw",
                "LOG_ERR",
            }
        ),
    ),
    # -- a process of the engine died, or its start failed: a consequence (a summary) ------
    Rule(
        "process-died",
        "engine_core_died",
        text=_rx(
            r"died|failed to start|initiali[sz]ation failed|unexpectedly|crashed|is dead|"
            r"terminated|exited|shut(?:ting)? down|shard \S* failed|webserver crashed|"
            r"failed during .{0,30}initiali[sz]ation|health check failed|not (?:alive|running)"
            r"|killed|signal|fatal error|^\W*\w+ failed\.?$|worker failed with error|hit an exception"
            r"|failed to initiali[sz]e|(?:have|has) not started|did not start|failed to launch"
            r"|errored|background loop|task failed|exception in worker|error executing method"
            r"|no longer running|error starting|unable to (?:connect|warm ?up|get|clear) .{0,30}shards?"
            r"|error when initiali[sz]ing|failed to spawn|failed to load (?:the )?models?\b(?!: [a-z])"
            r"|cannot start|couldn't start|startup failed|disconnected|standard error output"
            r"|not responding|encountered an error|error loading llama server|\w+ failed: …$"
            r"|webserver (?:error|failed)|failed to create[_ ]context"
        ),
    ),
    Rule(
        "stated-setting",
        "config_error",
        text=_rx(
            r"--[a-z][\w-]+|\b[a-z]+_[a-z_]+\b.{0,60}"
            + _REFUSAL
            + r"|"
            + _REFUSAL
            + r".{0,60}\b[a-z]+_[a-z_]+\b|not supported (?:with|for|when|in|by|yet)"
            r"|is not supported|are not supported|does not support|doesn't support|only supports?"
            r"|please (?:set|use|specify|pass|provide|install|upgrade)|must be (?:set|one of|"
            r"specified|provided|enabled|disabled|a |an |positive|non-negative|greater|less|"
            r"divisible|between|in )|mutually exclusive|is required|unknown (?:model|architecture|"
            r"quantization|dtype|backend|method|format|type)|(?:architecture|model type)s?.{0,60}"
            r"not (?:supported|recognized)|requires? .{0,40}(?:installed|version|>=|to be installed)"
            r"|is not installed|install .{0,40}(?:with|via|using) pip|pip install|requires installation"
            r"|not specified|cannot be used with|cannot use .{0,60}(?:mode|with)|cho+se from|^\W*invalid\b"
            r"|unable to .{0,40}because|unsupported (?:model )?architecture|argument validation"
            r"|not found in PATH|binary not found|compiled without|please (?:define|choose|remove|unset)"
            r"|not implemented for|requires? .{0,40}to be set|cannot both be|was requested, but|unsupported \w+ (?:config|method|format|type|dtype"
            r"|mode|backend)|unknown \w+ (?:\w+ )?(?:backend|method|mode)|environment variable|\bVLLM_[A-Z_]+|\bSGLANG_[A-Z_]+|\bOLLAMA_[A-Z_]+"
            r"|(?:cannot|could not|failed to|unable to) (?:find|create|open|access) .{0,30}directory"
            r"|not a directory|\bpath\b.{0,30}(?:not found|does not exist)"
            r"|(?:cannot|could not|failed to|unable to) parse .{0,40}(?:config|configuration|template)"
            r"|template (?:parsing )?error|\bis set to\b.{0,80}\bbut\b|please make them match"
            r"|(?:has|have) been deprecated in favou?r of|\boverride\b.{0,60}(?:unsupported|not supported|invalid)"
            r"|unsupported attempt to override"
            r"|\bunknown [a-z]+_[a-z_]+\b"
            r"|(?:could not|cannot|unable to) determine (?:the )?(?:model type|architecture)"
        ),
    ),
    # -- what the platform layer refuses is what this device or its libraries cannot do -----
    Rule(
        "platform-layer",
        "unsupported_hardware",
        path=_rx(r"(?:^|/)platforms/|(?:^|/)discover/|ggml-cuda|ggml-backend"),
    ),
    # -- the exception type alone -------------------------------------------------------------
    Rule(
        "unimplemented-combination",
        "config_error",
        types=frozenset({"NotImplementedError"}),
    ),
)


def classify(text: str, type_: str, path: str, function: str) -> tuple[str | None, str | None]:
    """(class, the rule's name) for one site; (None, None) when no rule places it."""
    for rule in RULES:
        if rule.applies(text, type_, path, function):
            return rule.cls, rule.name
    return None, None


# The phase a site's failure is in, by the layer it is in (the analyzer never puts a failure
# before the phase the log already reached; None: the traceback's frames or the log decide).
PHASES: tuple[tuple[re.Pattern[str], str], ...] = (
    (_rx(r"kv_cache_utils|block_manager|memory_pool|llama-kv-cache"), "kv_cache_alloc"),
    (
        _rx(
            r"model_loader|weight_utils|/weights\.py$|/hub\.py$|llama-model-loader|gguf\.cpp$"
            r"|fs/ggml/"
        ),
        "weights_loading",
    ),
    (_rx(r"(?:^|/)distributed/|parallel_state"), "distributed_init"),
    (
        _rx(
            r"arg_utils|cli_args|(?:^|/)configs?(?:/|\.py$)|transformers_utils/|tokenizers?/"
            r"|models/registry\.py$|quantization/__init__\.py$|server_args\.py$|arg_groups/"
            r"|/arg\.cpp$|(?:^|/)envconfig/|entrypoints/cli/|launcher/src/"
        ),
        "config",
    ),
)
# a class whose check has one place in the startup, wherever the code is (a configuration
# check is the config phase's; a log already past it keeps its later phase, as for any site)
CLASS_PHASES = {"kv_cache_insufficient": "kv_cache_alloc", "config_error": "config"}


def phase_of(cls: str | None, path: str) -> str | None:
    """The phase of a site's failure (see ``PHASES``)."""
    if cls in CLASS_PHASES:
        return CLASS_PHASES[cls]
    for rx, phase in PHASES:
        if rx.search(path):
            return phase
    return None
