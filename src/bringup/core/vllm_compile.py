"""What a vLLM command line says about torch.compile and the CUDA-graph capture, read as vLLM
reads it (the versions named are the wheels' own code): the startup prediction
(``core.startup_time``) reads the compiles and the captured sizes, the plan
(``core.plan.peaks``) the graph pool's sizes and mode (:func:`graph_capture`).

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
  vLLM's piecewise backend or its cache, and no capture up to 0.11 (``cudagraph_mode`` NONE
  unless the mode is 3: ``vllm/config/__init__.py::VllmConfig.__post_init__``, 0.11.0); from
  0.12 a mode other than 3 keeps FULL graphs ("Cudagraph mode ... is not compatible with
  compilation mode" touches only the piecewise ones: :func:`_without_vllm_compile`);
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

**The graph pool's sizes and mode** (:func:`graph_capture`, for the plan): ``--enforce-eager``,
``cudagraph_mode`` NONE and ``-O0`` capture nothing (above); compilation modes 0-2 capture
nothing up to 0.11, and from 0.12 keep a FULL or FULL_DECODE_ONLY mode (from 0.32 also
FULL_AND_PIECEWISE's decode half: ``_without_vllm_compile``). The mode
vLLM runs with otherwise: the one given (``cudagraph_mode`` exists from 0.10; before it the V1
engine captured PIECEWISE graphs only), ``-O1`` PIECEWISE (0.12 on), else the version's default:
PIECEWISE in 0.10 (vLLM PR #20059, which added the mode in 0.10.1) and FULL_AND_PIECEWISE
from 0.11 (PR #25444, "Change default CUDAGraphMode from PIECEWISE to FULL_AND_PIECEWISE";
``OPTIMIZATION_LEVEL_02``/``_03``, 0.12.0 to 0.32.0).
Explicit sizes: de-duplicated, sorted and cut at ``max_num_batched_tokens``, not at
``max_num_seqs`` (``VllmConfig._set_cudagraph_sizes``: ``[i for i in dedup_sizes if i <=
max_num_tokens]``, 0.32.0), and ``max_cudagraph_capture_size`` the ladder up to it, cut the
same way. Which graphs each mode captures (``CudagraphDispatcher.initialize_cudagraph_keys``,
``vllm/v1/cudagraph_dispatcher.py``, 0.32.0): the mixed-batch graphs (PIECEWISE, FULL, the
PIECEWISE half of FULL_AND_PIECEWISE) at every size; FULL_DECODE_ONLY only the uniform-decode
FULL graphs, at the sizes up to ``max_num_seqs`` (``x <= uniform_decode_query_len *
max_num_seqs``, one query token without speculative decoding). The V0 engine reads none of
this (its ``CUDAGraphRunner`` captures whole-model graphs, ``vllm/worker/model_runner.py``):
only ``--enforce-eager`` turns its capture off.

Pure: flags and versions in, facts out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bringup.core import engine_args, vllm_graphs

_CONFIG_FLAGS = ("--compilation-config", "-cc")
_PARSED_FLAGS = frozenset(
    {
        *_CONFIG_FLAGS,
        "--optimization-level",
        "--cudagraph-capture-sizes",
        "--cuda-graph-sizes",
        "--max-cudagraph-capture-size",
    }
)
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
    problem: str | None = None  # a compilation config that is not JSON (vLLM refuses it)


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
    problem = None
    for text in _config_texts(flags):
        value = _json(text)
        if value is None and problem is None:
            problem = _not_json(text)
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
        problem=problem,
    )


def is_compilation_flag(word: str) -> bool:
    """Whether a flag word (``--x=1`` cut at ``=``) is one :func:`parse` reads: ``-cc`` and
    ``--compilation-config`` (dotted forms too), ``-O`` in each spelling, the capture sizes'
    flags (``--cuda-graph-sizes``: 0.10 and 0.11)."""
    flag = engine_args.canonical_flag(word)
    return (
        flag in _PARSED_FLAGS
        or word.startswith(_DOTTED)
        or (word.startswith("-O") and not word.startswith("--"))
    )


def resolve(
    config: CompileConfig,
    version: tuple[int, int],
    *,
    max_num_batched_tokens: int | None,
    default_capture_sizes: int,
    max_num_seqs: int = 256,
) -> CompilePlan:
    """The compile and capture of one startup: ``version`` decides what ``-O N`` means and
    whether compile ranges exist; ``default_capture_sizes``: the count vLLM's default list
    gives (``vllm_graphs.capture_sizes``), used for ``"cudagraph_capture_sizes"`` in the sizes.
    What is captured, and how many sizes, is :func:`graph_capture`'s (the plan's graph pool
    reads the same): FULL_DECODE_ONLY captures only the decode sizes up to ``max_num_seqs``."""
    notes: list[str] = []
    mode, _ = _modes(config, version)
    capture_notes = ["-O1: PIECEWISE graphs only"] if _o1_piecewise(config, version) else []
    if mode is not None and mode in (1, 2):
        notes.append(f"compilation mode {mode}: torch.compile's own backend, no vLLM cache")
    compiles = mode != 0
    piecewise = compiles and mode in (None, 3)
    capture = graph_capture(
        config, version, max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens
    )
    captures = capture.mode != "NONE"
    listed = _flag_sizes(config, version, max_num_batched_tokens)
    counted = len(listed) if listed is not None else default_capture_sizes
    sizes = len(capture.sizes) if capture.from_flags else None
    if capture.mode == "FULL_DECODE_ONLY":
        capture_notes.append("FULL_DECODE_ONLY: the decode sizes up to --max-num-seqs")
    inductor = _inductor_compiles(config, version, max_num_batched_tokens, counted)
    if inductor > 1:
        notes.append(f"{inductor} Inductor compiles of every piece ({_why_compiles(config)})")
    if captures and listed is not None:
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


@dataclass(frozen=True, slots=True)
class GraphCapture:
    """The CUDA graphs a startup captures, for the plan's graph pool (module docstring)."""

    mode: str  # the cudagraph_mode vLLM runs with ("NONE": nothing is captured)
    sizes: tuple[int, ...]  # the batch sizes captured, ascending
    from_flags: bool  # the flags set the sizes (else vLLM's default list for the settings)


