"""What the vLLM flags of a server command after ``--`` mean for ``plan``: the ones it plans
with, the ones that cannot change a plan, and one warning line naming every other one.

A flag changes the plan when it changes what vLLM puts in GPU memory or how a decode step
runs: the layout (``-tp``, ``-pp``, ``-dp``, ``--data-parallel-size-local``,
``--enable-expert-parallel``, ``-dcp``), the weights
(``--dtype``, ``--quantization``, ``--cpu-offload-gb``), the KV cache (``--kv-cache-dtype``,
``--block-size``, ``--max-model-len``), the batch (``--max-num-seqs``,
``--max-num-batched-tokens``), the budget (``--gpu-memory-utilization``), CUDA graphs
(``--enforce-eager``, and the compilation config's capture sizes and mode: ``-cc``, ``-O``,
``--cudagraph-capture-sizes``, ``--max-cudagraph-capture-size``; ``core.vllm_compile``), the
collectives (``--disable-custom-all-reduce``, ``--nnodes``) and
speculative decoding (``--speculative-config``). The front end's
flags (host, port, API keys, chat templates, tool parsers) and the engine's naming, logging and
download flags cannot. Any other flag is named in the warning: a vLLM flag this plan does not
model, or a word that is not a flag of the vLLM version the names were read from
(``data/vllm_flags.json``), with the nearest real flag (difflib) when one is close.

>>> unplanned_warning(["--max-num-sqs", "64"], frozenset({"--max-num-seqs"}), "0.32.0")
'flags after -- not planned: --max-num-sqs (not a vLLM 0.32.0 flag; did you mean --max-num-seqs?)'
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from bringup.core.checkpoint import TensorInfo
from bringup.core.engine_args import canonical_flag
from bringup.core.vllm_compile import is_compilation_flag
from bringup.errors import UsageError

# flags plan reads from the server command (canonical long names)
PLANNED: frozenset[str] = frozenset(
    {
        "--model",
        "--revision",
        "--tensor-parallel-size",
        "--pipeline-parallel-size",
        "--data-parallel-size",
        "--data-parallel-size-local",
        "--enable-expert-parallel",
        "--decode-context-parallel-size",
        "--gpu-memory-utilization",
        "--max-model-len",
        "--max-num-seqs",
        "--max-num-batched-tokens",
        "--kv-cache-dtype",
        "--kv-cache-memory-bytes",
        "--quantization",
        "--dtype",
        "--block-size",
        "--cpu-offload-gb",
        "--enforce-eager",
        "--compilation-config",
        "--optimization-level",
        "--cudagraph-capture-sizes",
        "--max-cudagraph-capture-size",
        "--disable-custom-all-reduce",
        "--nnodes",
        "--speculative-config",
    }
)

# engine flags that cannot change memory or a decode step: names, logging, downloads, tokenizer
NO_EFFECT: frozenset[str] = frozenset(
    {
        "--served-model-name",
        "--tokenizer",
        "--tokenizer-mode",
        "--tokenizer-revision",
        "--trust-remote-code",
        "--seed",
        "--download-dir",
        "--load-format",
        "--config-format",
        "--hf-token",
        "--hf-config-path",
        "--code-revision",
        "--generation-config",
        "--max-logprobs",
        "--logprobs-mode",
        "--disable-log-stats",
        "--enable-log-requests",
        "--enable-prefix-caching",
        "--allowed-local-media-path",
        "--reasoning-parser",
        "--model-loader-extra-config",
        "--safetensors-load-strategy",
    }
)

# --dtype values vLLM takes -> the config's torch_dtype name and bytes per element
DTYPES: dict[str, tuple[str, int]] = {
    "half": ("float16", 2),
    "float16": ("float16", 2),
    "bfloat16": ("bfloat16", 2),
    "float": ("float32", 4),
    "float32": ("float32", 4),
}
_FLOAT_TENSORS = {"F16": 2, "BF16": 2, "F32": 4}
_SAFETENSORS_NAME = {"float16": "F16", "bfloat16": "BF16", "float32": "F32"}


def flag_names(argv: Sequence[str]) -> list[str]:
    """The flags of ``argv`` as written (``--x=1`` → ``--x``), in order; numbers (a negative
    value) are values, not flags."""
    out: list[str] = []
    for word in argv:
        if word == "--":
            break
        if word.startswith("-") and len(word) > 1 and not _is_number(word):
            out.append(word.split("=", 1)[0])
    return out


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def unplanned_warning(
    argv: Sequence[str],
    vllm_flags: frozenset[str],
    version: str,
    frontend: frozenset[str] = frozenset(),
) -> str | None:
    """One line naming every flag of ``argv`` plan does not plan with and that could change a
    plan (None when there is none): vLLM flags it does not model, and words that are not
    vLLM's flags at all (with a did-you-mean against ``vllm_flags``)."""
    known = {canonical_flag(f) for f in vllm_flags}
    named: list[str] = []
    for word in flag_names(argv):
        flag = canonical_flag(word)
        base = "--" + flag[5:] if flag.startswith("--no-") else flag
        if flag in PLANNED or base in PLANNED or flag in NO_EFFECT or base in NO_EFFECT:
            continue
        if is_compilation_flag(word):  # -cc, -O3, -cc.cudagraph_mode=... (vllm_compile)
            continue
        if flag in frontend or base in frontend:
            continue
        if flag in known or base in known:
            item = f"{word} (a vLLM flag this plan does not model)"
        else:
            close = difflib.get_close_matches(flag, sorted(known), n=1, cutoff=0.75)
            hint = f"; did you mean {close[0]}?" if close else ""
            item = f"{word} (not a vLLM {version} flag{hint})"
        if item not in named:
            named.append(item)
    return f"flags after -- not planned: {', '.join(named)}" if named else None


