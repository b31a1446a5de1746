"""Checkpoint values and the pure checks that turn what was read from disk into findings.

The adapter (``bringup.adapters.checkpoint``) lists files, reads safetensors headers, GGUF
tensor tables and ``config.json``; everything here works on those values and never touches
a file. A finding is a :class:`Problem`: a kind from :data:`PROBLEM_KINDS`, the file it is
about, what is wrong, and one sentence saying what to do.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bringup.core.printable import printable
from bringup.errors import InputError

PROBLEM_KINDS: tuple[str, ...] = (
    "missing_shard",  # a file the index, manifest or split set names is not there
    "unreferenced_file",  # a weight file the index does not name
    "truncated",  # shorter than its header says (including empty files)
    "header_invalid",  # the safetensors header (or the index) is not valid JSON of the right shape
    "header_too_large",  # the 8-byte header length is absurd; refused before allocating
    "lfs_pointer",  # a git-lfs pointer text file instead of the weights
    "offsets_invalid",  # tensor byte spans wrong size, overlapping, gapped or out of the file
    "dtype_unknown",  # a dtype (GGUF: tensor type) the format does not define
    "duplicate_tensor",  # one tensor name in two shards
    "index_tensor_missing",  # the index maps a tensor to a shard whose header lacks it
    "hash_mismatch",  # sha256 differs from the HF cache blob name or the manifest
    "config_missing",  # config.json (or the tokenizer) is absent
    "config_invalid",  # config.json does not parse, or names no architecture
    "quantization_mismatch",  # quantization_config disagrees with the tensors
    "gguf_invalid",  # a GGUF file does not parse, or its tensor data runs past the end
    "split_missing",  # a part of a split GGUF is absent
    "bad_magic",  # a GGUF file that does not start with the GGUF magic
    "config_mismatch",  # config.json disagrees with the tensors (layers, sizes, heads, experts)
    "architecture_unknown",  # config.json names an architecture vLLM's registry does not list
    "shard_of_set",  # one shard of a set given alone
    "interrupted_download",  # a Hugging Face cache blob left *.incomplete
)

INDEX_NAME = "model.safetensors.index.json"
TOKENIZER_FILES: tuple[str, ...] = (
    "tokenizer.json",
    "tokenizer.model",
    "tiktoken.model",
    "tekken.json",
    "vocab.json",
    "qwen.tiktoken",
)


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding about a checkpoint: what kind, which file, what is wrong, what to do."""

    kind: str  # one of PROBLEM_KINDS
    file: str  # relative to the checkpoint root ("" when it is about the whole checkpoint)
    detail: str  # what is wrong, with the numbers
    fix: str  # one sentence: the concrete thing to do


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One tensor as its file's header describes it (no data is read)."""

    name: str
    dtype: (
        str  # safetensors dtype ("BF16", "F8_E4M3", "I32", ...) or GGUF type name ("Q4_K", "F16")
    )
    shape: tuple[int, ...]
    nbytes: int
    file: str  # file name relative to the checkpoint root

    @property
    def n_elements(self) -> int:
        """Number of (logical) elements: the product of the shape."""
        count = 1
        for dim in self.shape:
            count *= dim
        return count


@dataclass(frozen=True)
class Checkpoint:
    """What a scan found: weight files, their tensors, config and any problems seen reading them.

    ``problems`` holds every header-level finding (everything but ``--hash``); a consumer that
    only needs tensors (the memory planner) may ignore it, ``bringup verify`` reports it.
    """

    root: str  # resolved folder (or the file itself for a single file)
    format: str  # "safetensors" | "gguf"
    files: tuple[str, ...]  # weight files, relative names
    tensors: tuple[TensorInfo, ...]
    config: dict[str, Any] | None  # config.json parsed; None if absent or invalid
    gguf_metadata: dict[str, Any] | None  # GGUF key/values (no big arrays); None for safetensors
    problems: tuple[Problem, ...] = ()
    file_sizes: Mapping[str, int] = field(default_factory=dict)  # weight file -> bytes on disk
    layouts: tuple[str, ...] = ()  # layouts engines accept that were recognised (not problems)

    @property
    def parameters(self) -> int:
        """Total number of stored elements over all tensors."""
        return sum(t.n_elements for t in self.tensors)

    @property
    def bytes_by_dtype(self) -> dict[str, int]:
        """Bytes of tensor data per dtype, largest first."""
        totals: dict[str, int] = {}
        for t in self.tensors:
            totals[t.dtype] = totals.get(t.dtype, 0) + t.nbytes
        return dict(sorted(totals.items(), key=lambda kv: (-kv[1], kv[0])))


