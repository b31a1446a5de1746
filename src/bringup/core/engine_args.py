"""Read and rewrite inference-server command lines (argv lists), without running them.

The engines' entry points, valueless flags and aliases come from their knowledge packs
(``Pack.entry_points``, ``Pack.flags``); the engine twin is bringup's own. Recognised::

    vllm serve MODEL ...                                    python -m vllm.entrypoints.openai.api_server --model M
    python -m sglang.launch_server --model-path M ...       sglang serve --model-path M
    text-generation-launcher --model-id M ...               llama-server -m M ...
    python -m llama_cpp.server --model M ...                bringup twin vllm --model M (the engine twin)

Leading ``NAME=value`` words, the wrappers of :mod:`core.wrappers` (``env X=1``, ``numactl -N 0``,
``taskset -c 0-7``, ``sudo -u svc``, ``nice``, ``timeout 1h``...; each as its own usage text
reads its options) and interpreter paths (``/opt/venv/bin/python3``) are allowed. Flags are matched the way the engines' parsers do: ``--flag value`` and
``--flag=value``, the last occurrence wins, ``--max_num_seqs`` equals ``--max-num-seqs``, and
the short aliases vLLM accepts (``-tp``, ``-pp``, ``-dp``, ``-q``) name their long flags.

>>> get_flag(["vllm", "serve", "m", "-tp", "4"], "--tensor-parallel-size")
'4'
>>> set_flag(["vllm", "serve", "m", "--max-num-seqs=1024"], "--max-num-seqs", "256")
['vllm', 'serve', 'm', '--max-num-seqs=256']
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bringup.core import packs, wrappers
from bringup.core.packs.types import EntryPoint
from bringup.core.vocab import Engine

# flags of every engine that never take a value, so the next word is not read as their value
BOOLEAN_FLAGS: frozenset[str] = frozenset(
    {"--help", "-h"}.union(*(pack.flags.boolean for pack in packs.declared()))
)

# short alias -> long flag (vLLM's -tp, -pp, -dp, -q)
ALIASES: dict[str, str] = {
    alias: flag for pack in packs.declared() for alias, flag in pack.flags.aliases.items()
}

_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")

# the packs' entry points: python -m MODULE, and PROGRAM [SUBCOMMAND]
_MODULES: dict[str, tuple[Engine, EntryPoint]] = {
    ep.module: (pack.engine, ep)
    for pack in packs.declared()
    for ep in pack.entry_points
    if ep.module is not None and pack.engine is not None
}
_PROGRAMS: dict[str, tuple[Engine, EntryPoint]] = {
    ep.program: (pack.engine, ep)
    for pack in packs.declared()
    for ep in pack.entry_points
    if ep.program is not None and pack.engine is not None
}


@dataclass(frozen=True, slots=True)
class ServerCommand:
    """A server command line taken apart."""

    argv: tuple[str, ...]  # the whole command as given
    engine: Engine | None  # None when the entry point is not recognised
    model: str | None  # the model path or id, when the command names one
    flags: tuple[str, ...]  # the arguments after the entry point, model positional removed
    entry: tuple[str, ...]  # the words up to and including the entry point


def parse_server_command(argv: Sequence[str]) -> ServerCommand:
    """Recognise the engine, model and flags of a server command (see the module docstring)."""
    words = list(argv)
    start = _skip_env(words)
    program = _base(words[start]) if start < len(words) else ""
    if _PYTHON.match(program) and words[start + 1 : start + 2] == ["-m"] and start + 2 < len(words):
        module = words[start + 2]
        if module == "bringup":
            return _twin(words, start + 3)
        if module in _MODULES:
            engine, ep = _MODULES[module]
            return _with_flags(words, start + 3, engine, ep.model_flags)
        return ServerCommand(
            tuple(words), None, None, tuple(words[start + 3 :]), tuple(words[: start + 3])
        )
    if program == "bringup":
        return _twin(words, start + 1)
    if program in _PROGRAMS:
        engine, ep = _PROGRAMS[program]
        at = start + 1
        if ep.subcommand is not None:
            if words[at : at + 1] != [ep.subcommand]:
                return ServerCommand(tuple(words), None, None, tuple(words[at:]), tuple(words[:at]))
            at += 1
        if ep.positional_model:
            return _with_positional(words, at, engine, ep.model_flags)
        return _with_flags(words, at, engine, ep.model_flags)
    return ServerCommand(
        tuple(words), None, None, tuple(words[start + 1 :]), tuple(words[: start + 1])
    )


def _skip_env(words: list[str]) -> int:
    """The index of the wrapped command's first word: past ``NAME=value`` words and every
    wrapper (``env``, ``numactl``, ``taskset``, ``sudo``, ``nice``...); the end of the line
    when the wrappers run no command (``taskset -p 1``)."""
    start = wrappers.command_start(words)
    return len(words) if start is None else start


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _with_flags(words: list[str], at: int, engine: Engine, names: tuple[str, ...]) -> ServerCommand:
    flags = words[at:]
    return ServerCommand(
        tuple(words), engine, get_flag(flags, *names), tuple(flags), tuple(words[:at])
    )


def _with_positional(
    words: list[str], at: int, engine: Engine, names: tuple[str, ...]
) -> ServerCommand:
    rest = words[at:]
    if rest and not rest[0].startswith("-"):
        return ServerCommand(tuple(words), engine, rest[0], tuple(rest[1:]), tuple(words[:at]))
    return _with_flags(words, at, engine, names)


def _twin(words: list[str], at: int) -> ServerCommand:
    if words[at : at + 2] == ["twin", "vllm"]:
        return _with_flags(words, at + 2, Engine.VLLM, ("--model",))
    return ServerCommand(tuple(words), None, None, tuple(words[at:]), tuple(words[:at]))


def _canonical(word: str) -> str:
    """The long name a flag word stands for (``-tp`` → ``--tensor-parallel-size``)."""
    name = word.split("=", 1)[0]
    if name in ALIASES:
        return ALIASES[name]
    if name.startswith("--"):
        return "--" + name[2:].replace("_", "-")
    return name


def canonical_flag(word: str) -> str:
    """The long name a flag word stands for (``-tp`` → ``--tensor-parallel-size``,
    ``--max_num_seqs=8`` → ``--max-num-seqs``)."""
    return _canonical(word)


def _wanted(names: Sequence[str]) -> set[str]:
    return {_canonical(n) for n in names}


def _takes_value(argv: Sequence[str], i: int) -> bool:
    if _canonical(argv[i]) in BOOLEAN_FLAGS or i + 1 >= len(argv):
        return False
    nxt = argv[i + 1]
    return not nxt.startswith("-") or _is_number(nxt)


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def get_flag(argv: Sequence[str], *names: str) -> str | None:
    """The value of the last occurrence of any of ``names``; None if absent or valueless."""
    wanted = _wanted(names)
    value: str | None = None
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            break
        if word.startswith("-") and _canonical(word) in wanted:
            if "=" in word:
                value = word.split("=", 1)[1]
            elif _takes_value(argv, i):
                value = argv[i + 1]
                i += 1
            else:
                value = None
        i += 1
    return value


def has_flag(argv: Sequence[str], *names: str) -> bool:
    """Whether any of ``names`` appears (with or without a value)."""
    wanted = _wanted(names)
    for word in argv:
        if word == "--":
            return False
        if word.startswith("-") and _canonical(word) in wanted:
            return True
    return False


def set_flag(argv: Sequence[str], flag: str, value: str | None) -> list[str]:
    """Set ``flag`` to ``value`` (None: a boolean flag), replacing every occurrence in place.

    Aliases and spellings count as the flag (``-tp 4`` is replaced when setting
    ``--tensor-parallel-size``); the first occurrence keeps its position and form, later
    ones are dropped. Absent flags are appended.
    """
    wanted = _wanted([flag])
    out: list[str] = []
    placed = False
    i = 0
    words = list(argv)
    while i < len(words):
        word = words[i]
        if word == "--":
            out.extend(words[i:])
            break
        if word.startswith("-") and _canonical(word) in wanted:
            had_value = "=" not in word and _takes_value(words, i)
            if not placed:
                out.extend(_render(word.split("=", 1)[0], value, inline="=" in word))
                placed = True
            i += 2 if had_value else 1
            continue
        out.append(word)
        i += 1
    if not placed:
        out.extend(_render(flag, value, inline=False))
    return out


def _render(name: str, value: str | None, *, inline: bool) -> list[str]:
    if value is None:
        return [name]
    return [f"{name}={value}"] if inline else [name, value]
