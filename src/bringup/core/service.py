"""A systemd service as values: ``systemctl show`` text, the ``ExecStart=`` command line,
journal entries, and the one pure function that says where the service stands.

Used by ``bringup up`` (read the unit's command line, rewrite it for a retry) and
``bringup status`` (one look). The command-line syntax is ``systemd.service(5)``'s: words
split on whitespace, single or double quotes, C escapes, ``%%`` for ``%``, ``$$`` for ``$``,
``${NAME}``/``$NAME`` environment references, and the ``@-:+!`` executable prefixes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bringup.core import engine_args
from bringup.core.diagnosis import Diagnosis, Failure
from bringup.core.systemd_unit import EnvRef, Word
from bringup.core.vocab import Outcome

SHOW_PROPERTIES = (
    "LoadState",
    "ActiveState",
    "SubState",
    "MainPID",
    "NRestarts",
    "Result",
    "ExecMainStatus",
    "ExecMainCode",
    "InvocationID",
    "ActiveEnterTimestamp",
    "ExecStart",
    "Environment",
    "Restart",
    "StartLimitBurst",
    "StartLimitIntervalUSec",
)


_NO_MANAGER = (
    "has not been booted with systemd",  # PID 1 is not systemd (a container, a chroot, WSL)
    "Failed to connect to bus",  # no manager to talk to (no user session for --user)
    "Failed to connect to user scope bus",
)


def no_service_manager(stderr: str) -> str | None:
    """systemctl's line saying there is no systemd to ask, or None (any other failure).

    >>> no_service_manager("System has not been booted with systemd as init system (PID 1). Can't operate.\\nFailed to connect to bus: Host is down\\n")
    "System has not been booted with systemd as init system (PID 1). Can't operate."
    """
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for marker in _NO_MANAGER:
        for line in lines:
            if marker in line:
                return line
    return None


def parse_show(text: str) -> dict[str, str]:
    """``systemctl show`` output (``Key=value`` lines) as a dict."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key and key not in out:
            out[key] = value
    return out


@dataclass(frozen=True, slots=True)
class UnitState:
    """The unit's state as systemd reports it."""

    load_state: str
    active_state: str  # active | activating | deactivating | failed | inactive | reloading
    sub_state: str  # running | start | auto-restart | failed | dead | ...
    main_pid: int | None
    n_restarts: int | None
    result: str  # success | exit-code | signal | timeout | ...
    exec_main_status: int | None
    invocation_id: str
    restart: str = ""  # Restart=: no | on-failure | always | ...
    start_limit_burst: int | None = None
    start_limit_interval: str = ""  # as systemd prints it: "30min"

    @classmethod
    def from_show(cls, props: Mapping[str, str]) -> UnitState:
        """From ``parse_show`` output; absent numbers are None (0 PID means none)."""
        pid = _int(props.get("MainPID"))
        return cls(
            load_state=props.get("LoadState", ""),
            active_state=props.get("ActiveState", ""),
            sub_state=props.get("SubState", ""),
            main_pid=pid or None,
            n_restarts=_int(props.get("NRestarts")),
            result=props.get("Result", ""),
            exec_main_status=_int(props.get("ExecMainStatus")),
            invocation_id=props.get("InvocationID", ""),
            restart=props.get("Restart", ""),
            start_limit_burst=_int(props.get("StartLimitBurst")),
            start_limit_interval=props.get("StartLimitIntervalUSec", ""),
        )

    @property
    def start_limit_hit(self) -> bool:
        """Failed for good although Restart= would restart this result: systemd's start limit
        stopped it (systemd 252 still reports Result=exit-code, not start-limit-hit)."""
        restarts = {
            "always": {"exit-code", "signal", "core-dump", "timeout", "watchdog", "success"},
            "on-failure": {"exit-code", "signal", "core-dump", "timeout", "watchdog"},
            "on-abnormal": {"signal", "core-dump", "timeout", "watchdog"},
            "on-abort": {"signal", "core-dump"},
            "on-watchdog": {"watchdog"},
        }
        return self.active_state == "failed" and (
            self.result == "start-limit-hit" or self.result in restarts.get(self.restart, set())
        )


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "", "[not set]") else None
    except ValueError:
        return None


# -- ExecStart= -------------------------------------------------------------------------------

_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "s": " ",
    ";": ";",
}
_PREFIXES = "@-:+!"


