"""Failure messages from engine source files, as templates (used by ``engine_messages.py``).

A template is a tuple of parts: a string is literal text, ``None`` is a value the program fills
in (an f-string field, a ``%s``/``{}``/``%v`` conversion, a variable not resolved). Nothing of the
source is kept but these templates and where they are (file, line, function, the kind of site).

- Python (``ast``): ``raise X(msg, ...)`` with a message, and calls ``logger.error/fatal/
  exception/critical(msg, ...)``; ``logger.warning(...)`` only when its text names a resource
  limit (memory, KV cache, shared memory, a timeout...). A message given as a local variable is
  resolved from the assignment before it in the same function (``msg = f"..."; raise
  ValueError(msg)``). Bare ``raise``, ``raise X`` and ``raise X()`` print no message of their
  own and are not listed; ``assert`` is not listed.
- Rust (regular expressions over the text): ``panic!``, ``bail!``, ``anyhow!``,
  ``tracing::error!``/``error!``, ``#[error("...")]`` (thiserror: what ``Err(Variant)``
  prints) and ``Err(...("..."))`` with a string literal.
- C/C++: ``LLAMA_LOG_ERROR``, ``LOG_ERR``, ``GGML_LOG_ERROR``, ``GGML_ABORT``, ``throw
  std::runtime_error/invalid_argument/out_of_range(...)`` with a literal or ``format(...)``.
- Go: ``fmt.Errorf``, ``errors.New``, ``slog.Error``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass

Part = str | None
Template = tuple[Part, ...]


@dataclass(frozen=True)
class Site:
    """One place in the source that can print a failure."""

    file: str  # relative to the source root
    line: int
    function: str  # the enclosing function ("" at module level, or unknown)
    kind: str  # raise | log.error | log.warning | panic | bail | errorf | throw | ...
    type: str  # the exception type, or the logger level / macro
    template: Template


# -- templates ---------------------------------------------------------------------------------


def normalise(parts: list[Part]) -> Template:
    """Adjacent literals joined, adjacent fields made one, empty literals dropped."""
    out: list[Part] = []
    for part in parts:
        if part == "":
            continue
        if part is None and out and out[-1] is None:
            continue
        if isinstance(part, str) and out and isinstance(out[-1], str):
            out[-1] = out[-1] + part
            continue
        out.append(part)
    return tuple(out)


_PRINTF = re.compile(
    r"%(?:\([^)]*\))?[-+ #0]*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|L|z|j|t|q)?[diouxXeEfFgGcrsaAvTtqwpb%]"
)
_BRACES = re.compile(r"\{\{|\}\}|\{[^{}]*\}")


def split_printf(text: str) -> list[Part]:
    """``%s``-style conversions (C, Python %, Go verbs) as fields; ``%%`` is a percent sign."""
    parts: list[Part] = []
    pos = 0
    for m in _PRINTF.finditer(text):
        parts.append(text[pos : m.start()])
        parts.append("%" if m.group() == "%%" else None)
        pos = m.end()
    parts.append(text[pos:])
    return parts


def split_braces(text: str) -> list[Part]:
    """``{}``/``{name}``/``{:?}`` fields (str.format, Rust's format!); ``{{``/``}}`` are braces."""
    parts: list[Part] = []
    pos = 0
    for m in _BRACES.finditer(text):
        parts.append(text[pos : m.start()])
        token = m.group()
        parts.append(token[0] if token in ("{{", "}}") else None)
        pos = m.end()
    parts.append(text[pos:])
    return parts


# -- Python ------------------------------------------------------------------------------------

_LOG_LEVELS = {"error", "fatal", "exception", "critical", "error_once"}
_WARN_LEVELS = {"warning", "warning_once", "warn"}
_LOGGERS = re.compile(r"(?:^|\.)(?:logger|_logger|log|LOGGER|logging)$")


class _PyVisitor(ast.NodeVisitor):
    def __init__(self, file: str) -> None:
        self.file = file
        self.sites: list[Site] = []
        self._stack: list[str] = []
        self._env: list[dict[str, list[tuple[int, ast.expr]]]] = [{}]

    # scopes
    def _scope(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self._stack.append(node.name)
        self._env.append(_assignments(node) if not isinstance(node, ast.ClassDef) else {})
        self.generic_visit(node)
        self._env.pop()
        self._stack.pop()

    visit_FunctionDef = _scope
    visit_AsyncFunctionDef = _scope
    visit_ClassDef = _scope

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if isinstance(exc, ast.Call) and exc.args:
            kind = _name(exc.func)
            if kind and kind[:1].isupper():
                self._add(node.lineno, "raise", kind, exc.args[0], fmt_args=False)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and node.args and _LOGGERS.search(_dotted(func.value)):
            level = func.attr
            if level in _LOG_LEVELS:
                self._add(node.lineno, "log", level, node.args[0], fmt_args=len(node.args) > 1)
            elif level in _WARN_LEVELS:
                self._add(node.lineno, "log.warning", "warning", node.args[0], len(node.args) > 1)
        self.generic_visit(node)

    def _add(self, line: int, kind: str, type_: str, expr: ast.expr, fmt_args: bool) -> None:
        parts = self._template(expr, line, fmt_args, depth=0)
        self.sites.append(
            Site(self.file, line, ".".join(self._stack), kind, type_, normalise(parts))
        )

    def _template(self, expr: ast.expr, line: int, fmt_args: bool, depth: int) -> list[Part]:
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return split_printf(expr.value) if fmt_args else [expr.value]
        if isinstance(expr, ast.JoinedStr):
            out: list[Part] = []
            for value in expr.values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    out.append(value.value)
                else:
                    out.append(None)
            return out
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            return self._template(expr.left, line, fmt_args, depth) + self._template(
                expr.right, line, fmt_args, depth
            )
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mod):
            left = expr.left
            if isinstance(left, ast.Constant) and isinstance(left.value, str):
                return split_printf(left.value)
        if (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr == "format"
            and isinstance(expr.func.value, ast.Constant)
            and isinstance(expr.func.value.value, str)
        ):
            return split_braces(expr.func.value.value)
        if isinstance(expr, ast.Name) and depth < 3:
            value = _latest(self._env[-1].get(expr.id, []), line)
            if value is not None:
                return self._template(value, line, False, depth + 1)
        return [None]


def _assignments(node: ast.AST) -> dict[str, list[tuple[int, ast.expr]]]:
    """``name = <expr>`` in a function body (not in nested functions), by name, in line order."""
    found: dict[str, list[tuple[int, ast.expr]]] = {}

    def walk(n: ast.AST) -> None:
        for child in ast.iter_child_nodes(n):
            if isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda
            ):
                continue
            if isinstance(child, ast.Assign) and len(child.targets) == 1:
                target = child.targets[0]
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, []).append((child.lineno, child.value))
            walk(child)

    walk(node)
    return found


