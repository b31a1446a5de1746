"""Where ``bringup unit`` puts its files, and writing them without losing anyone's secrets.

The env file (``EnvironmentFile=``, mode 0600) is ``--env-file FILE``, or named after the
unit file written: ``/etc/bringup/NAME.env`` with ``--install`` (``~/.config/bringup/NAME.env``
with ``--user``), ``DIR/STEM.env`` beside ``--output DIR/STEM.service``. An existing env file
with other content is replaced only with ``--force``; the refusal names the keys that differ,
never their values.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bringup.adapters.commands import (
    LocalRunner,
    PrefixRunner,
    Runner,
    check,
    check_writable_target,
    write_local,
)
from bringup.cli.main import Context
from bringup.core import service
from bringup.core import systemd_unit as su
from bringup.errors import InputError, UsageError


@dataclass(frozen=True, slots=True)
class EnvFile:
    """Where the env file is written (under ``--root`` on this machine) and the path the
    unit names (the one on the target system)."""

    path: Path
    named: str


def config_home(ctx: Context) -> str:
    """The user manager's configuration folder: ``$XDG_CONFIG_HOME`` or ``~/.config``."""
    config = ctx.environ.get("XDG_CONFIG_HOME") or os.path.join(
        ctx.environ.get("HOME", ""), ".config"
    )
    if not os.path.isabs(config):
        raise UsageError("--user needs HOME (or XDG_CONFIG_HOME) set to an absolute path")
    return config


def install_dir(args: argparse.Namespace, ctx: Context) -> Path:
    """Where ``--install`` puts the unit (under ``--root`` when given)."""
    root = Path(args.root or "/")
    if not args.user:
        return root / "etc/systemd/system"
    return root / config_home(ctx).lstrip("/") / "systemd/user"


def env_file_paths(
    args: argparse.Namespace, ctx: Context, name: str, has_secrets: bool
) -> EnvFile | None:
    """The env file for this unit, or None when it needs none (see the module docstring)."""
    if args.env_file:
        path = Path(os.path.abspath(args.env_file))
        return EnvFile(path, str(path))
    if not has_secrets:
        return None
    if args.install:
        folder = os.path.join(config_home(ctx), "bringup") if args.user else "/etc/bringup"
        named = f"{folder}/{name}.env"
        return EnvFile(Path(args.root or "/") / named.lstrip("/"), named)
    if args.output:
        unit = Path(os.path.abspath(args.output))
        stem = unit.name.removesuffix(".service") or unit.name
        path = unit.with_name(f"{stem}.env")
        return EnvFile(path, str(path))
    raise UsageError(
        "the command holds secrets (API keys or tokens), which never go into the unit text",
        hint="give --env-file FILE to keep them in a mode-0600 EnvironmentFile=, or use --install/--output",
    )


def check_no_secret_in(text: str, secret: Mapping[str, str]) -> None:
    """The last line of defence: no secret value is in the unit text (``--description``)."""
    for key, value in secret.items():
        if len(value) >= 4 and value in text:
            raise UsageError(
                f"the value of {key} would be written into the unit text",
                hint="keep secrets out of --description; the env file carries them",
            )


def guard_existing(
    env: EnvFile, secret: Mapping[str, str], force: bool, system: Runner | None
) -> None:
    """Refuse to replace an env file that holds other secrets, unless ``force``."""
    old_text = _read(str(env.path), system)
    if old_text is None or force:
        return
    differences = su.env_file_differences(service.parse_environment(old_text), secret)
    if differences:
        raise UsageError(
            f"{env.path} exists with other content ({'; '.join(differences)}); another unit may "
            "start with it",
            hint="give --force to replace it, or --env-file FILE for a file of this unit's own",
        )


def _read(path: str, system: Runner | None) -> str | None:
    """The file's text, or None when there is none; read where the manager reads."""
    if isinstance(system, PrefixRunner):
        done = system.run(["sh", "-c", 'test ! -e "$1" || cat -- "$1"', "sh", path])
        return check(done).stdout or None
    check_writable_target(path)  # a FIFO would block the read for ever, a device is no env file
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(
            f"cannot read {path} to compare it with this unit's secrets: {exc.strerror or exc}",
            hint="run as a user who can read it (root for /etc/bringup)",
        ) from exc


def write_env_file(
    env: EnvFile, text: str, system: Runner | None, owner: str | None, ctx: Context
) -> None:
    """Write the env file, mode 0600, and give it to ``owner`` (``USER:GROUP``) when given."""
    if system is not None:
        system.write_file(str(env.path), text, private=True)
    else:
        write_local(str(env.path), text, private=True)
    if owner is not None:
        check((system or LocalRunner(ctx.environ)).run(["chown", owner, str(env.path)]))