def graph_capture(
    config: CompileConfig,
    version: tuple[int, int],
    *,
    max_num_seqs: int,
    max_num_batched_tokens: int | None,
    enforce_eager: bool = False,
    v0_engine: bool = False,
    ceiling: int | None = None,
) -> GraphCapture:
    """The graphs a V1 startup captures with these flags (module docstring): the mode, and the
    sizes, explicit ones cut at ``max_num_batched_tokens``, FULL_DECODE_ONLY's at
    ``max_num_seqs``; ``ceiling``: the model's own largest default size (gpt-oss's)."""
    default = vllm_graphs.default_capture_sizes(
        max_num_seqs,
        version,
        v0_engine=v0_engine,
        max_num_batched_tokens=max_num_batched_tokens,
        ceiling=ceiling,
    )
    if enforce_eager:
        return GraphCapture("NONE", (), from_flags=True)
    if v0_engine:  # whole-model graphs, the compilation config unread
        return GraphCapture("FULL", default, from_flags=False)
    if version < (0, 10):  # no cudagraph_mode yet: PIECEWISE graphs
        config = replace(config, cudagraph_mode=None)
    graph_mode = _graph_mode_run(*_modes(config, version), version)
    if graph_mode == "NONE":
        return GraphCapture("NONE", (), from_flags=True)
    listed = _flag_sizes(config, version, max_num_batched_tokens)
    sizes, from_flags = (default, False) if listed is None else (listed, True)
    if graph_mode == "FULL_DECODE_ONLY":
        sizes, from_flags = tuple(s for s in sizes if s <= max_num_seqs), True
    return GraphCapture(graph_mode, sizes, from_flags=from_flags)


def _graph_mode_run(mode: int | None, graph_mode: str | None, version: tuple[int, int]) -> str:
    """The cudagraph_mode vLLM runs with: the one given, else the version's default
    (PIECEWISE before 0.11, FULL_AND_PIECEWISE from 0.11), less what a compilation mode other
    than 3 takes away (:func:`_without_vllm_compile`)."""
    graph_mode = graph_mode or ("PIECEWISE" if version < (0, 11) else "FULL_AND_PIECEWISE")
    return graph_mode if mode in (None, 3) else _without_vllm_compile(graph_mode, version)


