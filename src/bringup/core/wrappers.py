"""Commands that run another command: ``env``, ``sudo -u``, ``nice``, ``taskset``, ``numactl``…

A server command is often wrapped (``env HF_TOKEN=… vllm serve``, ``numactl -N 0 vllm
serve``, ``sudo -u svc vllm serve``). Whoever reads it (the secrets detector, the unit
writer resolving executables) needs the wrapped command's first word. Each wrapper is data:
its options that take a value, the positional words before the command, and whether
``NAME=VALUE`` assignments may come first. The option tables are those of each tool's own
usage text (coreutils ``env``/``nice``/``timeout``/``stdbuf``/``nohup``, util-linux
``taskset``/``setsid``/``ionice``, numactl, sudo).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from bringup.core.systemd_unit import EnvRef, Word


@dataclass(frozen=True, slots=True)
class Wrapper:
    """How one wrapper is called: ``WRAPPER [OPTIONS] [POSITIONAL...] [NAME=VALUE...] CMD``."""

    takes_value: frozenset[str] = frozenset()  # options whose value is the next word
    positional: int = 0  # words between the options and the command (taskset's mask)
    assignments: bool = False  # NAME=VALUE words may precede the command
    resets_environment: bool = False  # the command does not see the caller's environment
    no_command: frozenset[str] = frozenset()  # options after which nothing is run (taskset -p)


WRAPPERS: dict[str, Wrapper] = {
    "env": Wrapper(
        frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}), assignments=True
    ),
    "sudo": Wrapper(
        frozenset(
            {
                "-u",
                "--user",
                "-g",
                "--group",
                "-C",
                "--close-from",
                "-D",
                "--chdir",
                "-h",
                "--host",
                "-p",
                "--prompt",
                "-R",
                "--chroot",
                "-r",
                "--role",
                "-t",
                "--type",
                "-T",
                "--command-timeout",
                "-U",
                "--other-user",
            }
        ),
        assignments=True,
        resets_environment=True,
        no_command=frozenset({"-l", "--list", "-v", "--validate", "-k", "-K", "-V"}),
    ),
    "nice": Wrapper(frozenset({"-n", "--adjustment"})),
    "taskset": Wrapper(positional=1, no_command=frozenset({"-p", "--pid"})),
    "numactl": Wrapper(
        frozenset(
            {
                "-N",
                "--cpunodebind",
                "-m",
                "--membind",
                "-C",
                "--physcpubind",
                "-i",
                "--interleave",
                "-p",
                "--preferred",
                "-w",
                "--weighted-interleave",
                "-b",
                "--balancing",
            }
        ),
        no_command=frozenset({"-H", "--hardware", "-s", "--show"}),
    ),
    "nohup": Wrapper(),
    "setsid": Wrapper(),
    "ionice": Wrapper(frozenset({"-c", "--class", "-n", "--classdata"})),
    "timeout": Wrapper(frozenset({"-s", "--signal", "-k", "--kill-after"}), positional=1),
    "stdbuf": Wrapper(frozenset({"-i", "--input", "-o", "--output", "-e", "--error"})),
}

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh"})
CONTAINER_CLIS = frozenset({"docker", "podman", "nerdctl"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def base_name(word: Word) -> str:
    """``/usr/bin/env`` → ``env``; a ``${NAME}`` word has no name."""
    return "" if isinstance(word, EnvRef) else PurePosixPath(word).name


def is_assignment(word: Word) -> bool:
    """``NAME=VALUE``, as a shell or ``env`` reads it before a command."""
    return isinstance(word, str) and bool(_ASSIGNMENT.match(word))


def skip_assignments(words: Sequence[Word], i: int) -> int:
    """The index of the first word from ``i`` on that is not a ``NAME=VALUE`` assignment."""
    while i < len(words) and is_assignment(words[i]):
        i += 1
    return i


def after_options(words: Sequence[Word], i: int, wrapper: Wrapper) -> int | None:
    """The index after ``wrapper``'s options and positional words (its command, or its
    assignments); None when it runs no command (``taskset -p``, ``sudo -l``)."""
    while i < len(words):
        word = words[i]
        if not isinstance(word, str) or not word.startswith("-") or word == "-":
            break
        i += 1
        if word == "--":
            break
        flag = word.split("=", 1)[0]
        if flag in wrapper.no_command:
            return None
        if flag in wrapper.takes_value and "=" not in word:
            i += 1
    i += wrapper.positional
    return i if i <= len(words) else None


def command_start(words: Sequence[Word], i: int = 0) -> int | None:
    """The index of the command's executable from ``i``: past leading assignments and
    every wrapper. None when the wrappers run nothing or the line ends first.

    >>> command_start(["env", "HF_TOKEN=x", "numactl", "-N", "0", "nice", "-n", "5", "vllm"])
    8
    """
    i = skip_assignments(words, i)
    while i < len(words):
        wrapper = WRAPPERS.get(base_name(words[i]))
        if wrapper is None:
            return i
        j = after_options(words, i + 1, wrapper)
        if j is None:
            return None
        i = skip_assignments(words, j) if wrapper.assignments else j
    return None


def executables(words: Sequence[Word]) -> tuple[int, ...]:
    """The indices of every executable a command line runs on this machine: the first word
    and the command of each wrapper around it (``env``, ``sudo``, ``nice``, ``numactl``…)."""
    found: list[int] = []
    i: int | None = skip_assignments(words, 0)
    while i is not None and i < len(words):
        found.append(i)
        wrapper = WRAPPERS.get(base_name(words[i]))
        if wrapper is None:
            break
        j = after_options(words, i + 1, wrapper)
        i = None if j is None else (skip_assignments(words, j) if wrapper.assignments else j)
    return tuple(found)


def shell_string(words: Sequence[Word], i: int) -> int | None:
    """For ``sh -c STRING`` at ``i`` (``bash -ec``, ``sh -lc``…): the index of STRING."""
    j = i + 1
    while j < len(words):
        word = words[j]
        if word in ("-o", "+o", "-O", "+O"):  # bash -o pipefail -c ...
            j += 2
            continue
        if not isinstance(word, str) or not word.startswith("-") or word.startswith("--"):
            return None
        if "c" in word[1:]:
            return j + 1 if j + 1 < len(words) else None
        j += 1
    return None
