"""vLLM's command line: how it is started (entry points) and its flags (which ones are memory
knobs, their defaults, the booleans and short forms its argument parser accepts)."""

from __future__ import annotations

from types import MappingProxyType

from bringup.core.packs.types import EngineFlags, EntryPoint

ENTRY_POINTS = (
    EntryPoint(("--model",), program="vllm", subcommand="serve", positional_model=True),
    EntryPoint(("--model",), module="vllm.entrypoints.openai.api_server"),
    EntryPoint(("--model",), module="vllm.entrypoints.api_server"),
)

MAX_NUM_SEQS = "--max-num-seqs"
UTILIZATION = "--gpu-memory-utilization"
MAX_MODEL_LEN = "--max-model-len"
ENFORCE_EAGER = "--enforce-eager"

FLAGS = EngineFlags(
    memory_share=UTILIZATION,
    max_sequences=MAX_NUM_SEQS,
    eager=ENFORCE_EAGER,
    context_length=MAX_MODEL_LEN,
    defaults=MappingProxyType({MAX_NUM_SEQS: "1024", UTILIZATION: "0.9"}),
    facts=MappingProxyType(
        {
            MAX_NUM_SEQS: "max_num_seqs",
            UTILIZATION: "gpu_memory_utilization",
            MAX_MODEL_LEN: "max_model_len",
        }
    ),
    retry_safe=frozenset(
        {MAX_NUM_SEQS, UTILIZATION, MAX_MODEL_LEN, ENFORCE_EAGER, "--max-num-batched-tokens"}
    ),
    boolean=frozenset(
        {
            "--enforce-eager",
            "--enable-expert-parallel",
            "--trust-remote-code",
            "--enable-prefix-caching",
            "--no-enable-prefix-caching",
            "--enable-chunked-prefill",
            "--no-enable-chunked-prefill",
            "--disable-log-stats",
            "--disable-log-requests",
            "--enable-auto-tool-choice",
            "--headless",
            "--disable-custom-all-reduce",
            "--no-enable-log-requests",
            "--enable-lora",
        }
    ),
    # vLLM's FlexibleArgumentParser accepts these short forms
    aliases=MappingProxyType(
        {
            "-tp": "--tensor-parallel-size",
            "-pp": "--pipeline-parallel-size",
            "-dp": "--data-parallel-size",
            "-dpl": "--data-parallel-size-local",
            "-q": "--quantization",
            "-dcp": "--decode-context-parallel-size",
            "-ep": "--enable-expert-parallel",
        }
    ),
    others=frozenset(
        {
            "--model",
            "--served-model-name",
            "--host",
            "--port",
            "--dtype",
            "--kv-cache-dtype",
            "--max-num-batched-tokens",
            "--nnodes",
            "--node-rank",
            "--master-addr",
            "--master-port",
            "--distributed-timeout-seconds",
            "--swap-space",
        }
    ),
)
