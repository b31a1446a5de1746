"""systemd unit text for a server run under bringup, as pure functions of values.

``render_unit(spec)`` writes the ``NAME.service`` file, ``render_env_file`` the mode-0600
``EnvironmentFile=`` that holds secrets, and ``render_retry_dropin`` the
``NAME.service.d/bringup-retry.conf`` drop-in that ``bringup up --retry`` uses to replace
``ExecStart=``. Secrets never appear in unit text: ``bringup.core.secrets.split_secrets``
moves API keys and tokens out of the command line and leaves ``${NAME}`` references.

Command-line quoting follows ``systemd.service(5)``: words with spaces or quotes are
double-quoted, ``\\`` and ``"`` are escaped, ``%`` is written ``%%`` (specifiers) and a
literal ``$`` is written ``$$`` (variable expansion); ``${NAME}`` expands to one word.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bringup.errors import UsageError


@dataclass(frozen=True, slots=True)
class EnvRef:
    """A command-line word that systemd fills in from the environment: ``${NAME}``."""

    name: str


Word = str | EnvRef


@dataclass(frozen=True, slots=True)
class UnitSpec:
    """Everything a generated unit says. Times in seconds, paths absolute."""

    name: str  # without ".service"
    description: str
    exec_start: tuple[Word, ...]  # bringup run --notify -- CMD
    exec_start_pre: tuple[Word, ...] = ()  # bringup guard ...; empty for none
    environment: tuple[tuple[str, str], ...] = ()  # non-secret Environment= pairs
    environment_file: str | None = None  # holds the secrets; mode 0600
    secret_names: tuple[str, ...] = ()  # names defined in environment_file (for the comment)
    user: bool = False  # a user unit (systemctl --user)
    run_as_user: str | None = None  # User=
    run_as_group: str | None = None  # Group=
    working_directory: str | None = None  # WorkingDirectory=
    limit_memlock: str | None = None  # LimitMEMLOCK=: "infinity" or bytes
    restart_seconds: float = 30.0
    timeout_start_seconds: float = 1200.0
    timeout_start_note: str = ""  # where TimeoutStartSec= comes from (a comment), if said
    timeout_stop_seconds: float = 60.0
    watchdog_seconds: float | None = None
    start_limit_interval_seconds: float = 1800.0
    start_limit_burst: int = 5
    header: tuple[str, ...] = field(default=())  # extra comment lines at the top


_UNIT_NAME = re.compile(r"^[A-Za-z0-9:_.\\-]+$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def unit_name(name: str) -> str:
    """``NAME`` without a ``.service`` suffix, checked against systemd's unit-name rules."""
    base = name.removesuffix(".service")
    if not base or not _UNIT_NAME.match(base) or len(base) > 247:
        raise UsageError(f"not a valid unit name: {name!r} (letters, digits and :_.- only)")
    return base


def quote_word(word: Word) -> str:
    """One command-line word in systemd's syntax (see the module docstring)."""
    if isinstance(word, EnvRef):
        return "${" + word.name + "}"
    if word == ";":
        return "\\;"
    escaped = "".join(_escape_char(c) for c in word).replace("%", "%%").replace("$", "$$")
    if word and not re.search(r"[\s'\"]", word):
        return escaped
    return f'"{escaped}"'


def _escape_char(c: str) -> str:
    if c in '\\"':
        return "\\" + c
    if c == "\n":
        return "\\n"
    if c == "\t":
        return "\\t"
    if ord(c) < 0x20 or ord(c) == 0x7F:
        return f"\\x{ord(c):02x}"
    return c


def format_command(words: Sequence[Word]) -> str:
    """A whole ``ExecStart=`` value."""
    return " ".join(quote_word(w) for w in words)


