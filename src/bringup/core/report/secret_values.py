"""The secrets of a report, through the detector the unit uses (``core.systemd_unit``): the
values of secret flags (``--api-key``, ``--hf-token``, ...) and variables (``HF_TOKEN``, ...),
and tokens known by their shape wherever they appear."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from bringup.core.systemd_unit import split_secrets

# token shapes of the services a server command names: Hugging Face, OpenAI-style keys,
# GitHub, AWS access keys, bearer headers
_TOKENS = re.compile(
    r"\bhf_[A-Za-z0-9]{20,}\b|\bsk-[A-Za-z0-9_-]{16,}\b|\bgh[pousr]_[A-Za-z0-9]{20,}\b"
    r"|\bAKIA[0-9A-Z]{16}\b|(?<=Bearer )[A-Za-z0-9._~+/=-]{8,}"
)


# a secret named by its key where an engine echoes its arguments: 'api_key': 'VALUE',
# api_key=VALUE, --api-key VALUE, HF_TOKEN=VALUE (the names the unit's detector knows)
_NAMED = re.compile(
    r"(?i)(?P<key>--[\w-]*(?:api-key|token|secret|password|passwd)(?:\s*=\s*|\s+)"
    r"|['\"]?[\w.-]*?(?:api[_-]?key|token|secret|password|passwd)['\"]?\s*[:=]\s*)"
    r"(?P<quote>['\"]?)(?P<value>(?![-[])[^'\"\s,;}\])]+)"
)


def find_secrets(argv: Sequence[str], environment: Iterable[tuple[str, str]] = ()) -> list[str]:
    """The secret values of a command line and environment."""
    split = split_secrets(list(argv), list(environment))
    return [value for _name, value in split.secret_environment]


def redact_text(text: str, mark: str = "[REDACTED]") -> str:
    """``text`` with every secret-shaped token replaced by ``mark``."""
    text = _TOKENS.sub(mark, text)
    return _NAMED.sub(
        lambda m: m.group("key") + m.group("quote") + _masked(m.group("value"), mark), text
    )


def _masked(value: str, mark: str) -> str:
    """``mark`` for a value; a value that is a reference (``${NAME}``, ``None``) stays."""
    if value == mark or value.startswith("$") or value in ("None", "null", "true", "false"):
        return value
    return mark