def format_size(n_bytes: int) -> str:
    """Decimal size as people say it about downloads: ``'4.29 GB'``, ``'512 B'``."""
    value = float(n_bytes)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{n_bytes} B" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def fetch_again(file: str, why: str) -> str:
    """The standard fix for a damaged file: fetch it again, saying why."""
    return f"fetch {file} again: {why}"


STOPPED = "the download stopped before the end of the file"


def hf_download(repo_id: str, include: str | None = None, cache_dir: str | None = None) -> str:
    """``hf download ORG/NAME --include FILE [--cache-dir DIR]``, quoted for a shell."""
    words = ["hf", "download", repo_id]
    words += ["--include", include] if include else []
    words += ["--cache-dir", cache_dir] if cache_dir else []
    return shlex.join(words)


def with_download_commands(
    problems: Sequence[Problem], repo_id: str | None, cache_dir: str | None = None
) -> tuple[Problem, ...]:
    """Each "fetch X again" fix as the exact ``hf download`` command, when the repo is known
    (a Hugging Face cache folder ``models--ORG--NAME`` says it)."""
    if repo_id is None:
        return tuple(problems)
    out = []
    for p in problems:
        m = _FETCH.match(p.fix)
        if m is not None:
            command = hf_download(repo_id, m["file"], cache_dir)
            why = f" ({m['why']})" if m["why"] else ""
            p = Problem(p.kind, p.file, p.detail, f"download it again{why}: `{command}`")
        out.append(p)
    return tuple(out)


_FETCH = re.compile(r"^fetch (?P<file>\S+) again(?:: (?P<why>.*))?$", re.DOTALL)


def repo_id_of(path: str) -> tuple[str, str] | None:
    """(``ORG/NAME``, the hub folder) for a path inside ``.../models--ORG--NAME/``."""
    parts = path.split("/")
    for i, part in enumerate(parts):
        if part.startswith("models--") and len(part) > len("models--"):
            return part[len("models--") :].replace("--", "/", 1), "/".join(parts[:i]) or "/"
    return None


# ---------------------------------------------------------------- index and shards


def parse_index(text: str, file: str = INDEX_NAME) -> tuple[dict[str, str] | None, Problem | None]:
    """Parse ``model.safetensors.index.json`` into its ``weight_map`` (tensor -> shard)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return None, _bad_index(file, f"it is not valid JSON ({exc})")
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()
    ):
        return None, _bad_index(file, "it has no weight_map object of tensor name -> file name")
    return dict(weight_map), None


def _bad_index(file: str, why: str) -> Problem:
    return Problem(
        "header_invalid",
        file,
        f"the index cannot be used: {why}",
        fetch_again(file, "the index says which shard holds each tensor"),
    )


def check_index(
    weight_map: Mapping[str, str],
    present: Iterable[str],
    tensor_names_by_file: Mapping[str, Iterable[str]],
    index_file: str = INDEX_NAME,
) -> list[Problem]:
    """Cross-check the index with the shards on disk and their headers.

    ``present`` are the weight files on disk; ``tensor_names_by_file`` holds the tensors of
    every shard whose header could be read (unreadable shards are reported elsewhere).
    """
    present_set = set(present)
    named = sorted(set(weight_map.values()))
    problems = [
        Problem(
            "missing_shard",
            shard,
            f"{index_file} maps {_count(weight_map, shard)} tensors to it, but it is not on disk",
            fetch_again(shard, "the index names it and the engine will stop when it is not found"),
        )
        for shard in named
        if shard not in present_set
    ]
    problems += [
        Problem(
            "unreferenced_file",
            f,
            f"{index_file} does not name it",
            f"remove {f} or move it out of the folder: engines that load every *.safetensors "
            "file would load it too",
        )
        for f in sorted(present_set - set(named))
    ]
    headers = {f: set(names) for f, names in tensor_names_by_file.items()}
    missing: dict[str, list[str]] = {}
    for tensor, shard in weight_map.items():
        if shard in headers and tensor not in headers[shard]:
            missing.setdefault(shard, []).append(tensor)
    problems += [
        Problem(
            "index_tensor_missing",
            shard,
            f"{index_file} maps {len(names)} tensors to it that its header lacks: {_few(names)}",
            fetch_again(shard, "its header does not match the index (a different revision?)"),
        )
        for shard, names in sorted(missing.items())
    ]
    return problems


def check_duplicates(tensors: Sequence[TensorInfo]) -> list[Problem]:
    """A tensor name found in more than one file."""
    seen: dict[str, str] = {}
    problems: list[Problem] = []
    for t in tensors:
        first = seen.setdefault(t.name, t.file)
        if first != t.file:
            problems.append(
                Problem(
                    "duplicate_tensor",
                    t.file,
                    f"tensor {t.name} is also in {first}",
                    f"remove the stale copy: keep the shard the index names for {t.name} and fetch "
                    "the other one again",
                )
            )
    return problems


def _count(weight_map: Mapping[str, str], shard: str) -> int:
    return sum(1 for v in weight_map.values() if v == shard)


def _few(names: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(sorted(names)[:limit])
    return shown if len(names) <= limit else f"{shown} and {len(names) - limit} more"


# ---------------------------------------------------------------- config and tokenizer


def parse_config(text: str | None) -> tuple[dict[str, Any] | None, list[Problem]]:
    """Parse ``config.json`` text (None when the file is absent) and check it names an architecture."""
    if text is None:
        return None, [
            Problem(
                "config_missing",
                "config.json",
                "there is no config.json",
                "fetch config.json from the model repository: engines read the "
                "architecture and sizes from it",
            )
        ]
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return None, [_bad_config(f"it is not valid JSON ({exc})")]
    if not isinstance(data, dict):
        return None, [_bad_config("it is not a JSON object")]
    archs = data.get("architectures")
    if not (isinstance(archs, list) and archs and all(isinstance(a, str) for a in archs)):
        return data, [_bad_config('it names no architecture ("architectures" is missing or empty)')]
    return data, []


def _bad_config(why: str) -> Problem:
    return Problem(
        "config_invalid",
        "config.json",
        f"config.json cannot be used: {why}",
        fetch_again("config.json", "engines read the architecture and sizes from it"),
    )


def check_tokenizer(names: Iterable[str]) -> list[Problem]:
    """Tokenizer files present (any of the usual ones)."""
    if set(names) & set(TOKENIZER_FILES):
        return []
    return [
        Problem(
            "config_missing",
            "tokenizer.json",
            f"no tokenizer file ({', '.join(TOKENIZER_FILES)})",
            "fetch tokenizer.json and tokenizer_config.json from the model repository, "
            "or point the engine at a tokenizer with --tokenizer",
        )
    ]


# ---------------------------------------------------------------- quantization

_FP8 = frozenset({"F8_E4M3", "F8_E5M2"})


@dataclass(frozen=True, slots=True)
class _Expect:
    """What a quantization method's checkpoint must contain, as (description, predicate) pairs."""

    label: str
    needs: tuple[tuple[str, str, frozenset[str]], ...]  # (what, name suffix, dtypes; empty = any)