def split_command(value: str) -> tuple[Word, ...]:
    """One ``ExecStart=`` value as words (see the module docstring); prefixes are dropped."""
    words: list[Word] = []
    i, n = 0, len(value)
    while i < n:
        while i < n and value[i].isspace():
            i += 1
        if i >= n:
            break
        word, i = _word(value, i)
        words.append(word)
    if words and isinstance(words[0], str):
        words[0] = words[0].lstrip(_PREFIXES)
    return tuple(words)


def _word(value: str, i: int) -> tuple[Word, int]:
    """The word starting at ``i`` and the index after it."""
    n = len(value)
    if value.startswith("${", i):
        end = value.find("}", i)
        if end > 0 and (end + 1 >= n or value[end + 1].isspace()):
            return EnvRef(value[i + 2 : end]), end + 1
    quote = value[i] if value[i] in "\"'" else ""
    i += 1 if quote else 0
    chars: list[str] = []
    while i < n:
        c = value[i]
        if quote and c == quote:
            return "".join(chars), i + 1
        if not quote and c.isspace():
            break
        if c == "\\" and i + 1 < n:
            i, text = _escape(value, i + 1)
            chars.append(text)
            continue
        if c in "%$" and value.startswith(c * 2, i):
            chars.append(c)
            i += 2
            continue
        chars.append(c)
        i += 1
    return "".join(chars), i


def _escape(value: str, i: int) -> tuple[int, str]:
    c = value[i]
    if c == "x" and i + 2 < len(value) + 1:
        try:
            return i + 3, chr(int(value[i + 1 : i + 3], 16))
        except ValueError:
            return i + 1, c
    if c == "\n":
        return i + 1, ""  # a continued line
    return i + 1, _ESCAPES.get(c, c)


def exec_start_from_cat(text: str) -> tuple[Word, ...] | None:
    """The effective ``ExecStart=`` from ``systemctl cat`` (unit then drop-ins, in order):
    an empty assignment resets, the last one wins; None when there is none."""
    current: str | None = None
    for line in text.replace("\\\n", " ").splitlines():
        stripped = line.strip()
        if stripped.startswith("ExecStart="):
            value = stripped[len("ExecStart=") :].strip()
            current = value or None
    return split_command(current) if current else None


def exec_start_from_show(value: str) -> tuple[Word, ...] | None:
    """``{ path=... ; argv[]=/usr/bin/x a b ; ... }`` from ``systemctl show -p ExecStart``.

    systemd joins argv with spaces here, so words with spaces cannot be recovered: a
    fallback for when ``systemctl cat`` is not available.
    """
    marker = "argv[]="
    if marker not in value:
        return None
    return tuple(value.split(marker, 1)[1].split(" ;", 1)[0].split())


def same_command(expected: Sequence[Word], actual: Sequence[str], *, joined: bool = False) -> bool:
    """Whether ``actual`` is the command line ``expected``: equal words, a ``${NAME}`` matching
    any one word (systemd fills it in). ``joined``: ``actual`` comes from ``systemctl show``,
    which joins argv with spaces, so words with spaces are compared split.

    >>> same_command(["vllm", "--api-key", EnvRef("API_KEY")], ["vllm", "--api-key", "sk-1"])
    True
    >>> same_command(["vllm", "--max-num-seqs", "256"], ["vllm", "--max-num-seqs", "1024"])
    False
    """
    want: list[str | None] = []
    for word in expected:
        if isinstance(word, EnvRef):
            want.append(None)
        elif joined:
            want.extend(word.split() or [""])
        else:
            want.append(word)
    if len(want) != len(actual):
        return False
    return all(w is None or w == a for w, a in zip(want, actual, strict=True))


def server_part(words: Sequence[Word]) -> tuple[int, int]:
    """Where the server command is in ``words``: after ``bringup run ... --`` when the unit
    wraps it, else the whole line. Returns the (start, end) slice."""
    texts = [w if isinstance(w, str) else "" for w in words]
    if (
        len(texts) > 1
        and texts[0].rsplit("/", 1)[-1] == "bringup"
        and texts[1] == "run"
        and "--" in texts
    ):
        return texts.index("--") + 1, len(texts)
    return 0, len(texts)


