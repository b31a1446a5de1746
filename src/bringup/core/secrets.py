"""Secrets in a command line, whatever wraps it, and in free text (logs, reports).

The one detector every writer of text uses (the unit writer, reports):

- ``find_secrets(argv)``: each secret the command holds, as ``Secret(name, value, where,
  index)``; never raises.
- ``split_secrets(argv)``: ``Split(argv, env)``, the command with every secret value taken
  out (``${NAME}`` where the command needs it as a word) and ``env``, the variables that
  carry them. Raises ``UsageError`` (one line, no value in it) when a secret cannot be
  moved safely.
- ``redact_text(text, known=())``: ``text`` with secret values replaced by ``<redacted>``.

What counts as a secret (general rules, not a list of tools): the value of a flag named
like a key, token, secret or password (``--api-key``, ``--hf-token``, ``--admin-password``;
``--api-key-file`` and ``--max-num-batched-tokens`` are not); a variable named like
``*_TOKEN``, ``*_KEY``, ``*_SECRET``, ``*PASSWORD*``; and a value shaped like a published
token format (Hugging Face ``hf_``, OpenAI/Anthropic ``sk-``, GitHub ``ghp_``/``github_pat_``,
Slack ``xox?-``, GitLab ``glpat-``) whatever its name. Where it may sit: ``NAME=VALUE``
before the command or after ``env``/``sudo``, flags anywhere, ``docker|podman run -e
NAME=VALUE`` (``--env``, ``--env=``, ``-eNAME=``; ``--env-file FILE`` names a file, see
``env_files``), and inside ``sh|bash -c 'STRING'`` (split as the shell would).

How a secret is moved: an assignment is dropped (the unit's ``EnvironmentFile=`` sets the
variable, and ``env``/``nice``/``numactl``… pass it on); a flag value becomes ``${NAME}``;
``docker -e NAME=VALUE`` becomes ``-e NAME`` (docker copies the value from its own
environment); in a shell string the value becomes ``"${NAME}"`` (the shell expands it).
``sudo`` resets the environment, so an assignment after it cannot be moved: refused.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from bringup.core import wrappers as wr
from bringup.core.systemd_unit import EnvRef, Word
from bringup.errors import UsageError

REDACTED = "<redacted>"
_ANOTHER_WAY = (
    "it cannot be moved out of the command line: give the program the secret another way "
    "(an environment variable through --env NAME=VALUE, or a file it reads)"
)

_SECRET_FLAG = re.compile(r"(^|-)(api-key|apikey|token|secret|password|passwd)$")
_SECRET_NAME = re.compile(r"((^|_)(TOKEN|KEY|APIKEY|SECRET)$)|PASSWORD|PASSWD")
_NOT_SECRET_NAME = re.compile(r"^(BOS|EOS|PAD|UNK|SEP|CLS|MASK|START|END|STOP)_TOKEN$")
_TOKEN_SHAPES = (
    r"hf_[A-Za-z0-9]{30,}",
    r"sk-(?:proj-|ant-|svcacct-)?[A-Za-z0-9_-]{20,}",
    r"gh[pousr]_[A-Za-z0-9]{30,}",
    r"github_pat_[A-Za-z0-9_]{30,}",
    r"xox[abprs]-[A-Za-z0-9-]{10,}",
    r"glpat-[A-Za-z0-9_-]{20,}",
)
_TOKEN = re.compile("^(?:" + "|".join(_TOKEN_SHAPES) + ")$")
_TOKEN_IN_TEXT = re.compile("(?<![A-Za-z0-9_-])(?:" + "|".join(_TOKEN_SHAPES) + ")")


def is_secret_flag(flag: str) -> bool:
    """``--api-key``, ``--hf-token``, ``--admin-password`` … (not ``--api-key-file``)."""
    return bool(_SECRET_FLAG.search(flag.lstrip("-").lower().replace("_", "-")))


def is_secret_name(name: str) -> bool:
    """``HF_TOKEN``, ``OPENAI_API_KEY``, ``AWS_SECRET``, ``DB_PASSWORD_FILE`` …"""
    upper = name.upper().replace("-", "_").replace(".", "_")
    return bool(_SECRET_NAME.search(upper)) and not _NOT_SECRET_NAME.match(upper)


def is_token(value: str) -> bool:
    """A value in a published token format (``hf_…``, ``sk-…``, ``ghp_…``)."""
    return bool(_TOKEN.match(value))


@dataclass(frozen=True, slots=True)
class Secret:
    """One secret in a command line: the variable that carries it once moved, its value,
    how it was given (``--api-key``, ``HF_TOKEN=… before the command``, ``docker -e
    HF_TOKEN``, ``inside bash -c: --api-key``) and the index of the word holding it."""

    name: str
    value: str
    where: str
    index: int


class Split(NamedTuple):
    """A command with its secrets taken out, and the variables that now carry them."""

    argv: tuple[Word, ...]
    env: dict[str, str]


def find_secrets(argv: Sequence[Word]) -> list[Secret]:
    """Every secret in ``argv``, in order (see the module docstring)."""
    return _walked(argv).secrets


def split_secrets(argv: Sequence[Word]) -> Split:
    """``argv`` with every secret value replaced, and the variables holding them.

    >>> split_secrets(["env", "HF_TOKEN=hf_x", "vllm", "serve", "m", "--api-key", "sk-1"])
    Split(argv=('env', 'vllm', 'serve', 'm', '--api-key', EnvRef(name='API_KEY')), env={'HF_TOKEN': 'hf_x', 'API_KEY': 'sk-1'})
    """
    walk = _walked(argv)
    if walk.problems:
        message, hint = walk.problems[0]
        raise UsageError(message, hint=hint)
    words: list[Word] = []
    for i, word in enumerate(walk.words):
        words.extend(walk.edits.get(i, [word]))
    return Split(tuple(words), dict(walk.names))


def env_files(argv: Sequence[Word]) -> tuple[int, ...]:
    """The indices of the words naming a file of secrets the command reads itself
    (``docker run --env-file FILE``; the word is ``--env-file=FILE`` in that form)."""
    return tuple(_walked(argv).files)


def _walked(argv: Sequence[Word]) -> _Walk:
    walk = _Walk(argv)
    walk.command(0, keeps_environment=True)
    return walk


class _Walk:
    """One pass over a command line: the secrets, their names, and the edits moving them."""

    def __init__(self, argv: Sequence[Word]) -> None:
        self.words: list[Word] = list(argv)
        self.secrets: list[Secret] = []
        self.names: dict[str, str] = {}
        self.edits: dict[int, list[Word]] = {}
        self.problems: list[tuple[str, str]] = []  # (what cannot be moved, how to fix it)
        self.files: list[int] = []

    def add(self, index: int, base: str, value: str, where: str, *, fixed: bool) -> str | None:
        """Record a secret; the variable's name (``fixed`` names cannot be renumbered)."""
        if not value or value.startswith("$") or value == REDACTED:
            return None  # empty, or already a reference
        name, n = base, 1
        while name in self.names and self.names[name] != value:
            if fixed:
                self.problems.append(
                    (f"{base} is given twice with different values", "keep one of them")
                )
                return None
            n += 1
            name = f"{base}_{n}"
        self.names[name] = value
        self.secrets.append(Secret(name, value, where, index))
        return name

    def command(self, i: int, *, keeps_environment: bool) -> None:
        """The command at ``i``: assignments, wrappers, then what the executable is."""
        n = len(self.words)
        i = self.assignments(i, keeps_environment, "before the command")
        while i < n and (wrapper := wr.WRAPPERS.get(wr.base_name(self.words[i]))) is not None:
            name = wr.base_name(self.words[i])
            j = wr.after_options(self.words, i + 1, wrapper)
            self.plain(i + 1, n if j is None else j)
            if j is None:
                return
            keeps_environment = keeps_environment and not wrapper.resets_environment
            i = (
                self.assignments(j, keeps_environment, f"after {name}")
                if wrapper.assignments
                else j
            )
        if i >= n:
            return
        exe = wr.base_name(self.words[i])
        at = wr.shell_string(self.words, i) if exe in wr.SHELLS else None
        if at is not None:
            self.plain(i + 1, at)
            self.shell(at, exe)
            self.plain(at + 1, n)
        elif exe in wr.CONTAINER_CLIS:
            self.container(i + 1, exe)
        else:
            self.plain(i + 1, n)

    def assignments(self, i: int, keeps_environment: bool, where: str) -> int:
        """``NAME=VALUE`` words from ``i``: secret ones are dropped (the env file sets them)."""
        while i < len(self.words) and wr.is_assignment(word := self.words[i]):
            assert isinstance(word, str)
            key, value = word.split("=", 1)
            if is_secret_name(key) or is_token(value):
                name = self.add(i, key, value, f"{key}=… {where}", fixed=True)
                if name is not None and keeps_environment:
                    self.edits[i] = []
                elif name is not None:
                    self.problems.append(
                        (
                            (
                                f"{key}=… {where}: the command there does not see the unit's "
                                "environment (sudo resets it), so the secret cannot go there"
                            ),
                            "use `bringup unit --run-as USER` instead of sudo",
                        )
                    )
            i += 1
        return i

    def plain(self, start: int, end: int, skip: frozenset[int] = frozenset()) -> None:
        """Flags and token-shaped words of an ordinary command, words ``start`` to ``end``."""
        i = start
        while i < end:
            word = self.words[i]
            following = self.words[i + 1] if i + 1 < end else None
            if i in skip or not isinstance(word, str):
                i += 1
            elif word.startswith("-") and "=" in word:
                self.flag_value(i, *word.split("=", 1))
                i += 1
            elif (
                word.startswith("-")
                and is_secret_flag(word)
                and isinstance(following, str)
                and not following.startswith("-")
                and i + 1 not in skip
            ):
                name = self.add(i + 1, _flag_name(word), following, word, fixed=False)
                if name is not None:
                    self.edits[i + 1] = [EnvRef(name)]
                i += 2
            else:
                self.bare(i, word, self.words[i - 1] if i > start else None)
                i += 1

    def flag_value(self, i: int, flag: str, value: str) -> None:
        """``--flag=VALUE``: a secret when the flag is named like one or the value looks it."""
        if is_secret_flag(flag) or is_token(value):
            name = self.add(i, _flag_name(flag), value, flag, fixed=False)
            if name is not None:
                self.edits[i] = [flag, EnvRef(name)]

    def bare(self, i: int, word: str, before: Word | None) -> None:
        """A word that is no flag: a token-shaped value, or a ``NAME=secret`` argument."""
        if is_token(word):
            flag = before if isinstance(before, str) and before.startswith("-") else None
            name = self.add(i, _flag_name(flag) if flag else _token_name(word), word,
                            flag or "a token-shaped word", fixed=False)  # fmt: skip
            if name is not None:
                self.edits[i] = [EnvRef(name)]
        elif inside := _TOKEN_IN_TEXT.findall(word):
            for value in inside:
                self.add(i, _token_name(value), value, "a token inside a word", fixed=False)
            self.problems.append(
                (f"word {i} of the command holds a token inside other text", _ANOTHER_WAY)
            )
        elif wr.is_assignment(word):
            key, value = word.split("=", 1)
            if (is_secret_name(key) or is_token(value)) and self.add(
                i, key, value, f"{key}=… as an argument", fixed=False
            ):
                self.problems.append(
                    (
                        (
                            f"{key}=… is an argument of the command (word {i}), not an "
                            "environment variable: its value cannot be moved out of the command line"
                        ),
                        _ANOTHER_WAY,
                    )
                )

    def container(self, start: int, exe: str) -> None:
        """``docker|podman [...] run OPTIONS IMAGE CMD``: ``-e NAME=VALUE`` keeps ``-e NAME``
        (the CLI copies the value from its environment); ``--env-file`` is recorded."""
        handled: set[int] = set()
        for i in range(start, len(self.words)):
            word = self.words[i]
            if not isinstance(word, str) or i in handled:
                continue
            if word in ("-e", "--env") and i + 1 < len(self.words):
                self.container_env(i + 1, "", exe)
                handled |= {i, i + 1}
            elif word.startswith("--env=") or (word.startswith("-e") and word[2:3].isalpha()):
                prefix = "--env=" if word.startswith("--env=") else "-e"
                self.container_env(i, prefix, exe)
                handled.add(i)
            elif word == "--env-file" and i + 1 < len(self.words):
                self.files.append(i + 1)
                handled |= {i, i + 1}
            elif word.startswith("--env-file="):
                self.files.append(i)
                handled.add(i)
        self.plain(start, len(self.words), frozenset(handled))

    def container_env(self, i: int, prefix: str, exe: str) -> None:
        word = self.words[i]
        if not isinstance(word, str) or "=" not in word[len(prefix) :]:
            return
        key, value = word[len(prefix) :].split("=", 1)
        if (is_secret_name(key) or is_token(value)) and self.add(
            i, key, value, f"{exe} -e {key}", fixed=True
        ):
            self.edits[i] = [prefix + key]

    def shell(self, i: int, exe: str) -> None:
        """``sh -c STRING``: the string's secrets become ``"${NAME}"`` for the shell to expand."""
        text = self.words[i]
        assert isinstance(text, str)
        tokens = _shell_words(text) or []
        inner = _Walk(tokens)
        for segment in _segments(tokens):
            inner.command(segment, keeps_environment=True)
        moved = text
        for secret in inner.secrets:
            name = self.add(i, secret.name, secret.value, f"inside {exe} -c: {secret.where}",
                            fixed=False)  # fmt: skip
            if name is not None:
                moved = _replace_in_shell(moved, secret.value, name)
        if _same_shell_words(text, moved, self.names) and redact_text(moved) == moved:
            if moved != text:
                self.edits[i] = [moved]
        else:
            self.problems.append(
                (
                    f"the secrets inside `{exe} -c` cannot be moved out of the string safely",
                    'give them with --env NAME=VALUE and write "$NAME" in the string',
                )
            )


