"""Counts in words, the one place plurals are made: "1 tensor", "2 tensors", "1 is", "3 are"."""

from __future__ import annotations

_IRREGULAR = {"is": "are", "was": "were", "has": "have"}


def plural(n: float, noun: str, many: str | None = None) -> str:
    """``noun`` for one, else its plural (``many``, or ``noun`` + s / es).

    >>> plural(1, "tensor"), plural(2, "tensor"), plural(0, "process"), plural(2, "is")
    ('tensor', 'tensors', 'processes', 'are')
    """
    if n == 1:
        return noun
    if many is not None:
        return many
    if noun in _IRREGULAR:
        return _IRREGULAR[noun]
    if noun.endswith(("s", "x", "sh", "ch")):
        return noun + "es"
    return noun + "s"


def count(n: int, noun: str, many: str | None = None) -> str:
    """``"1 tensor"``, ``"1,024 tensors"``.

    >>> count(1, "slot"), count(4, "slot"), count(1200, "file")
    ('1 slot', '4 slots', '1,200 files')
    """
    return f"{n:,} {plural(n, noun, many)}"


def count_word(n: int, noun: str, *, verb: bool = False) -> str:
    """The noun for ``n`` things without the number, with ``is``/``are`` when ``verb``.

    >>> count_word(1, "flag", verb=True), count_word(2, "flag", verb=True)
    ('is a flag', 'are flags')
    """
    if not verb:
        return plural(n, noun)
    return f"is a {noun}" if n == 1 else f"are {plural(n, noun)}"