def format_seconds(seconds: float) -> str:
    """A systemd time span: ``30s``, ``20min``, ``2h``, ``1.5s``."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)}min"
    return f"{seconds:g}s"


def _assignment(name: str, value: str) -> str:
    """``Environment=`` value: quoted only when it must be; specifiers escaped."""
    text = f"{name}={value}".replace("%", "%%")
    if re.search(r"[\s'\"\\]", text):
        text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


# bringup run exits 128+15 when systemd stops it with SIGTERM: that is a stop, not a failure
# (without it a `systemctl stop` while loading leaves the unit failed, and Restart= restarts it).
STOPPED_BY_SIGTERM = 143

_KILL_MODE_NOTE = (
    "# KillMode=mixed: SIGTERM reaches bringup alone, which stops the server in order;\n"
    "# what is left after TimeoutStopSec= (engine workers) is SIGKILLed with the cgroup,\n"
    "# so no stale process keeps GPU memory when the unit starts again.\n"
)


def render_unit(spec: UnitSpec) -> str:
    """The ``NAME.service`` text for ``spec``."""
    lines = [
        f"# {spec.name}.service: written by `bringup unit`. Type=notify: READY=1 is sent",
        "# only after the model answered a smoke request, not when the process starts.",
    ]
    lines += [f"# {h}" for h in spec.header]
    if spec.secret_names:
        lines.append(
            f"# Secrets ({', '.join(spec.secret_names)}) are read from EnvironmentFile=, never written here."
        )
    lines += ["", "[Unit]", f"Description={spec.description.replace('%', '%%')}"]
    if not spec.user:
        lines += ["Wants=network-online.target", "After=network-online.target"]
    lines += [
        f"StartLimitIntervalSec={format_seconds(spec.start_limit_interval_seconds)}",
        f"StartLimitBurst={spec.start_limit_burst}",
        "",
        "[Service]",
        "Type=notify",
        "NotifyAccess=main",
    ]
    lines += _service_settings(spec)
    lines += [f"Environment={_assignment(k, v)}" for k, v in spec.environment]
    if spec.environment_file:
        lines.append(f"EnvironmentFile={spec.environment_file.replace('%', '%%')}")
    if spec.exec_start_pre:
        lines.append(f"ExecStartPre={format_command(spec.exec_start_pre)}")
    lines += [
        f"ExecStart={format_command(spec.exec_start)}",
        f"# bringup run exits {STOPPED_BY_SIGTERM} (128+SIGTERM) when stopped: a stop, not a failure.",
        f"SuccessExitStatus={STOPPED_BY_SIGTERM}",
        "Restart=on-failure",
        f"RestartSec={format_seconds(spec.restart_seconds)}",
        *([f"# {spec.timeout_start_note}"] if spec.timeout_start_note else []),
        f"TimeoutStartSec={format_seconds(spec.timeout_start_seconds)}",
        f"TimeoutStopSec={format_seconds(spec.timeout_stop_seconds)}",
    ]
    if spec.watchdog_seconds is not None:
        lines.append(f"WatchdogSec={format_seconds(spec.watchdog_seconds)}")
    lines += [_KILL_MODE_NOTE + "KillMode=mixed", "", "[Install]"]
    lines.append("WantedBy=default.target" if spec.user else "WantedBy=multi-user.target")
    return "\n".join(lines) + "\n"


def _service_settings(spec: UnitSpec) -> list[str]:
    """``User=``, ``Group=``, ``WorkingDirectory=``, ``LimitMEMLOCK=`` when set."""
    settings = (
        ("User", spec.run_as_user),
        ("Group", spec.run_as_group),
        ("WorkingDirectory", spec.working_directory),
        ("LimitMEMLOCK", spec.limit_memlock),
    )
    return [f"{key}={value.replace('%', '%%')}" for key, value in settings if value]


def render_env_file(name: str, secrets: Sequence[tuple[str, str]]) -> str:
    """The ``EnvironmentFile=`` text: one ``NAME='value'`` per secret."""
    lines = [f"# Secrets for {name}.service (EnvironmentFile=). Keep this file mode 0600."]
    for key, value in secrets:
        if not _ENV_NAME.match(key):
            raise UsageError(f"not a valid environment variable name: {key!r}")
        lines.append(f"{key}={_env_file_value(value)}")
    return "\n".join(lines) + "\n"


def env_file_differences(old: Mapping[str, str], new: Mapping[str, str]) -> tuple[str, ...]:
    """What differs between an existing env file and the one to write: key names only.

    >>> env_file_differences({"API_KEY": "a", "OLD": "x"}, {"API_KEY": "b", "HF_TOKEN": "t"})
    ('API_KEY differs', 'HF_TOKEN only in this unit', 'OLD only in the file')
    """
    out = []
    for key in sorted(set(old) | set(new)):
        if key not in old:
            out.append(f"{key} only in this unit")
        elif key not in new:
            out.append(f"{key} only in the file")
        elif old[key] != new[key]:
            out.append(f"{key} differs")
    return tuple(out)


def _env_file_value(value: str) -> str:
    if "'" not in value:
        return f"'{value}'"
    return '"' + re.sub(r'([\\"$`])', r"\\\1", value) + '"'


RETRY_DROPIN = "bringup-retry.conf"


def retry_dropin_path(name: str) -> str:
    """Where the retry drop-in goes, relative to the unit directory."""
    return f"{unit_name(name)}.service.d/{RETRY_DROPIN}"


def render_retry_dropin(exec_start: Sequence[Word], notes: Sequence[str] = ()) -> str:
    """A drop-in that resets ``ExecStart=`` and sets the retried command line."""
    lines = [
        "# Written by `bringup up --retry`; delete this file to return to the unit's ExecStart=."
    ]
    lines += [f"# {note}" for note in notes]
    lines += ["", "[Service]", "ExecStart=", f"ExecStart={format_command(exec_start)}"]
    return "\n".join(lines) + "\n"


def guard_command(
    bringup: str,
    *,
    max_used: str,
    timeout: str,
    kill_stale: bool,
    command: Sequence[Word],
    gpus_from: str | None = None,
) -> tuple[Word, ...]:
    """``ExecStartPre=``: the guard for the unit's GPUs (they come from the environment)."""
    words: list[Word] = [bringup, "guard", "--max-used", max_used, "--timeout", timeout]
    if gpus_from:
        words += ["--gpus-from", gpus_from]
    if kill_stale:
        words += ["--kill-stale", "--", *command]
    return tuple(words)


