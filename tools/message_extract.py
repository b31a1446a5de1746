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
        ):
            text = self._string(expr.func.value, line)
            if text is not None:
                return split_braces(text)
        if isinstance(expr, ast.Name) and depth < 3:
            value = self._value(expr.id, line)
            if value is not None:
                return self._template(value, line, False, depth + 1)
        return [None]

    def _value(self, name: str, line: int) -> ast.expr | None:
        """What a name holds at ``line``: the function's assignment before it, else the
        module's string constant (``MESSAGE = "{} requires ..."`` used as ``MESSAGE.format()``)."""
        value = _latest(self._env[-1].get(name, []), line)
        if value is None and len(self._env) > 1:
            module = self._env[0].get(name, [])
            if len(module) == 1:  # assigned once: a constant
                value = module[0][1]
        return value

    def _string(self, expr: ast.expr, line: int) -> str | None:
        """A string constant, or a name that holds one."""
        if isinstance(expr, ast.Name):
            held = self._value(expr.id, line)
            expr = held if held is not None else expr
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return expr.value
        return None


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
    visitor._env[0] = {
        t.id: [(n.lineno, n.value)]
        for n in tree.body
        if isinstance(n, ast.Assign) and len(n.targets) == 1
        for t in n.targets
        if isinstance(t, ast.Name)
        and isinstance(n.value, ast.Constant)
        and isinstance(n.value.value, str)
    }
    visitor.visit(tree)
    return visitor.sites


# -- the other languages: a call's first argument, read as an expression ----------------------
#
# Each kind is a regular expression that ends where the call's first argument starts; the
# argument is then read up to its top-level ``,`` or ``)``: string literals (adjacent ones are
# one, across lines too; a ``PRIu64``-style macro between them is the conversion it stands for),
# ``+`` concatenation (C++ ``std::string``, Go), ``std::string("...")``, ``format(...)``/
# ``string_format(...)``/Rust ``format!(...)`` (their first argument, as a format) and Rust's
# ``"...".to_string()``/``.into()``/``String::from("...")``; any other operand is a value.
# ``fmt`` says whether the call formats its text (printf or ``{}`` fields) or prints it as is.

_RUST = (
    ("panic", re.compile(r"\bpanic!\(\s*"), True),
    ("bail", re.compile(r"\bbail!\(\s*"), True),
    ("anyhow", re.compile(r"\banyhow!\(\s*"), True),
    ("error", re.compile(r"(?<![\w:])(?:tracing::)?error!\(\s*(?:[\w.]+\s*=\s*[^,]+,\s*)*"), True),
    ("thiserror", re.compile(r"#\[error\(\s*"), True),
    ("err", re.compile(r"\bErr\(\s*[\w:]+\(\s*"), False),
    ("expect", re.compile(r"\.expect\(\s*"), False),
)
_CPP = (
    ("LLAMA_LOG_ERROR", re.compile(r"\bLLAMA_LOG_ERROR\(\s*"), True),
    ("LOG_ERR", re.compile(r"\b(?:SRV_ERR|SLT_ERR|QUE_ERR|LOG_ERR)\(\s*(?:[\w*]+\s*,\s*)?"), True),
    ("GGML_LOG_ERROR", re.compile(r"\bGGML_LOG_ERROR\(\s*"), True),
    ("GGML_ABORT", re.compile(r"\bGGML_ABORT\(\s*"), True),
    (
        "throw",
        re.compile(
            r"\bthrow\s+std::(?:runtime_error|invalid_argument|out_of_range|length_error)\(\s*"
        ),
        False,
    ),
)
_GO = (
    ("errorf", re.compile(r"\bfmt\.Errorf\(\s*"), True),
    ("errors.New", re.compile(r"\berrors\.New\(\s*"), False),
    ("slog.Error", re.compile(r"\bslog\.Error\(\s*"), False),
)
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'", "r": "\r", "0": ""}
# <inttypes.h>'s conversion macros: ``"%" PRIu64`` is ``%llu`` (any integer conversion will do)
_PRI_MACRO = re.compile(r"PRI[diouxX](?:8|16|32|64|MAX|PTR|LEAST\d+|FAST\d+)")
_PAIRS = {"(": ")", "[": "]", "{": "}"}
_MAX_ARG = 4000  # characters of one argument read at most (a call never spans more)


def _string_end(text: str, i: int, lang: str) -> int:
    """The index after the string or char literal that starts at ``text[i]``."""
    quote = text[i]
    if quote == "`":  # Go raw string
        end = text.find("`", i + 1)
        return len(text) if end < 0 else end + 1
    j = i + 1
    while j < len(text):
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == quote:
            return j + 1
        if c == "\n" and (quote == "'" or lang != "rust"):
            return j  # not a literal after all (a Rust lifetime, an apostrophe in a comment)
        j += 1
    return j


def first_arg(text: str, pos: int, lang: str) -> str:
    """The call's first argument, from ``pos`` to its top-level ``,`` or closing ``)``."""
    depth: list[str] = []
    i = pos
    stop = min(len(text), pos + _MAX_ARG)
    while i < stop:
        c = text[i]
        if c == '"' or (c == "`" and lang == "go") or (c == "'" and lang == "cpp"):
            i = _string_end(text, i, lang)
            continue
        if (
            c == "r"
            and lang == "rust"
            and re.match(r'r#*"', text[i : i + 4])
            and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))
        ):
            hashes = len(re.match(r"r(#*)", text[i:]).group(1))  # type: ignore[union-attr]
            end = text.find('"' + "#" * hashes, i + 2 + hashes)
            i = len(text) if end < 0 else end + 1 + hashes
            continue
        if c in _PAIRS:
            depth.append(_PAIRS[c])
        elif depth and c == depth[-1]:
            depth.pop()
        elif not depth and c in ",)":
            break
        i += 1
    return text[pos:i]