def set_server_flag(words: Sequence[Word], flag: str, value: str | None) -> tuple[Word, ...]:
    """``words`` with the server command's ``flag`` set (added when absent); ${NAME} kept."""
    start, end = server_part(words)
    refs: dict[str, EnvRef] = {}
    plain: list[str] = []
    for i, w in enumerate(words[start:end]):
        if isinstance(w, EnvRef):
            key = f"\x00env{i}"
            refs[key] = w
            plain.append(key)
        else:
            plain.append(w)
    changed = engine_args.set_flag(plain, flag, value)
    rebuilt: list[Word] = [refs.get(w, w) for w in changed]
    return (*words[:start], *rebuilt, *words[end:])


def server_argv(words: Sequence[Word]) -> list[str]:
    """The server command as plain strings (``${NAME}`` written as such), for reading flags."""
    start, end = server_part(words)
    return [w if isinstance(w, str) else "${" + w.name + "}" for w in words[start:end]]


def commands_from_show(value: str) -> list[list[str]]:
    """Every command of a ``systemctl show -p ExecStartPost`` (or ``ExecStartPre``) value:
    ``{ path=... ; argv[]=/usr/bin/x a b ; ... } ; { ... }``, each argv split on spaces."""
    return [part.split(" ;", 1)[0].split() for part in value.split("argv[]=")[1:]]


_PRELOAD = ("pull", "run")  # `ollama pull NAME`, `ollama run NAME`: a unit loading its model


def unit_model(
    exec_start: Sequence[Word] | None,
    env: Mapping[str, str],
    others: Sequence[Sequence[str]] = (),
) -> str | None:
    """The model a unit names for a server that loads it at the first request (Ollama):
    ``bringup run ... --model NAME --`` in ``ExecStart=`` (a ``${NAME}`` filled in from the
    unit's environment ``env``), else an ``ollama pull NAME`` / ``ollama run NAME`` among its
    other commands (``ExecStartPre=``/``ExecStartPost=``, ``others``). None when it names none.

    >>> unit_model(("/usr/bin/bringup", "run", "--model", EnvRef("M"), "--", "ollama", "serve"), {"M": "qwen3:0.6b"})
    'qwen3:0.6b'
    >>> unit_model(("ollama", "serve"), {}, [["/usr/bin/ollama", "pull", "llama3.2:1b"]])
    'llama3.2:1b'
    >>> unit_model(("ollama", "serve"), {"OLLAMA_MODELS": "/srv/models"}) is None
    True
    """
    if exec_start:
        start, _ = server_part(exec_start)
        if start:  # bringup run's own flags, before the `--`
            wrapper = [
                w if isinstance(w, str) else env.get(w.name, "") for w in exec_start[: start - 1]
            ]
            model = engine_args.get_flag(wrapper, "--model")
            if model:
                return model
    for argv in others:
        words = [w for w in argv if not w.startswith("-")]
        if (
            len(words) >= 3
            and words[0].rsplit("/", 1)[-1] == "ollama"
            and words[1] in _PRELOAD
            and "$" not in words[2]
        ):
            return words[2]
    return None


# -- the journal ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One ``journalctl -o json`` entry: its message lines and when it was logged."""

    message: str
    realtime_us: int | None  # __REALTIME_TIMESTAMP, microseconds since the epoch
    invocation_id: str
    pid: int | None


def parse_journal(text: str) -> list[JournalEntry]:
    """``journalctl -o json`` output (one object a line); lines that are not entries are skipped."""
    out: list[JournalEntry] = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            message = _message(entry.get("MESSAGE"))
            if message is not None:
                out.append(
                    JournalEntry(
                        message,
                        _int(str(entry.get("__REALTIME_TIMESTAMP", ""))),
                        str(entry.get("_SYSTEMD_INVOCATION_ID", "")),
                        _int(str(entry.get("_PID", ""))),
                    )
                )
    return out


def parse_environment(text: str) -> dict[str, str]:
    r"""An ``EnvironmentFile=`` (``NAME=value`` lines, ``#`` comments, single or double quotes,
    backslash escapes in double quotes) or ``systemctl show -p Environment`` (space-separated
    assignments, quoted when they hold spaces) as a dict; later assignments win.

    >>> parse_environment("# secrets\nAPI_KEY='sk-1'\nHF_TOKEN=\"a b\"\n")
    {'API_KEY': 'sk-1', 'HF_TOKEN': 'a b'}
    """
    out: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", ";")):
            continue
        i = 0
        while i < len(stripped):
            word, i = _env_word(stripped, i)
            key, sep, value = word.partition("=")
            if sep and key and (key.replace("_", "a").isalnum() and not key[0].isdigit()):
                out[key] = value
    return out


