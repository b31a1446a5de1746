"""The vLLM settings ``bringup plan`` reads: each from bringup's own flag, else from the server
command after ``--`` (and its ``NAME=value`` words for the environment), made into the
:class:`Requested` settings and the decode setup.

``own`` is bringup's own flags by their dest (``vars(args)`` of ``plan``'s parser).

>>> requested({"max_model_len": "32k"}, ["--tensor-parallel-size", "2"], {}).max_model_len
32000
>>> requested({}, ["-tp", "2"], {}).tensor_parallel_size
2
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bringup.core import engine_args, vllm_compile, wrappers
from bringup.core.plan import decode
from bringup.core.plan.settings import Requested, env_flag, rules_version, use_v1_from_env
from bringup.errors import UsageError

# bringup's own flag -> (dest, type) for vLLM flags also read from the server command
VLLM_FLAGS: tuple[tuple[tuple[str, ...], str, type], ...] = (
    (("--tensor-parallel-size", "-tp"), "tensor_parallel_size", int),
    (("--pipeline-parallel-size", "-pp"), "pipeline_parallel_size", int),
    (("--data-parallel-size", "-dp"), "data_parallel_size", int),
    (("--data-parallel-size-local", "-dpl"), "data_parallel_size_local", int),
    (("--gpu-memory-utilization",), "gpu_memory_utilization", float),
    (("--max-model-len",), "max_model_len", str),
    (("--max-num-seqs",), "max_num_seqs", int),
    (("--max-num-batched-tokens",), "max_num_batched_tokens", int),
    (("--kv-cache-dtype",), "kv_cache_dtype", str),
    (("--quantization", "-q"), "quantization", str),
    (("--block-size",), "block_size", int),
    (("--cpu-offload-gb",), "cpu_offload_gb", float),
    (("--dtype",), "dtype", str),
    (("--speculative-config",), "speculative_config", str),
)
# read by plan itself (the weights' type, speculative decoding), not part of Requested
NOT_REQUESTED = ("dtype", "speculative_config")
# a value each number flag takes (VLLM_FLAGS', the decode flags', llama.cpp's after --), for
# the hint of one that is not a number
EXAMPLES: dict[str, str] = {
    "--tensor-parallel-size": "2",
    "--pipeline-parallel-size": "2",
    "--data-parallel-size": "2",
    "--data-parallel-size-local": "1",
    "--gpu-memory-utilization": "0.9",
    "--max-model-len": "32k",
    "--max-num-seqs": "64",
    "--max-num-batched-tokens": "8192",
    "--block-size": "16",
    "--cpu-offload-gb": "4",
    "--decode-context-parallel-size": "2",
    "--nnodes": "2",
    "--n-ctx": "4096",
    "-np": "4",
}
_KIND_WORDS: dict[type, str] = {int: "a whole number", float: "a number"}


def flag_text(own: Mapping[str, Any], flags: Sequence[str], dest: str) -> str | None:
    """A flag of :data:`VLLM_FLAGS` as text: bringup's own, else the server command's."""
    names = next(n for n, d, _ in VLLM_FLAGS if d == dest)
    value = own.get(dest)
    return str(value) if value is not None else engine_args.get_flag(flags, *names)


def requested(
    own: Mapping[str, Any], flags: Sequence[str], environ: Mapping[str, str] | None = None
) -> Requested:
    """The settings asked for: bringup's flags, the server command's, the server's
    environment (``VLLM_USE_V1``, ``VLLM_ALLOW_LONG_MAX_MODEL_LEN``)."""
    values: dict[str, Any] = {}
    for names, dest, kind in VLLM_FLAGS:
        value = own.get(dest)
        text = value if value is not None else engine_args.get_flag(flags, *names)
        if text is not None:
            values[dest] = convert(names[0], str(text), kind)
    for dest in NOT_REQUESTED:
        values.pop(dest, None)
    max_len = values.pop("max_model_len", None)
    if max_len is not None:
        values["max_model_len"] = (
            -1 if str(max_len) in ("auto", "-1") else convert("--max-model-len", max_len, int)
        )
    return Requested(
        **values,
        enable_expert_parallel=bool(
            own.get("enable_expert_parallel")
            or engine_args.has_flag(flags, "--enable-expert-parallel")
        ),
        enforce_eager=bool(
            own.get("enforce_eager") or engine_args.has_flag(flags, "--enforce-eager")
        ),
        engine_version=own.get("engine_version"),
        use_v1=use_v1_from_env((environ or {}).get("VLLM_USE_V1")),
        allow_long_max_model_len=env_flag((environ or {}).get("VLLM_ALLOW_LONG_MAX_MODEL_LEN")),
        device=own.get("device") or "cuda",
        decode_context_parallel_size=dcp(own, flags),
        compilation=vllm_compile.parse(flags),
    )


def decode_setup(own: Mapping[str, Any], flags: Sequence[str]) -> decode.DecodeSetup:
    """The decode flags (``plan``'s "decode speed" group), each engine flag also read from the
    server command's ``flags`` (``-dcp``, ``--disable-custom-all-reduce``, ``--nnodes``: vLLM's
    and SGLang's names)."""
    size = dcp(own, flags)
    disabled = own.get("disable_custom_all_reduce") or engine_args.has_flag(
        flags, "--disable-custom-all-reduce"
    )
    nnodes = own.get("nnodes")
    if nnodes is None:
        nnodes = int_flag(flags, "--nnodes")
    return decode.DecodeSetup(
        own.get("interconnect"),
        1 if size is None else size,
        own.get("context_tokens", 0),
        custom_all_reduce=not disabled,
        nnodes=1 if nnodes is None else nnodes,
        network=own.get("node_interconnect"),
    )


def dcp(own: Mapping[str, Any], flags: Sequence[str]) -> int | None:
    """``-dcp`` from the flags, else from the server command; None when neither sets it."""
    size = own.get("decode_context_parallel_size")
    if size is None:
        size = int_flag(flags, "--decode-context-parallel-size", "-dcp")
    return size


def int_flag(flags: Sequence[str], *names: str) -> int | None:
    """The whole number a server command's flag (any of ``names``) gives, None when it is not
    there; :func:`convert`'s UsageError, named by ``names[0]``, when it is not a whole number
    (digits only, as vLLM reads these flags: ``2k`` is not one).

    >>> int_flag(["--nnodes", "2"], "--nnodes")
    2
    """
    text = engine_args.get_flag(flags, *names)
    return None if text is None else convert(names[0], text, int)


def command_environment(entry: Sequence[str]) -> dict[str, str]:
    """The ``NAME=value`` words before the server's entry point (bare or after ``env``).

    >>> command_environment(["env", "VLLM_USE_V1=0", "vllm"])
    {'VLLM_USE_V1': '0'}
    """
    return dict(w.split("=", 1) for w in entry if wrappers.is_assignment(w))


def short_version(text: str) -> str:
    """``"0.11.1rc3.dev29+g3fa2c1218"`` → ``"0.11"``: the part the rules read (per minor
    version, and per patch for 0.5 and 0.6: ``settings.rules_version``).

    >>> short_version("0.11.1rc3.dev29+g3fa2c1218")
    '0.11'
    """
    return rules_version(text)


# the flags vLLM reads with ``human_readable_int`` (``vllm/engine/arg_utils.py``,
# ``human_readable_int_args`` and ``max_model_len``'s ``human_readable_int_or_auto``, 0.32.0;
# the function is ``vllm/utils/argparse_utils.py``): ``k``/``m``/``g``/``t`` are powers of
# 1000 and take decimals, ``K``/``M``/``G``/``T`` powers of 1024 and do not
HUMAN_INT_FLAGS = frozenset({"--max-model-len", "--max-num-batched-tokens"})
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kmgtKMGT])")