def with_dtype(
    config: Mapping[str, Any], tensors: list[TensorInfo] | None, dtype: str | None
) -> tuple[dict[str, Any], list[TensorInfo] | None]:
    """The config and tensors as vLLM loads them under ``--dtype``: the model's float type
    is ``dtype`` (activations, KV ``auto``, unquantized weights); float tensors of a
    checkpoint on disk are cast to it (quantized and integer ones are kept)."""
    if dtype is None or dtype == "auto":
        return dict(config), tensors
    if dtype not in DTYPES:
        raise UsageError(
            f"--dtype {dtype!r} is not one vLLM takes",
            hint=f"use one of: auto, {', '.join(DTYPES)}",
        )
    name, size = DTYPES[dtype]
    out = {**config, "torch_dtype": name}
    out.pop("dtype", None)
    if isinstance(config.get("text_config"), Mapping):
        text = {**config["text_config"], "torch_dtype": name}
        text.pop("dtype", None)
        out["text_config"] = text
    if tensors is None:
        return out, None
    return out, [_cast(t, name, size) for t in tensors]


def _cast(t: TensorInfo, name: str, size: int) -> TensorInfo:
    if t.dtype not in _FLOAT_TENSORS or "scale" in t.name:
        return t
    return dataclasses.replace(t, dtype=_SAFETENSORS_NAME[name], nbytes=t.n_elements * size)


@dataclasses.dataclass(frozen=True, slots=True)
class Speculative:
    """``--speculative-config``: what plan reads of it."""

    method: str
    num_speculative_tokens: int
    draft_model: str | None


def parse_speculative(text: str) -> Speculative:
    """The JSON of ``--speculative-config``; one UsageError line when it is not JSON."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"--speculative-config is not JSON: {text!r}",
            hint='e.g. --speculative-config \'{"method": "ngram", "num_speculative_tokens": 4}\'',
        ) from exc
    if not isinstance(data, dict):
        raise UsageError(f"--speculative-config must be a JSON object, got {text!r}")
    model = data.get("model")
    method = str(data.get("method") or ("draft_model" if model else "unknown"))
    return Speculative(method, int(data.get("num_speculative_tokens") or 1), model)


def speculative_warning(spec: Speculative) -> str:
    """What the plan does with speculative decoding, in one line."""
    draft = (
        f"the draft model {spec.draft_model}'s weights and KV cache are not in this plan; "
        if spec.draft_model
        else ""
    )
    return (
        f"--speculative-config {spec.method}, {spec.num_speculative_tokens} tokens: {draft}"
        "decode speed is per forward pass, and each pass can emit up to "
        f"{spec.num_speculative_tokens + 1} tokens when drafts are accepted, above the "
        "batch-1 ceiling shown"
    )


def offload_warning(cpu_offload_gb: float) -> str:
    """What ``--cpu-offload-gb`` costs, in one line."""
    return (
        f"--cpu-offload-gb {cpu_offload_gb:g}: that much of each GPU's weights stays in "
        "CPU memory and crosses PCIe in every forward pass (vLLM's UVA offload): decode "
        "runs far below the speed shown"
    )
