"""What a vLLM command line tells the startup prediction about torch.compile and the CUDA-graph
capture, read as vLLM reads it (the versions named are the wheels' own code).

**Where the compilation config comes from.** ``--compilation-config``/``-cc`` with JSON, the
dotted form (``-cc.compile_sizes=[1,2]``, ``--compilation-config.mode=3``, and up to 0.11
``-O.key=value``, which 0.12 still turns into ``-cc.``), and up to 0.11 ``-O`` with JSON
(``vllm/utils/__init__.py::FlexibleArgumentParser``, 0.11.0). ``-O N``/``-ON``/``-O=N`` is the
compilation *level* up to 0.11 (``-O.level=N``) and the *optimization level* from 0.12
(``--optimization-level N``, ``vllm/utils/argparse_utils.py``, 0.12.0 and 0.32.0).

**What each setting does to the startup** (:func:`resolve`):

- ``mode``/``level`` 0 (``NONE``) and optimization level 0: no torch.compile, no capture
  (``OPTIMIZATION_LEVEL_00``: ``cudagraph_mode`` NONE, ``vllm/config/vllm.py``, 0.12.0);
- ``mode``/``level`` 1 or 2 (torch.compile's own backend, one Dynamo trace): a compile without
  vLLM's piecewise backend or its cache, and no capture (``cudagraph_mode`` NONE unless the
  mode is 3: ``vllm/config/__init__.py::VllmConfig.__post_init__``, 0.11.0; "Cudagraph mode
  ... is not compatible with compilation mode", 0.12.0);
- optimization level 1 (0.12 on): the compile, and PIECEWISE capture only; 2 and 3 the
  compile and FULL_AND_PIECEWISE (``OPTIMIZATION_LEVEL_01``..``_03``, 0.12.0 to 0.32.0). Up
  to 0.11, ``-O1``/``-O2`` are compilation levels 1 and 2 (above);
- ``compile_sizes``: each size is one more Inductor compile of every piecewise subgraph
  (``PiecewiseBackend``: the general shape first, then each size at its first run,
  ``vllm/compilation/cuda_piecewise_backend.py``, 0.11.0; sizes compiled before the capture
  in ``gpu_worker.compile_or_warm_up_model``); ``"cudagraph_capture_sizes"`` in the list
  stands for every captured size, and repeated sizes count once (``set``,
  ``CompilationConfig.post_init_cudagraph_sizes``, 0.32.0);
- compile ranges (0.13 on): the split points ``compile_ranges_split_points`` (0.13 to 0.17;
  ``compile_ranges_endpoints`` in 0.32) below ``max_num_batched_tokens`` cut
  ``[1, max_num_batched_tokens]`` into ranges, each an Inductor compile of every piece
  (``VllmConfig._set_compile_ranges``, ``CompilationConfig.get_compile_ranges``, 0.13.0); a
  compile size is a range of its own. Every range and size is compiled during the startup
  ("For each compile_range ... add the end of the range to ensure compilation/warmup",
  ``compile_or_warm_up_model``, 0.13.0). Not counted: the split point the flashinfer
  allreduce+RMSNorm fusion adds with ``pass_config.fuse_allreduce_rms`` (it depends on the
  GPU's compute capability);
- ``cudagraph_mode`` NONE: no capture; ``cudagraph_capture_sizes`` (or
  ``--cudagraph-capture-sizes``, and ``--cuda-graph-sizes`` with several values in 0.10 and
  0.11): exactly those sizes; ``max_cudagraph_capture_size`` (``--max-cudagraph-capture-size``,
  0.12 on; one ``--cuda-graph-sizes`` value in 0.10 and 0.11): vLLM's ladder up to it.

**Which Inductor adaptor compiles** (:func:`inductor_adaptor`): ``InductorStandaloneAdaptor``
(``torch._inductor.standalone_compile``) when ``VLLM_USE_STANDALONE_COMPILE`` is on and torch
is 2.8 or newer (``make_compiler``, ``vllm/compilation/backends.py``, 0.9.2 to 0.32.0), else the
legacy ``InductorAdaptor``, which turns torch's AOTAutograd cache off ("InductorAdaptor
(unfortunately) requires AOTAutogradCache to be turned off", ``compiler_interface.py``, 0.10.0
to 0.32.0), so every piece is traced by AOTAutograd again even where identical layers share
Inductor's compiled graph. The variable's default is "1" in 0.9.2 to 0.10.2 and from 0.11.1
but "0" in 0.11.0 (``vllm/envs.py``); the wheels pin torch 2.7.x up to 0.10.1.1 and 2.8.0
from 0.10.2. So the standalone adaptor is the default in 0.10.2 and from 0.11.1 on.

Pure: flags and versions in, facts out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bringup.core import engine_args

_CONFIG_FLAGS = ("--compilation-config", "-cc")
_DOTTED = ("-cc.", "--compilation-config.", "--compilation_config.", "-O.")
_MODE_NAMES = {
    "NONE": 0,
    "NO_COMPILATION": 0,
    "STOCK_TORCH_COMPILE": 1,
    "DYNAMO_AS_IS": 1,
    "DYNAMO_TRACE_ONCE": 2,
    "DYNAMO_ONCE": 2,
    "VLLM_COMPILE": 3,
    "PIECEWISE": 3,
}
_GRAPH_MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")


@dataclass(frozen=True, slots=True)
class CompileConfig:
    """The compile and capture settings a command line gives (None: left to vLLM)."""

    mode: int | None = None  # compilation mode/level from the config (0-3)
    level: int | None = None  # -O N / --optimization-level N
    compile_sizes: tuple[int | str, ...] = ()
    split_points: tuple[int, ...] = ()  # compile_ranges_split_points / _endpoints
    cudagraph_mode: str | None = None  # NONE, PIECEWISE, FULL, FULL_DECODE_ONLY, ...
    capture_sizes: tuple[int, ...] | None = None  # an explicit list
    max_capture_size: int | None = None


@dataclass(frozen=True, slots=True)
class CompilePlan:
    """What the startup will do, for one vLLM version."""

    compiles: bool  # torch.compile runs
    piecewise: bool  # through vLLM's piecewise backend and its compile cache (mode 3)
    inductor_compiles: int  # Inductor compiles of every piece: ranges + extra sizes
    captures: bool  # CUDA graphs are captured
    capture_sizes: int | None  # the captured sizes the flags fix (None: vLLM's default)
    note: str  # what the flags change in the compile, for its basis ("" when nothing)
    capture_note: str = ""  # what they change in the capture, for its basis


def parse(flags: Sequence[str]) -> CompileConfig:
    """The compilation settings in ``flags`` (the engine flags after ``--``)."""
    config: dict[str, Any] = {}
    for text in _config_texts(flags):
        value = _json(text)
        if isinstance(value, dict):
            config.update(value)
        elif isinstance(value, int) and not isinstance(value, bool):
            config["mode"] = value  # --compilation-config 3: the level, as vLLM reads it
    for word in flags:
        for prefix in _DOTTED:
            if word.startswith(prefix) and "=" in word:
                key, text = word[len(prefix) :].split("=", 1)
                parsed = _json(text)
                config[key.replace("-", "_")] = text if parsed is None else parsed
    sizes = _sizes_flag(flags, "--cudagraph-capture-sizes", "--cuda-graph-sizes")
    capture = config.get("cudagraph_capture_sizes")
    top = _int(config.get("max_cudagraph_capture_size") or config.get("max_capture_size"))
    top = _int(engine_args.get_flag(flags, "--max-cudagraph-capture-size")) or top
    if sizes is not None and len(sizes) == 1 and engine_args.has_flag(flags, "--cuda-graph-sizes"):
        top, sizes = sizes[0], None  # 0.10/0.11: one value is the ladder's top
    explicit = sizes if sizes is not None else _int_list(capture)
    return CompileConfig(
        mode=_mode(config.get("mode", config.get("level"))),
        level=_level(flags),
        compile_sizes=tuple(_size_items(config.get("compile_sizes"))),
        split_points=tuple(
            _int_list(
                config.get("compile_ranges_split_points", config.get("compile_ranges_endpoints"))
            )
            or ()
        ),
        cudagraph_mode=_graph_mode(config.get("cudagraph_mode")),
        capture_sizes=None if explicit is None else tuple(sorted(set(explicit))),
        max_capture_size=top,
    )


def resolve(
    config: CompileConfig,
    version: tuple[int, int],
    *,
    max_num_batched_tokens: int | None,
    default_capture_sizes: int,
) -> CompilePlan:
    """The compile and capture of one startup: ``version`` decides what ``-O N`` means and
    whether compile ranges exist; ``default_capture_sizes``: the count vLLM's default list
    gives (``peaks.capture_sizes``), used for ``"cudagraph_capture_sizes"`` in the sizes."""
    notes: list[str] = []
    capture_notes: list[str] = []
    mode = config.mode
    graph_mode = config.cudagraph_mode
    if config.level is not None:
        if version >= (0, 12):  # the optimization level
            if config.level == 0:
                mode = 0 if mode is None else mode
                graph_mode = graph_mode or "NONE"
            elif config.level == 1 and graph_mode is None:
                graph_mode = "PIECEWISE"
                capture_notes.append("-O1: PIECEWISE graphs only")
        elif mode is None:  # up to 0.11: the compilation level
            mode = config.level
    if mode is not None and mode in (1, 2):
        notes.append(f"compilation mode {mode}: torch.compile's own backend, no vLLM cache")
    compiles = mode != 0
    piecewise = compiles and mode in (None, 3)
    captures = piecewise and graph_mode != "NONE"
    sizes = _capture_count(config, version, max_num_batched_tokens)
    counted = sizes if sizes is not None else default_capture_sizes
    inductor = _inductor_compiles(config, version, max_num_batched_tokens, counted)
    if inductor > 1:
        notes.append(f"{inductor} Inductor compiles of every piece ({_why_compiles(config)})")
    if captures and sizes is not None:
        capture_notes.append("the sizes from the flags")
    return CompilePlan(
        compiles=compiles,
        piecewise=piecewise,
        inductor_compiles=inductor if piecewise else 1,
        captures=captures,
        capture_sizes=sizes if captures else 0,
        note="; ".join(notes),
        capture_note="; ".join(capture_notes),
    )


def inductor_adaptor(version: tuple[int, ...] | None, environ: Mapping[str, str]) -> str | None:
    """``"standalone"``, ``"legacy"`` (``InductorAdaptor``: the AOTAutograd cache off) or None
    when the version does not say which (``0.10`` or ``0.11`` without the patch release)."""
    setting = environ.get("VLLM_USE_STANDALONE_COMPILE")
    if setting is not None and setting != "1":
        return "legacy"  # vLLM compares the variable with "1"
    if version is None:
        return None
    minor, patch = tuple(version[:2]), (version[2] if len(version) > 2 else None)
    if minor == (0, 10) and patch is None:
        return None  # 0.10.0/0.10.1 pin torch 2.7, 0.10.2 torch 2.8
    if minor < (0, 10) or (minor == (0, 10) and patch is not None and patch < 2):
        return "legacy"  # torch before 2.8 has no standalone_compile
    if setting == "1" or minor != (0, 11):
        return "standalone"
    return None if patch is None else ("legacy" if patch == 0 else "standalone")


def version_parts(text: str | None) -> tuple[int, ...] | None:
    """``"0.10.2"`` → (0, 10, 2), ``"v0.11"`` → (0, 11), ``"0.14.0rc1.dev2"`` → (0, 14, 0)."""
    if not text:
        return None
    out: list[int] = []
    for part in text.strip().lstrip("vV").split(".")[:3]:
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        out.append(int(digits))
        if len(digits) < len(part):
            break
    return tuple(out) if len(out) >= 2 else None


def _inductor_compiles(
    config: CompileConfig, version: tuple[int, int], batched: int | None, captured: int
) -> int:
    sizes: set[int] = set()
    every_captured = False
    for item in config.compile_sizes:
        if isinstance(item, int):
            sizes.add(item)
        elif item == "cudagraph_capture_sizes":
            every_captured = True
    extra = len(sizes) + (captured if every_captured else 0)
    if version < (0, 13):
        return 1 + extra  # the general shape, then each size
    points = {p for p in config.split_points if p > 1 and (batched is None or p < batched)}
    return 1 + len(points) + extra  # one range per split point below the end, plus sizes


def _why_compiles(config: CompileConfig) -> str:
    parts = []
    if config.compile_sizes:
        parts.append("compile_sizes " + ", ".join(str(s) for s in config.compile_sizes))
    if config.split_points:
        parts.append("compile ranges split at " + ", ".join(str(p) for p in config.split_points))
    return "; ".join(parts)


def _capture_count(
    config: CompileConfig, version: tuple[int, int], batched: int | None
) -> int | None:
    cap = batched if batched else 1 << 30
    if config.capture_sizes is not None:
        return sum(1 for s in config.capture_sizes if s <= cap)
    if config.max_capture_size is None:
        return None
    from bringup.core.plan import peaks

    # vLLM's ladder with this top: max_num_seqs is what sets the top otherwise (2 x seqs)
    return peaks.capture_sizes(
        max(1, -(-config.max_capture_size // 2)),
        version,
        max_num_batched_tokens=min(cap, config.max_capture_size),
    )


def _config_texts(flags: Sequence[str]) -> list[str]:
    texts = []
    config = engine_args.get_flag(flags, *_CONFIG_FLAGS)
    if config is not None:
        texts.append(config)
    level = engine_args.get_flag(flags, "-O")
    if level is not None and level.strip().startswith("{"):
        texts.append(level)  # up to 0.11: -O '{...}' is the compilation config
    return texts


def _level(flags: Sequence[str]) -> int | None:
    found: int | None = None
    for i, word in enumerate(flags):
        if word == "--":
            break
        text: str | None = None
        if word.startswith("-O") and not word.startswith("-O.") and len(word) > 2:
            text = word[3:] if word[2] == "=" else word[2:]
        elif word in ("-O", "--optimization-level") and i + 1 < len(flags):
            text = flags[i + 1]
        elif word.startswith("--optimization-level="):
            text = word.split("=", 1)[1]
        value = _int(text)
        if value is not None and 0 <= value <= 3:
            found = value
    return found


def _sizes_flag(flags: Sequence[str], *names: str) -> list[int] | None:
    """The integers after the last of ``names`` (vLLM's ``nargs="+"`` lists)."""
    wanted = {engine_args.canonical_flag(n) for n in names}
    found: list[int] | None = None
    for i, word in enumerate(flags):
        if word == "--":
            break
        if not word.startswith("--") or engine_args.canonical_flag(word) not in wanted:
            continue
        if "=" in word:
            text = word.split("=", 1)[1]
            found = _int_list(_json(text)) or _ints(text)
            continue
        values: list[int] = []
        for nxt in flags[i + 1 :]:
            got = _int(nxt)
            if got is None:
                break
            values.append(got)
        if not values and i + 1 < len(flags):
            values = _int_list(_json(flags[i + 1])) or []
        found = values
    return found


def _ints(text: str) -> list[int]:
    return [v for v in (_int(t) for t in text.replace(",", " ").split()) if v is not None]


def _json(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def _int_list(value: Any) -> list[int] | None:
    if not isinstance(value, list):
        return None
    return [v for v in (_int(x) for x in value) if v is not None]


def _size_items(value: Any) -> list[int | str]:
    if not isinstance(value, list):
        return []
    out: list[int | str] = []
    for x in value:
        got = _int(x)
        if got is not None:
            out.append(got)
        elif isinstance(x, str):
            out.append(x.strip())
    return out


def _mode(value: Any) -> int | None:
    got = _int(value)
    if got is not None:
        return got
    if isinstance(value, str):
        name = (
            value.strip().upper().removeprefix("COMPILATIONMODE.").removeprefix("COMPILATIONLEVEL.")
        )
        return _MODE_NAMES.get(name)
    return None


def _graph_mode(value: Any) -> str | None:
    """A ``cudagraph_mode`` as vLLM takes it: a name, or the ints/lists ``CUDAGraphMode``
    holds (0 NONE, 1 PIECEWISE, 2 FULL, [2, 0] FULL_DECODE_ONLY, [2, 1] FULL_AND_PIECEWISE)."""
    if isinstance(value, list):
        pair = tuple(_int(x) for x in value)
        return {(2, 0): "FULL_DECODE_ONLY", (2, 1): "FULL_AND_PIECEWISE"}.get(pair)  # type: ignore[arg-type]
    number = _int(value)
    if number is not None:
        return {0: "NONE", 1: "PIECEWISE", 2: "FULL"}.get(number)
    if isinstance(value, str):
        name = value.strip().upper().removeprefix("CUDAGRAPHMODE.")
        if name in _GRAPH_MODES:
            return name
    return None