def _env_word(text: str, i: int) -> tuple[str, int]:
    """One whitespace-separated assignment starting at ``i``, quotes removed."""
    while i < len(text) and text[i].isspace():
        i += 1
    chars: list[str] = []
    quote = ""
    while i < len(text):
        c = text[i]
        if quote:
            if c == quote:
                quote = ""
            elif c == "\\" and quote == '"' and i + 1 < len(text):
                i += 1
                chars.append(text[i])
            else:
                chars.append(c)
        elif c in "'\"":
            quote = c
        elif c.isspace():
            break
        else:
            chars.append(c)
        i += 1
    return "".join(chars), i + 1


OWN_PREFIX = "bringup:"


def is_own_line(line: str) -> bool:
    """A line ``bringup run`` itself wrote into the unit's journal (its plain output: phases,
    probes, the verdict and the root cause it quotes), not one of the server's. The journal
    of a unit written by ``bringup unit`` holds both; only the server's are evidence, and
    ``bringup: error:`` (the guard or run refusing to start) is evidence too."""
    return line.startswith(OWN_PREFIX) and not line.startswith(f"{OWN_PREFIX} error:")


def _message(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, int) for b in value):
        return bytes(b & 0xFF for b in value).decode("utf-8", errors="replace")
    return None


# -- where the service stands ----------------------------------------------------------------


class Verdict(StrEnum):
    """``bringup status``'s answer, with its exit code."""

    READY = "ready"  # active and the model answers: exit 0
    FAILED = (
        "failed"  # failed, a root cause in the current invocation, or active but not answering: 1
    )
    STARTING = "starting"  # activating (or auto-restarting) and no failure yet: 3
    UNKNOWN = "unknown"  # not loaded, inactive, or no way to ask the model: 3

    @property
    def exit_code(self) -> int:
        return {"ready": 0, "failed": 1}.get(self.value, 3)


def error_report(subject: Mapping[str, str | None], asked: str, error: str) -> dict[str, Any]:
    """``status --json`` when ``asked`` (the service manager, docker) could not be asked:
    ``subject`` (``{"unit": ...}`` or ``{"container": ..., "unit": None}``), then every field
    of a look, empty, with the reason in ``error``. One shape for units and containers."""
    return {
        **subject,
        "verdict": Verdict.UNKNOWN.value,
        "why": f"could not ask {asked}: {error}",
        "state": None,
        "phase": None,
        "failure": None,
        "ready_since": None,
        "engine": None,
        "url": None,
        "probe": None,
        "gpus": [],
        "gpu_note": None,
        "error": error,
    }


@dataclass(frozen=True, slots=True)
class Look:
    """The facts of one look, gathered by the adapters."""

    state: UnitState
    diagnosis: Diagnosis | None  # of the current invocation's journal
    answers: bool | None  # the smoke request succeeded; None when not asked


def derive(look: Look) -> tuple[Verdict, str]:
    """The verdict and one line saying why."""
    s = look.state
    failure: Failure | None = look.diagnosis.failure if look.diagnosis is not None else None
    if s.load_state == "not-found":
        return Verdict.UNKNOWN, "the unit is not loaded (no such unit)"
    if s.active_state == "failed":
        why = f"the unit failed ({s.result or 'no result'})"
        if s.start_limit_hit:
            burst = f"{s.start_limit_burst} starts" if s.start_limit_burst else "its starts"
            within = f" within {s.start_limit_interval}" if s.start_limit_interval else ""
            why += (
                f"; systemd will not restart it: its start limit ({burst}{within}) was hit; "
                "fix the cause, then `systemctl reset-failed` it before starting it again"
            )
        return Verdict.FAILED, why
    if (
        failure is not None
        and look.diagnosis is not None
        and look.diagnosis.outcome is Outcome.FAILED
    ):
        return Verdict.FAILED, f"{failure.failure_class} during {failure.phase} in the current run"
    if s.active_state == "active":
        if look.answers is True:
            return Verdict.READY, "active, and the model answered a smoke request"
        if look.answers is False:
            return Verdict.FAILED, "active, but the model does not answer"
        return Verdict.UNKNOWN, "active; the model was not asked"
    if s.active_state in ("activating", "reloading") or s.sub_state == "auto-restart":
        return Verdict.STARTING, f"still starting ({s.active_state}/{s.sub_state})"
    return Verdict.UNKNOWN, f"not running ({s.active_state or 'no state'}/{s.sub_state or '-'})"
