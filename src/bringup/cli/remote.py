"""The remote-host flags of the command line.

``verify``, ``plan``, ``guard``, ``diagnose``, ``unit`` and ``run`` read files, GPUs and
processes of the machine they run on, so with ``--host`` bringup runs *itself* there
(``bringup.adapters.ssh_forward``). The remote flags (``--host``, ``--accept-new-host-key``,
``--sudo``, ``--remote-bringup PATH``) are taken out of the arguments before the first ``--``
only (after it they belong to the server command).

``watch``, ``up`` and ``status`` stay local and reach the host over ssh: ``--host`` and
``--accept-new-host-key`` give them an ``SshRunner``.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from bringup.errors import UsageError

if TYPE_CHECKING:  # imported where used: --help and local runs do not pay for ssh's imports
    from bringup.adapters.ssh import SshRunner
    from bringup.adapters.ssh_forward import RemoteCall


def split_remote_flags(args: Sequence[str]) -> RemoteCall | None:
    """Take the remote flags out of ``args`` (before the first ``--``); None without ``--host``."""
    from bringup.adapters.ssh_forward import RemoteCall

    args = list(args)
    end = args.index("--") if "--" in args else len(args)
    head, tail = args[:end], args[end:]
    values: dict[str, str | None] = {"--host": None, "--remote-bringup": None}
    switches = {"--accept-new-host-key": False, "--sudo": False}
    rest: list[str] = []
    i = 0
    while i < len(head):
        word = head[i]
        name, eq, inline = word.partition("=")
        if name in values:
            if not eq and i + 1 >= len(head):
                raise UsageError(f"{name} needs a value", hint="e.g. --host ops@gpu1")
            values[name] = inline if eq else head[i + 1]
            i += 1 if eq else 2
            continue
        if word in switches:
            switches[word] = True
        else:
            rest.append(word)
        i += 1
    if values["--host"] is None:
        nodes = any(w.split("=", 1)[0] == "--nodes" for w in head)
        if switches["--sudo"] or values["--remote-bringup"] is not None:
            raise UsageError("--sudo and --remote-bringup need --host")
        if switches["--accept-new-host-key"] and not nodes:
            raise UsageError(
                "--accept-new-host-key needs --host (or --nodes FILE: the nodes' host keys)"
            )
        return None  # with --nodes, --accept-new-host-key stays for run's own parser
    return RemoteCall(
        values["--host"],
        switches["--accept-new-host-key"],
        switches["--sudo"],
        values["--remote-bringup"] or "bringup",
        tuple(rest + tail),
    )


def add_remote_arguments(parser: argparse.ArgumentParser) -> None:
    """The remote flags, for ``--help`` (they are taken out before parsing)."""
    group = parser.add_argument_group("remote host (bringup runs there, over ssh)")
    group.add_argument(
        "--host",
        metavar="[USER@]SERVER[:PORT]",
        help="run this command on SERVER (bringup must be installed there)",
    )
    group.add_argument(
        "--accept-new-host-key",
        action="store_true",
        help="trust SERVER's host key on first use (never a changed one)",
    )
    group.add_argument(
        "--sudo",
        action="store_true",
        help="run it there with `sudo -n` (never prompts for a password)",
    )
    group.add_argument(
        "--remote-bringup",
        metavar="PATH",
        help="the bringup executable there (default: bringup on PATH)",
    )


def add_host_arguments(parser: argparse.ArgumentParser) -> None:
    """``--host`` and ``--accept-new-host-key`` for watch, up and status."""
    parser.add_argument(
        "--host",
        metavar="[USER@]SERVER[:PORT]",
        help="the service runs on SERVER: reach it over ssh (systemctl, journalctl, tail, nvidia-smi run there)",
    )
    parser.add_argument(
        "--accept-new-host-key",
        action="store_true",
        help="with --host: trust SERVER's host key on first use (never a changed one)",
    )


def ssh_runner(args: argparse.Namespace, environ: Mapping[str, str]) -> SshRunner | None:
    """An SshRunner for ``--host``, else None."""
    if not getattr(args, "host", None):
        if getattr(args, "accept_new_host_key", False):
            raise UsageError("--accept-new-host-key needs --host")
        return None
    from bringup.adapters.ssh import SshRunner, target_from

    return SshRunner(
        target_from(args.host, accept_new_host_key=args.accept_new_host_key, environ=environ)
    )