def _latest(assigned: list[tuple[int, ast.expr]], line: int) -> ast.expr | None:
    before = [value for at, value in assigned if at <= line]
    return before[-1] if before else None


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _dotted(expr: ast.expr) -> str:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return f"{_dotted(expr.value)}.{expr.attr}"
    return ""


def python_sites(file: str, text: str) -> list[Site]:
    """Every failure site of one Python file (a file that does not parse gives none)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    visitor = _PyVisitor(file)
    visitor.visit(tree)
    return visitor.sites


# -- the other languages: a call's first string literal(s) ------------------------------------

_STRING = r'"(?:[^"\\\n]|\\.)*"'
# adjacent literals (C/C++ concatenation), optionally Rust raw strings are not handled
_STRINGS = rf"{_STRING}(?:\s*{_STRING})*"

_RUST = (
    ("panic", re.compile(rf"\bpanic!\(\s*({_STRINGS})")),
    ("bail", re.compile(rf"\bbail!\(\s*({_STRINGS})")),
    ("anyhow", re.compile(rf"\banyhow!\(\s*({_STRINGS})")),
    (
        "error",
        re.compile(rf"(?<![\w:])(?:tracing::)?error!\(\s*(?:[\w.]+\s*=\s*[^,]+,\s*)*({_STRINGS})"),
    ),
    ("thiserror", re.compile(rf"#\[error\(\s*({_STRINGS})")),
    ("err", re.compile(rf"\bErr\(\s*[\w:]+\(\s*(?:format!\(\s*)?({_STRINGS})")),
    ("expect", re.compile(rf"\.expect\(\s*({_STRINGS})")),
)
_CPP = (
    ("LLAMA_LOG_ERROR", re.compile(rf"\bLLAMA_LOG_ERROR\(\s*({_STRINGS})")),
    (
        "LOG_ERR",
        re.compile(rf"\b(?:SRV_ERR|SLT_ERR|QUE_ERR|LOG_ERR)\(\s*(?:[\w*]+\s*,\s*)?({_STRINGS})"),
    ),
    ("GGML_LOG_ERROR", re.compile(rf"\bGGML_LOG_ERROR\(\s*({_STRINGS})")),
    ("GGML_ABORT", re.compile(rf"\bGGML_ABORT\(\s*({_STRINGS})")),
    (
        "throw",
        re.compile(
            rf"\bthrow\s+std::(?:runtime_error|invalid_argument|out_of_range|length_error)\(\s*(?:(?:string_)?format\(\s*|std::string\(\s*)?({_STRINGS})"
        ),
    ),
)
_GO = (
    ("errorf", re.compile(r"\bfmt\.Errorf\(\s*(\"(?:[^\"\\\n]|\\.)*\"|`[^`]*`)")),
    ("errors.New", re.compile(r"\berrors\.New\(\s*(\"(?:[^\"\\\n]|\\.)*\"|`[^`]*`)")),
    ("slog.Error", re.compile(r"\bslog\.Error\(\s*(\"(?:[^\"\\\n]|\\.)*\"|`[^`]*`)")),
)
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'", "r": "\r", "0": ""}


def _literal(strings: str) -> str:
    """The text of adjacent C/Rust/Go string literals."""
    out = []
    for m in re.finditer(r'"((?:[^"\\\n]|\\.)*)"|`([^`]*)`', strings):
        body = m.group(1)
        if body is None:
            out.append(m.group(2))
            continue
        out.append(re.sub(r"\\(.)", lambda e: _ESCAPES.get(e.group(1), e.group(1)), body))
    return "".join(out)


def _functions(text: str, lang: str) -> list[tuple[int, str]]:
    """(offset, name) of function starts, for the ``function`` column (best effort)."""
    if lang == "rust":
        rx = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?fn\s+(\w+)", re.M)
    elif lang == "go":
        rx = re.compile(r"^func\s+(?:\([^)]*\)\s*)?(\w+)", re.M)
    else:
        rx = re.compile(r"^[\w:<>,*& ]+?\b(\w+)\s*\([^;{]*\)\s*(?:const\s*)?\{", re.M)
    return [(m.start(), m.group(1)) for m in rx.finditer(text) if m.group(1) not in _KEYWORDS]


_KEYWORDS = frozenset({"if", "for", "while", "switch", "else", "catch", "return", "do", "try"})


def regex_sites(file: str, text: str, lang: str) -> Iterator[Site]:
    """Every failure site of one Rust, C/C++ or Go file."""
    table = {"rust": _RUST, "cpp": _CPP, "go": _GO}[lang]
    starts = _functions(text, lang)
    for kind, rx in table:
        for m in rx.finditer(text):
            literal = _literal(m.group(1))
            parts = split_braces(literal) if lang == "rust" else split_printf(literal)
            line = text.count("\n", 0, m.start()) + 1
            func = ""
            for at, name in starts:
                if at > m.start():
                    break
                func = name
            yield Site(file, line, func, kind, kind, normalise(parts))
