"""``bringup unit``'s service settings: ``--run-as USER[:GROUP]`` (``User=``, ``Group=``, the
env file's owner, what that user can read checked), ``--working-directory``, ``--hf-home``,
``--limit-memlock``."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from bringup.adapters import accounts
from bringup.core import access, engine_args, wrappers
from bringup.core import systemd_unit as su
from bringup.errors import UsageError
from bringup.units import parse_size


@dataclass(frozen=True, slots=True)
class Settings:
    """What the options add to the unit."""

    user: str | None = None
    group: str | None = None  # Group=, only when given
    owner: str | None = None  # USER:GROUP for the env file; None: leave it to whoever writes
    working_directory: str | None = None
    limit_memlock: str | None = None
    environment: tuple[tuple[str, str], ...] = ()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--run-as",
        metavar="USER[:GROUP]",
        help="User= (and Group=) of a system unit; the env file is given to that user, and "
        "the HF cache, model folder and working directory are checked to be readable by it",
    )
    parser.add_argument("--working-directory", metavar="DIR", help="WorkingDirectory=")
    parser.add_argument(
        "--hf-home",
        metavar="DIR",
        help="Environment=HF_HOME=DIR: the Hugging Face cache the server reads",
    )
    parser.add_argument(
        "--limit-memlock",
        metavar="SIZE",
        help="LimitMEMLOCK= (infinity, or a size such as 64MiB): pinned memory for RDMA/NCCL",
    )


def settings(
    args: argparse.Namespace, argv: list[su.Word], public: tuple[tuple[str, str], ...]
) -> Settings:
    """The settings of ``args``, checked (``--root`` skips what needs this machine's users)."""
    workdir = os.path.abspath(args.working_directory) if args.working_directory else None
    if workdir and not args.root and not os.path.isdir(workdir):
        raise UsageError(f"--working-directory {workdir}: no such folder")
    hf_home = os.path.abspath(args.hf_home) if args.hf_home else None
    environment = (("HF_HOME", hf_home),) if hf_home else ()
    memlock = _memlock(args.limit_memlock) if args.limit_memlock else None
    if not args.run_as:
        return Settings(None, None, None, workdir, memlock, environment)
    if args.user:
        raise UsageError(
            "--run-as sets User= of a system unit; a --user unit runs as its manager's user",
            hint="drop --user, or drop --run-as",
        )
    user, _, group = args.run_as.partition(":")
    if not user or ":" in group:
        raise UsageError(f"--run-as {args.run_as!r}: give USER or USER:GROUP")
    if args.root:  # another machine's users: written as given, nothing to check here
        return Settings(user, group or None, None, workdir, memlock, environment)
    account = accounts.lookup(user, group or None)
    env = dict(public) | dict(environment)
    cache = env.get("HF_HOME") or os.path.join(account.home, ".cache", "huggingface")
    _check(account, cache, "its Hugging Face cache", "give --hf-home DIR that it can read")
    model = _local_model(argv)
    if model:
        _check(account, model, "the model", f"chown -R {user} it, or make it readable")
    if workdir:
        _check(account, workdir, "its working directory", "give a folder it can enter")
    owner = f"{user}:{account.group}"
    return Settings(user, group or None, owner, workdir, memlock, environment)


def _memlock(text: str) -> str:
    if text.lower() in ("infinity", "unlimited"):
        return "infinity"
    return str(parse_size(text))


def _local_model(argv: list[su.Word]) -> str | None:
    """The server's model when it names a path on this machine."""
    start = wrappers.command_start(argv) or 0
    plain = [w for w in argv[start:] if isinstance(w, str)]
    model = engine_args.parse_server_command(plain).model if plain else None
    return os.path.abspath(model) if model and os.path.exists(model) else None


def _check(account: accounts.Account, path: str, what: str, fix: str) -> None:
    """One line when ``account`` cannot read ``path`` (or, absent, cannot make it)."""
    nodes, exists = accounts.chain(path)
    if not nodes:
        return
    final = "rx" if nodes[-1].is_dir else "r"
    stop = access.blocked_at(nodes, account.who, exists=exists, final=final)
    if stop is not None:
        verb = "read" if exists else "create"
        raise UsageError(
            f"--run-as {account.who.name}: it cannot {verb} {what} {path}: "
            f"{access.describe(stop)} stops it",
            hint=fix,
        )
