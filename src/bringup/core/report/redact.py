"""What a report must not carry: secrets always, host names and home paths on request.

Secrets are found by the detector the unit uses (``core.secrets``: the values of secret
flags and variables in the command line, whatever wraps it, and in the environment; tokens by
their shape and secret-named values anywhere in a text); every place such a value appears is
then replaced, the log included, since engines echo their arguments. ``--redact-hosts`` also takes out IP addresses, the names of the hosts
involved (given by the caller: this machine, the nodes, the URL's host), hosts in URLs and
``user@host``, and home folders (``/home/alice/x`` -> ``~/x``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bringup.core import secrets

SECRET = secrets.REDACTED
HOST = "[host]"
ADDRESS = "[ip]"

_IPV4 = re.compile(
    r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\w.])"
)
# an IPv6 address: eight groups, or fewer with one "::", at least one hex group beside it
_IPV6 = re.compile(
    r"(?<![\w:])(?:(?:[0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}"
    r"|(?:[0-9a-fA-F]{1,4}:){1,6}:(?:[0-9a-fA-F]{1,4}:){0,5}[0-9a-fA-F]{1,4}"
    r"|(?:[0-9a-fA-F]{1,4}:){1,7}:|::(?:[0-9a-fA-F]{1,4}:){0,6}[0-9a-fA-F]{1,4})(?![\w:])"
)
_URL_HOST = re.compile(
    r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)(?P<user>[^@/\s]*@)?(?P<host>[^/:\s\]\[]+)"
)
_USER_AT = re.compile(r"(?<![\w.-])(?P<user>[A-Za-z_][\w.-]*)@(?P<host>[A-Za-z0-9][\w.-]*)")
_HOME = re.compile(r"(?:/home|/Users)/[^/\s'\"]+|(?<![\w.-])/root(?=/|\b)")
_WHOLE_WORD_BELOW = 4
_LOCAL = frozenset({"localhost", "127.0.0.1", "0.0.0.0", "::1", "::"})


@dataclass(frozen=True)
class Redactor:
    """Replaces the given secret values and secret-shaped tokens (and, with ``hosts``, the
    host names, addresses and home folders) in any text of a report."""

    values: tuple[str, ...] = ()  # literal secrets: longest first
    host_names: tuple[str, ...] = ()
    hosts: bool = False

    def text(self, text: str) -> str:
        """``text`` with every secret (and, with ``hosts``, every host) taken out."""
        for value in self.values:
            if len(value) < _WHOLE_WORD_BELOW:  # only where it stands alone, or it eats words
                text = re.sub(rf"(?<![\w-]){re.escape(value)}(?![\w-])", SECRET, text)
        text = secrets.redact_text(text, self.values)
        if self.hosts:
            text = self._hosts(text)
        return text

    def argv(self, argv: Sequence[str]) -> tuple[str, ...]:
        """The command line with each secret value replaced (its flag kept)."""
        return tuple(self.text(word) for word in argv)

    def _hosts(self, text: str) -> str:
        for name in self.host_names:
            text = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", HOST, text)
        text = _URL_HOST.sub(_url_host, text)
        text = _USER_AT.sub(lambda m: f"[user]@{HOST}", text)
        text = _IPV4.sub(_address, text)
        text = _IPV6.sub(_address, text)
        return _HOME.sub("~", text)


def _url_host(m: re.Match[str]) -> str:
    host = m.group("host")
    user = "[user]@" if m.group("user") else ""
    return m.group("scheme") + user + (host if host in _LOCAL else HOST)


def _address(m: re.Match[str]) -> str:
    return m.group(0) if m.group(0) in _LOCAL else ADDRESS


def redactor(
    argv: Sequence[str],
    environment: Iterable[tuple[str, str]] = (),
    *,
    hosts: bool = False,
    host_names: Iterable[str] = (),
    extra: Iterable[str] = (),
) -> Redactor:
    """The redactor of one report: the secrets of ``argv`` and ``environment`` (and ``extra``
    ones, e.g. bringup's own --api-key), and with ``hosts`` the names in ``host_names``."""
    found = {s.value for s in secrets.find_secrets(list(argv)) if s.value}
    found.update(v for k, v in environment if v and secrets.is_secret_name(k))
    found.update(v for v in extra if v)
    names = {n for n in host_names if n and n not in _LOCAL}
    return Redactor(
        values=tuple(sorted(found, key=len, reverse=True)),
        host_names=tuple(sorted(names, key=len, reverse=True)),
        hosts=hosts,
    )