def run_command(
    bringup: str,
    command: Sequence[Word],
    *,
    gpus_from: str | None = None,
    model: str | None = None,
) -> tuple[Word, ...]:
    """``ExecStart=``: ``bringup run --notify [--model NAME] -- CMD``."""
    readings = ("--gpus-from", gpus_from) if gpus_from else ()
    named = ("--model", model) if model else ()
    return (bringup, "run", "--notify", *readings, *named, "--", *command)


def gpu_environment(gpus: str | None) -> tuple[tuple[str, str], ...]:
    """``CUDA_VISIBLE_DEVICES`` for ``--gpus``; indices in nvidia-smi (PCI bus) order."""
    if not gpus:
        return ()
    tokens = [t.strip() for t in gpus.split(",") if t.strip()]
    for token in tokens:
        if not (token.isdigit() or token.startswith(("GPU-", "MIG-"))):
            raise UsageError(f"--gpus: {token!r} is neither a GPU index nor a GPU-/MIG- UUID")
    env = [("CUDA_VISIBLE_DEVICES", ",".join(tokens))]
    if any(t.isdigit() for t in tokens):
        env.append(("CUDA_DEVICE_ORDER", "PCI_BUS_ID"))
    return tuple(env)


def environment_pairs(items: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Environment pairs in a stable (given) order, names checked."""
    for key in items:
        if not _ENV_NAME.match(key):
            raise UsageError(f"not a valid environment variable name: {key!r}")
    return tuple(items.items())