def convert(flag: str, text: str, kind: type) -> Any:
    """``text`` as ``kind``, read as vLLM reads that flag: the one reading of an engine
    flag's number, whether bringup's own flag or the server command's gives it; a UsageError
    that names the flag, the value and (:data:`EXAMPLES`) a value that would do. The flags of
    :data:`HUMAN_INT_FLAGS` take vLLM's suffixes (``32k`` is 32,000, ``32K`` 32,768); every
    other whole number is digits only, as vLLM's ``type=int``.

    >>> convert("--max-model-len", "32k", int), convert("--max-model-len", "32K", int)
    (32000, 32768)
    >>> convert("--max-num-batched-tokens", "2.5k", int)
    2500
    >>> convert("--max-num-seqs", "abc", int)
    Traceback (most recent call last):
    ...
    bringup.errors.UsageError: --max-num-seqs: 'abc' is not a whole number (give e.g. --max-num-seqs 64)
    """
    match = _HUMAN_INT.fullmatch(text.strip()) if flag in HUMAN_INT_FLAGS else None
    if match is not None and kind is int:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        if "." not in number:
            return int(number) * _BINARY[suffix]
        raise UsageError(
            f"{flag}: {text!r} has a decimal with a binary suffix, which vLLM refuses",
            hint=f"give e.g. {flag} {number}{suffix.lower()} (powers of 1000)",
        )
    try:
        return kind(text)
    except ValueError as exc:
        example = EXAMPLES.get(flag)
        raise UsageError(
            f"{flag}: {text!r} is not {_KIND_WORDS.get(kind, f'a {kind.__name__}')}",
            hint=f"give e.g. {flag} {example}" if example else None,
        ) from exc


def reader(flag: str, kind: type) -> Callable[[str], Any]:
    """An argparse ``type=`` for bringup's own flag ``flag``: its value read by
    :func:`convert`, so bringup's flag and the same flag after ``--`` read alike and fail
    alike. The UsageError goes past argparse (which wraps only ArgumentTypeError, TypeError
    and ValueError in its "invalid int value") to be printed as every other, one line.

    >>> reader("--max-num-batched-tokens", int)("8k")
    8000
    """

    def read(text: str) -> Any:
        return convert(flag, text, kind)

    read.__name__ = kind.__name__
    return read
