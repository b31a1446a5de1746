"""A message's template as stored, and the pattern a log line of it matches: literal text
escaped, each value the program fills in a lazy wildcard (``.*?``); none when there is too
little literal text to tell its lines from others."""

from __future__ import annotations

import re

import message_extract as mx

MIN_LITERAL = 14  # the longest literal run of a pattern; a shorter one matches too many lines
MIN_WORDS = 3  # words in the pattern's literal text


def template_text(template: mx.Template) -> str:
    """The template as stored: ``{}`` for a value, literal braces doubled."""
    return "".join("{}" if p is None else p.replace("{", "{{").replace("}", "}}") for p in template)


def parse_template(text: str) -> mx.Template:
    """The inverse of :func:`template_text`."""
    return mx.normalise(mx.split_braces(text))


def readable(template: mx.Template) -> str:
    """The message's text with its values shown as ``…`` (what the mapping reads)."""
    return "".join("…" if p is None else p for p in template)


def _lines(template: mx.Template) -> list[list[mx.Part]]:
    lines: list[list[mx.Part]] = [[]]
    for part in template:
        if part is None:
            lines[-1].append(None)
            continue
        pieces = part.split("\n")
        lines[-1].append(pieces[0])
        lines.extend([piece] for piece in pieces[1:])
    return lines


def _literal_len(parts: list[mx.Part]) -> int:
    return sum(len(p.strip()) for p in parts if p is not None)


def pattern_of(template: mx.Template) -> tuple[str | None, str]:
    """(the regex a log line of this message matches, why not when None).

    One line of a multi-line message is one log line: the first line (it follows the
    exception's type, or the logger's header), unless another has more literal text and the
    first too little. Values at its ends are dropped, values inside become ``.*?``.
    """
    lines = _lines(template)
    first = _trim(lines[0]) if lines else []
    best = first if _enough(first) else _trim(max(lines, key=_literal_len)) if lines else []
    literals = [p for p in best if p is not None]
    if not literals:
        return None, "no literal text (the whole message is a value)"
    if not _enough(best):
        longest = max(len(p.strip()) for p in literals)
        n = words(" ".join(literals))
        return None, f"too little literal text to be recognised ({longest} chars, {n} words)"
    return "".join(".*?" if part is None else re.escape(part) for part in best), ""


_QUOTES = "'\"`"


def _unquote(line: list[mx.Part]) -> list[mx.Part]:
    """The quotes around a value are the value's (one version writes '{}', another `{}`)."""
    out = list(line)
    for i, part in enumerate(out):
        if part is None:
            continue
        if i + 1 == len(out) or out[i + 1] is None:
            part = part.rstrip(_QUOTES)
        if i == 0 or out[i - 1] is None:
            part = part.lstrip(_QUOTES)
        out[i] = part
    return list(mx.normalise(out))


def _trim(line: list[mx.Part]) -> list[mx.Part]:
    """A line without the values and spaces at its ends, and the quotes around its values."""
    best = _unquote(list(mx.normalise(line)))
    while best and (best[0] is None or not str(best[0]).strip()):
        best.pop(0)
    while best and (best[-1] is None or not str(best[-1]).strip()):
        best.pop()
    if best and isinstance(best[0], str):
        best[0] = best[0].lstrip()
    if best and isinstance(best[-1], str):
        best[-1] = best[-1].rstrip()
    return best


# the words of a text: letter runs, a camelCase name's parts apart (``cuDeviceGetCount`` names
# four: an API call is as telling as a phrase)
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]{2,}(?![a-z])|[A-Z][a-z]*")


def words(text: str) -> int:
    return sum(len(_WORD.findall(run)) for run in re.findall(r"[A-Za-z]{2,}", text))


def _enough(line: list[mx.Part]) -> bool:
    """Whether a line has literal text enough to tell it from other lines."""
    literals = [p.strip() for p in line if p is not None]
    if not literals:
        return False
    return max(len(p) for p in literals) >= MIN_LITERAL and words(" ".join(literals)) >= MIN_WORDS