_EXPECT: dict[str, _Expect] = {
    "fp8": _Expect(
        "FP8", (("F8_E4M3 weights", "weight", _FP8), ("scale tensors", "scale", frozenset()))
    ),
    "awq": _Expect(
        "AWQ",
        (
            ("packed int32 qweight tensors", "qweight", frozenset({"I32"})),
            ("scales tensors", "scales", frozenset()),
            ("qzeros tensors", "qzeros", frozenset({"I32"})),
        ),
    ),
    "gptq": _Expect(
        "GPTQ",
        (
            ("packed int32 qweight tensors", "qweight", frozenset({"I32"})),
            ("scales tensors", "scales", frozenset()),
            ("qzeros tensors", "qzeros", frozenset({"I32"})),
        ),
    ),
    "float-quantized": _Expect(
        "compressed-tensors FP8",
        (
            ("F8_E4M3 weights", "weight", _FP8),
            ("weight_scale tensors", "weight_scale", frozenset()),
        ),
    ),
    "pack-quantized": _Expect(
        "compressed-tensors packed int",
        (
            ("packed int32 weight_packed tensors", "weight_packed", frozenset({"I32"})),
            ("weight_scale tensors", "weight_scale", frozenset()),
        ),
    ),
}


def check_quantization(
    config: Mapping[str, Any] | None, tensors: Sequence[TensorInfo]
) -> list[Problem]:
    """``quantization_config`` consistent with the tensors, in both directions."""
    if config is None or not tensors:
        return []
    quant = config.get("quantization_config")
    if not isinstance(quant, dict):
        return _unannounced_quantization(tensors)
    method = str(quant.get("quant_method", "")).lower()
    if method == "compressed-tensors":
        method = str(quant.get("format", "")).lower()
    expect = _EXPECT.get(method)
    if expect is None:
        return []
    missing = [what for what, suffix, dtypes in expect.needs if not _has(tensors, suffix, dtypes)]
    if not missing:
        return []
    return [
        Problem(
            "quantization_mismatch",
            "config.json",
            f"config.json says {expect.label} (quant_method {quant.get('quant_method')!r}) but the "
            f"tensors have no {' and no '.join(missing)}",
            "fetch the checkpoint of the quantized model again, or fix quantization_config in "
            "config.json to match the weights on disk",
        )
    ]