def _segments(tokens: Sequence[str]) -> list[int]:
    """Where each command of a shell string starts (after ``;``, ``&&``, ``||``, ``|``)."""
    return [0] + [i + 1 for i, t in enumerate(tokens) if t in (";", "&&", "||", "|", "&")]


def _shell_words(text: str) -> list[str] | None:
    """The words a POSIX shell splits ``text`` into, ``;``, ``&&``, ``|``… as words of their
    own; None when the quotes do not balance."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:
        return None


def _replace_in_shell(text: str, value: str, name: str) -> str:
    """``value`` as a whole shell word (bare, quoted, or after ``=``) → ``"${name}"``."""
    escaped = re.escape(value)
    pattern = rf"(?<![^\s=])(?:'{escaped}'|\"{escaped}\"|{escaped})(?![^\s;&|)])"
    return re.sub(pattern, lambda _: '"${' + name + '}"', text)


def _same_shell_words(before: str, after: str, names: dict[str, str]) -> bool:
    """The shell splits ``after`` into ``before``'s words once each ``${NAME}`` is filled
    in, and no secret value is left in it."""
    if any(value in after for value in names.values()):
        return False
    old, new = _shell_words(before), _shell_words(after)
    if old is None or new is None:
        return False
    filled = []
    for token in new:
        for name, value in names.items():
            token = token.replace("${" + name + "}", value)
        filled.append(token)
    return filled == old


def _flag_name(flag: str) -> str:
    """``--api-key`` → ``API_KEY``."""
    return re.sub(r"[^A-Z0-9]+", "_", flag.lstrip("-").upper()).strip("_") or "SECRET"


def _token_name(value: str) -> str:
    if value.startswith("hf_"):
        return "HF_TOKEN"
    if value.startswith("sk-"):
        return "API_KEY"
    return "SECRET"


# -- free text ---------------------------------------------------------------------------------

_VALUE = r"(?P<value>'[^'\n]*'|\"[^\"\n]*\"|\[[^\]\n]*\]|[^\s,;}\]'\"]+)"
_FLAG_IN_TEXT = re.compile(r"(?P<key>--[A-Za-z0-9_-]+)(?P<sep>=|[ \t]+)" + _VALUE)
_NAMED_IN_TEXT = re.compile(
    r"(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>['\"]?[ \t]*[:=][ \t]*)" + _VALUE
)
_BEARER = re.compile(r"(?i)(?P<key>\bbearer)(?P<sep>[ \t]+)(?P<value>[A-Za-z0-9._~+/=-]{8,})")
_URL_PASSWORD = re.compile(r"(?P<key>://[^/\s:@]+)(?P<sep>:)(?P<value>[^/\s@]+)(?=@)")


def redact_text(text: str, known: Iterable[str] = ()) -> str:
    """``text`` with every secret value replaced by ``<redacted>``: the ``known`` values
    (from ``find_secrets`` of the command, say), token-shaped words, the values of
    secret-named flags and variables (``--api-key X``, ``HF_TOKEN=X``, ``'api_key': 'X'``),
    ``Bearer X`` and the password in ``scheme://user:password@host``.

    >>> redact_text("non-default args: {'api_key': 'sk-1', 'port': 8000} HF_TOKEN=abc")
    "non-default args: {'api_key': '<redacted>', 'port': 8000} HF_TOKEN=<redacted>"
    """
    for value in sorted({v for v in known if len(v) >= 4}, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    text = _TOKEN_IN_TEXT.sub(REDACTED, text)
    text = _FLAG_IN_TEXT.sub(lambda m: _redacted(m, is_secret_flag(m["key"])), text)
    text = _NAMED_IN_TEXT.sub(lambda m: _redacted(m, is_secret_name(m["key"])), text)
    text = _BEARER.sub(lambda m: _redacted(m, True), text)
    return _URL_PASSWORD.sub(lambda m: _redacted(m, True), text)


def _redacted(match: re.Match[str], secret: bool) -> str:
    value = match["value"]
    inner = value.strip("'\"[]")
    if not secret or not inner or inner.startswith(("$", "-", '"$', "'$")) or REDACTED in value:
        return match[0]
    quote = value[0] if value[0] in "'\"" else ""
    opened = "[" + quote if value.startswith("[") else quote
    closed = quote + "]" if value.startswith("[") else quote
    if value.startswith("["):
        inner_quote = value[1:2] if value[1:2] in ("'", '"') else ""
        opened, closed = "[" + inner_quote, inner_quote + "]"
    return f"{match['key']}{match['sep']}{opened}{REDACTED}{closed}"