def _split_top(expr: str, sep: str, lang: str) -> list[str]:
    """``expr`` cut at each top-level ``sep`` (outside brackets and literals)."""
    out: list[str] = []
    depth = 0
    start = i = 0
    while i < len(expr):
        c = expr[i]
        if c == '"' or (c == "`" and lang == "go") or (c == "'" and lang == "cpp"):
            i = _string_end(expr, i, lang)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
            out.append(expr[start:i])
            start = i + 1
        i += 1
    out.append(expr[start:])
    return out


_LITERALS = re.compile(
    r'\s*(?:(?:u8|L|u|U)?"(?:[^"\\]|\\[\s\S])*"|`[^`]*`|r(#*)"[\s\S]*?"\1|'
    + _PRI_MACRO.pattern
    + r")(?:\s*(?:(?:u8|L|u|U)?\"(?:[^\"\\]|\\[\s\S])*\"|"
    + _PRI_MACRO.pattern
    + r"))*\s*"
)
_WRAPPED_CALL = re.compile(
    r"\s*(?:(?:std::)?string_format|(?:std::|fmt::)?format!?|format_string)\(\s*(?P<fmt>[\s\S]*)\)\s*"
)
_STRING_CTOR = re.compile(
    r"\s*(?:std::string|String::from|std::string_view)\(\s*(?P<arg>[\s\S]*)\)\s*"
)
_RUST_OWNED = re.compile(r"(?P<arg>[\s\S]*?)\s*\.\s*(?:to_string|into|to_owned)\(\s*\)\s*")


def literal_text(strings: str, lang: str) -> str:
    """The text of adjacent string literals (and the conversion macros between them)."""
    out = []
    rx = (
        r'(?:u8|L|u|U)?"((?:[^"\\]|\\[\s\S])*)"|`([^`]*)`|r(#*)"([\s\S]*?)"\3|('
        + _PRI_MACRO.pattern
        + ")"
    )
    for m in re.finditer(rx, strings):
        if m.group(5) is not None:
            out.append("llu")  # "%" PRIu64: the macro's letters after the percent sign
        elif m.group(2) is not None:
            out.append(m.group(2))
        elif m.group(4) is not None:
            out.append(m.group(4))
        else:
            body = m.group(1)
            if lang == "rust":  # a backslash at a line's end skips the break and the indent
                body = re.sub(r"\\\n\s*", "", body)
            out.append(re.sub(r"\\(.)", lambda e: _ESCAPES.get(e.group(1), e.group(1)), body))
    return "".join(out)


def expr_parts(expr: str, lang: str, fmt: bool, depth: int = 0) -> list[Part]:
    """The template of a message expression (see above); a part it cannot read is a value."""
    parts: list[Part] = []
    operands = _split_top(expr, "+", lang) if lang != "rust" else [expr]
    for operand in operands:
        parts.extend(_operand(operand, lang, fmt, depth))
    return parts


def _operand(operand: str, lang: str, fmt: bool, depth: int) -> list[Part]:
    if _LITERALS.fullmatch(operand) and operand.strip():
        text = literal_text(operand, lang)
        if not fmt:
            return [text]
        return split_braces(text) if lang == "rust" else split_printf(text)
    if depth < 3:
        m = _WRAPPED_CALL.fullmatch(operand)
        if m is not None:
            inner = first_arg(m.group("fmt") + ")", 0, lang)
            return expr_parts(inner, lang, True, depth + 1)
        m = _STRING_CTOR.fullmatch(operand)
        if m is not None:
            return expr_parts(m.group("arg"), lang, fmt, depth + 1)
        m = _RUST_OWNED.fullmatch(operand) if lang == "rust" else None
        if m is not None:
            return expr_parts(m.group("arg"), lang, False, depth + 1)
    return [None]


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
# a Go error that only wraps another (``"%s: %w"``, ``"%w"``): it adds no message of its own
_PURE_WRAP = re.compile(
    r"(?:[^A-Za-z%]|%[-+ #0-9.]*[vsqdw])*%[-+ #0-9.]*w(?:[^A-Za-z%]|%[-+ #0-9.]*[vsqdw])*"
)


def regex_sites(file: str, text: str, lang: str) -> Iterator[Site]:
    """Every failure site of one Rust, C/C++ or Go file (its message read as an expression).

    A Go ``fmt.Errorf`` whose format is only a wrap (no words, a ``%w``) is kind ``wrap``: the
    wrapped error's own site says the message."""
    table = {"rust": _RUST, "cpp": _CPP, "go": _GO}[lang]
    starts = _functions(text, lang)
    for kind, rx, fmt in table:
        for m in rx.finditer(text):
            arg = first_arg(text, m.end(), lang)
            parts = expr_parts(arg, lang, fmt)
            if not any(isinstance(p, str) and p.strip() for p in parts):
                continue  # no literal text: a message that is only a value
            wrap = kind == "errorf" and _LITERALS.fullmatch(arg) is not None
            kind_here = "wrap" if wrap and _PURE_WRAP.fullmatch(literal_text(arg, lang)) else kind
            line = text.count("\n", 0, m.start()) + 1
            func = ""
            for at, name in starts:
                if at > m.start():
                    break
                func = name
            yield Site(file, line, func, kind_here, kind, normalise(parts))