def _without_vllm_compile(graph_mode: str, version: tuple[int, int]) -> str:
    """The graphs captured when the compilation mode is not 3 (vLLM's piecewise backend): none
    up to 0.11 (``VllmConfig.__post_init__``, 0.11.0); from 0.12 only a mode that needs
    piecewise compilation is touched ("Cudagraph mode ... is not compatible with compilation
    mode"), to NONE, and from 0.32 to its part without piecewise graphs
    (``VllmConfig._normalize_piecewise_cudagraph_mode``, ``CUDAGraphMode.without_piecewise``,
    0.32.0: FULL_AND_PIECEWISE to FULL_DECODE_ONLY); FULL and FULL_DECODE_ONLY are kept.
    ``VLLM_USE_BREAKABLE_CUDAGRAPH``, which lifts the rule, is not read. Releases 0.21-0.31
    were not read: planned as 0.12's rule.

    >>> [_without_vllm_compile(m, (0, 32)) for m in ("FULL_AND_PIECEWISE", "PIECEWISE", "FULL")]
    ['FULL_DECODE_ONLY', 'NONE', 'FULL']
    >>> _without_vllm_compile("FULL_AND_PIECEWISE", (0, 20)), _without_vllm_compile("FULL", (0, 11))
    ('NONE', 'NONE')
    """
    if version < (0, 12):
        return "NONE"
    if graph_mode not in ("PIECEWISE", "FULL_AND_PIECEWISE"):
        return graph_mode
    if version >= (0, 32):
        return "FULL_DECODE_ONLY" if graph_mode == "FULL_AND_PIECEWISE" else "NONE"
    return "NONE"


def _modes(config: CompileConfig, version: tuple[int, int]) -> tuple[int | None, str | None]:
    """(the compilation mode, the cudagraph_mode) the config and ``-O N`` give (None: left to
    vLLM): ``-O N`` is the optimization level from 0.12 and the compilation level before."""
    mode, graph_mode = config.mode, config.cudagraph_mode
    if config.level is not None:
        if version >= (0, 12):  # the optimization level
            if config.level == 0:
                mode = 0 if mode is None else mode
                graph_mode = graph_mode or "NONE"
            elif config.level == 1 and graph_mode is None:
                graph_mode = "PIECEWISE"
        elif mode is None:  # up to 0.11: the compilation level
            mode = config.level
    return mode, graph_mode


def _o1_piecewise(config: CompileConfig, version: tuple[int, int]) -> bool:
    return version >= (0, 12) and config.level == 1 and config.cudagraph_mode is None


def _not_json(text: str) -> str:
    shown = text if len(text) <= 60 else text[:57] + "..."
    return (
        f"--compilation-config {shown!r} is not JSON (vLLM refuses it at startup): "
        "planned with vLLM's default compilation and CUDA graphs"
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


def _flag_sizes(
    config: CompileConfig, version: tuple[int, int], batched: int | None
) -> tuple[int, ...] | None:
    """The sizes the flags fix (None: vLLM's default list): an explicit list cut at
    ``max_num_batched_tokens`` (``_set_cudagraph_sizes``, 0.32.0), or the ladder up to a
    ``max_cudagraph_capture_size``, cut the same way."""
    cap = batched if batched else 1 << 30
    if config.capture_sizes is not None:
        return tuple(s for s in config.capture_sizes if 1 <= s <= cap)
    if config.max_capture_size is None:
        return None
    return _ladder(config.max_capture_size, version, cap)


def _ladder(top: int, version: tuple[int, int], cap: int) -> tuple[int, ...]:
    """vLLM's ladder up to a ``max_cudagraph_capture_size`` (or one ``--cuda-graph-sizes``
    value), cut at ``max_num_batched_tokens``: 0.12 on, ``vllm_graphs.ladder_up_to``; before,
    1, 2, 4 and steps of 8 up to it (the rule of the default list, whose one
    ``cuda_graph_sizes`` value is ``min(max_num_seqs * 2, 512)``). The 512 limit is only the
    default's (``_set_cudagraph_sizes``, 0.32.0: a given top is used as it is)."""
    top = min(top, cap)
    if version >= (0, 12):
        return tuple(vllm_graphs.ladder_up_to(top))
    return tuple(s for s in (1, 2, 4, *range(8, top + 1, 8)) if s <= top)


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