def _unannounced_quantization(tensors: Sequence[TensorInfo]) -> list[Problem]:
    fp8 = [t for t in tensors if t.dtype in _FP8]
    packed = [t for t in tensors if t.name.endswith("qweight") and t.dtype == "I32"]
    if not fp8 and not packed:
        return []
    what = f"{len(fp8)} FP8 tensors" if fp8 else f"{len(packed)} packed int32 qweight tensors"
    return [
        Problem(
            "quantization_mismatch",
            "config.json",
            f"the checkpoint holds {what} (e.g. {(fp8 or packed)[0].name}) but config.json has no "
            "quantization_config",
            "fetch config.json of the quantized model again: without quantization_config engines "
            "read the quantized weights as plain ones",
        )
    ]


def _has(tensors: Sequence[TensorInfo], suffix: str, dtypes: frozenset[str]) -> bool:
    return any(
        t.name.removesuffix("_inv").endswith(suffix) and (not dtypes or t.dtype in dtypes)
        for t in tensors
    )


# ---------------------------------------------------------------- hashes and the report


@dataclass(frozen=True, slots=True)
class Expected:
    """A published digest to compare with: its algorithm and where it came from."""

    algorithm: str  # "sha256" | "git-sha1"
    hexdigest: str
    source: str  # "the cache blob name" | "the manifest"


@dataclass(frozen=True, slots=True)
class Digest:
    """What hashing one file produced."""

    sha256: str
    git_sha1: str | None  # only when asked for (cache blobs named by a git sha1)
    n_bytes: int


def check_hashes(expected: Mapping[str, Expected], digests: Mapping[str, Digest]) -> list[Problem]:
    """Compare digests with the published ones; a file that was expected but not hashed is missing."""
    problems: list[Problem] = []
    for name, want in sorted(expected.items()):
        got = digests.get(name)
        if got is None:
            problems.append(
                Problem(
                    "missing_shard",
                    name,
                    f"{want.source} lists it, but it is not on disk",
                    fetch_again(name, f"{want.source} lists it"),
                )
            )
            continue
        actual = got.sha256 if want.algorithm == "sha256" else got.git_sha1
        if actual is not None and actual != want.hexdigest:
            problems.append(
                Problem(
                    "hash_mismatch",
                    name,
                    f"{want.algorithm} is {actual[:16]}..., {want.source} says {want.hexdigest[:16]}...",
                    fetch_again(
                        name,
                        f"its contents differ from what was published ({format_size(got.n_bytes)} read)",
                    ),
                )
            )
    return problems


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """The ``bringup verify --json`` document, field for field."""

    ok: bool
    format: str
    files: int
    tensors: int
    parameters: int
    bytes_by_dtype: dict[str, int]
    problems: tuple[Problem, ...]
    layouts: tuple[str, ...] = ()  # recognised layouts the engines accept, one line each


def build_report(checkpoint: Checkpoint, extra: Sequence[Problem] = ()) -> VerifyReport:
    """The verdict: totals of the checkpoint and all problems (header-level plus ``extra``)."""
    seen = {(p.kind, p.file) for p in checkpoint.problems}
    problems = tuple(checkpoint.problems) + tuple(p for p in extra if (p.kind, p.file) not in seen)
    return VerifyReport(
        ok=not problems,
        format=checkpoint.format,
        files=len(checkpoint.files),
        tensors=len(checkpoint.tensors),
        parameters=checkpoint.parameters,
        bytes_by_dtype=checkpoint.bytes_by_dtype,
        problems=problems,
        layouts=checkpoint.layouts,
    )


# problems (PROBLEM_KINDS) that leave tensors out of the scan: a plan of what is left would be
# a plan of a smaller model
INCOMPLETE: tuple[str, ...] = (
    "missing_shard",
    "truncated",
    "header_invalid",
    "header_too_large",
    "lfs_pointer",
    "index_tensor_missing",
)


def refuse_incomplete(name: str, problems: Sequence[Problem]) -> None:
    """InputError naming the first problem that leaves weights out, if any (``plan`` of
    ``name`` without ``--force``)."""
    found = [p for p in problems if p.kind in INCOMPLETE]
    if not found:
        return
    first = found[0]
    more = f" and {len(found) - 1} more" if len(found) > 1 else ""
    where = f"{first.file}: " if first.file else ""
    raise InputError(
        f"{printable(name)}: the checkpoint is incomplete ({first.kind}: {where}{first.detail}"
        f"{more}); its plan would be a smaller model's",
        hint=f"{first.fix} (bringup verify {printable(name)} lists them), or add --force to "
        "plan the tensors that are there",
    )
