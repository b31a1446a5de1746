"""Reading one messy log line: unwrap transport prefixes, then the engine's own header.

Real startup logs arrive through docker compose (``vllm-1  | ``), journald
(``Nov 30 09:47:00 host vllm[123]: `` or ``journalctl -o json``), JSON log formatters,
markdown quotes pasted into issues, with ANSI colour and CRLF. ``parse`` peels all of it,
in that order, and never raises: garbage in gives a LogLine whose message is the garbage.

vLLM process prefixes stack (``(APIServer pid=1) (DPEngineCoreActor pid=2) ERROR ...``);
the LAST group names the process that emitted the line (engines.md 1.2).

Damage real pastes carry is repaired here too: ANSI colour whose ESC byte was lost (a bare
``[1;36m``), replaced by U+FFFD, or rendered by rsyslog as ``#033[1;36m``; container-runtime
timestamps (``docker logs -t``, ``kubectl logs --timestamps``) in front of the engine's own;
a wrapper application re-logging each line (``2024-07-13 15:07:34,921 - INFO - vLLM: ...``,
``INFO:tgi-server: ...``); a process prefix that lost its opening parenthesis; Ray's
``[repeated 2x across cluster]`` suffix; Ollama's logfmt records (``msg="..."``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

import ahocorasick_rs

MAX_LINE_CHARS = 65_536  # longer lines are cut for matching; a cause is never that long

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# ANSI colour that lost its ESC: bare, as U+FFFD, or as rsyslog's octal "#033"
_DAMAGED_ANSI = re.compile(r"(?:\ufffd|#033)\[[0-9;?]*[A-Za-z]|\[(?:\d{1,3};)*\d{1,3}m")
# a container runtime's RFC 3339 timestamp before the engine's line (docker logs -t, kubectl)
_RUNTIME_TS = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) "
    r"(?!\s*(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR)\b)"
)
# an application re-logging the engine's lines through Python logging
_RELOG = re.compile(
    r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.]\d+ - (?:[\w.]+ - )?"
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) - (?:[\w-]+: (?=[A-Z]+\b))?"
)
# an app wrapping a child's output: "[2024-12-05 01:56:09] [stderr] <line>"
_CHILD_STREAM = re.compile(r"^\[[\d\-/ :.,T]+\] \[(?:stdout|stderr)\] ")
_PY_DEFAULT = re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.-]+:\s*")
_RAY_REPEAT = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")
_BROKEN_PREFIX = re.compile(
    r"^(?P<name>[A-Za-z_]\w*(?: rank=\d+)?) pid=(?P<pid>\d+)(?:, ip=[^)]*)?\)\s+"
)
_RANK = re.compile(r"^\[rank(?P<rank>\d+)\]:\s?")
# llama.cpp 2026: elapsed time and a level letter ("0.01.181.838 E ggml_...")
_LLAMA_ELAPSED = re.compile(r"^\d+\.\d\d\.\d{3}\.\d{3} (?P<level>[DIWE]) ")
_LOGFMT = re.compile(r"^time=\S+ level=(?P<level>[A-Z]+) source=\S+ msg=")
# a markdown quote, and a CI viewer's column border (Buildkite's "  | ") pasted with it
_QUOTE = re.compile(r"^(?:\s{0,3}>[ \t]?|\s{0,3}\|[ \t])+")
_DOCKER = re.compile(r"^[A-Za-z0-9][\w.-]*\s*\| ?")
_JOURNALD = re.compile(
    r"^(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT[\d:.]+(?:[+-]\d{2}:?\d{2}|Z)?)"
    r" \S+ [^\s:\[]+(?:\[\d+\])?: "
)
_PREFIX = re.compile(r"\((?P<name>[^()]*?) pid=(?P<pid>\d+)(?:, ip=[^)]*)?\)\s+")
_VLLM_HEADER = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? "
    r"\[?[^\]\s]+:\d+\] ?"
)
_UVICORN = re.compile(r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")
_BRACKET_TS = re.compile(
    r"^\[(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?Z?|\d\d-\d\d \d\d:\d\d:\d\d)"
    r"(?P<ranks>(?: [A-Z_]+\d+)*)\] "
)
_ISO_HEADER = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z?)\s+(?P<level>TRACE|DEBUG|INFO|WARN|ERROR)\s+"
)


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line, unwrapped. ``text`` keeps the engine's prefixes; ``message`` is the bare message."""

    number: int  # 1-based
    text: str  # ANSI, CR and transport wrappers removed; process prefixes and header kept
    message: str  # after process prefixes and the logging header
    process: str | None = None  # the emitting process, e.g. "Worker_TP1", "TP0"
    pid: int | None = None
    level: str | None = None
    timestamp: str | None = None


def strip_controls(raw: str) -> str:
    """Remove ANSI escapes and carriage returns (a tqdm redraw keeps its last state)."""
    if "\x1b" in raw:
        raw = _ANSI.sub("", raw)
    if "[" in raw:
        raw = _DAMAGED_ANSI.sub("", raw)
    if "\r" in raw:
        parts = [p for p in raw.split("\r") if p.strip()]
        raw = parts[-1] if parts else ""
    return raw


def parse(raw: str, number: int) -> LogLine:
    """Unwrap ``raw`` (one line, no newline) into a LogLine. Never raises."""
    text = strip_controls(raw[:MAX_LINE_CHARS])
    ts: str | None = None
    level: str | None = None
    process: str | None = None
    m = _QUOTE.match(text)
    if m:
        text = text[m.end() :]
    stripped = text.lstrip()
    if stripped.startswith("{"):
        record = _json_record(stripped)
        if record is not None:
            text, ts, level, process = record
    m = _JOURNALD.match(text)
    if m:
        text = text[m.end() :]
    m = _DOCKER.match(text)
    if m and not text.startswith(("Loading", "Capturing")):
        text = text[m.end() :]
    if text.startswith("[") and "] [std" in text[:40]:
        m = _CHILD_STREAM.match(text)
        if m:
            text = text[m.end() :]
    if text[:1].isdigit():
        m = _RUNTIME_TS.match(text)
        if m:
            text = text[m.end() :]
        m = _RELOG.match(text)
        if m:
            text = text[m.end() :]
    elif text[:1] in "DIWEC":
        m = _PY_DEFAULT.match(text)
        if m:
            text = text[m.end() :]
    if text.endswith("]") and "[repeated" in text:
        text = _RAY_REPEAT.sub("", text)
    return _engine_header(text, number, ts, level, process)


def _engine_header(
    text: str, number: int, ts: str | None, level: str | None, process: str | None
) -> LogLine:
    msg = text
    pid: int | None = None
    pos = 0
    while True:
        m = _PREFIX.match(msg, pos)
        if not m:
            break
        process, pid, pos = m.group("name"), int(m.group("pid")), m.end()
    if pos == 0 and " pid=" in msg:
        m = _BROKEN_PREFIX.match(msg)
        if m:
            process, pid, pos = m.group("name"), int(m.group("pid")), m.end()
            while True:
                m = _PREFIX.match(msg, pos)
                if not m:
                    break
                process, pid, pos = m.group("name"), int(m.group("pid")), m.end()
    msg = msg[pos:]
    if msg.startswith("[rank"):
        m = _RANK.match(msg)
        if m:
            process, msg = f"rank{m.group('rank')}", msg[m.end() :]
    if msg.startswith("time="):
        m = _LOGFMT.match(msg)
        if m:
            return LogLine(
                number, text, _logfmt_message(msg[m.end() :]), process, pid, m["level"], ts
            )
    elif msg[:1].isdigit():
        m = _LLAMA_ELAPSED.match(msg)
        if m:
            return LogLine(number, text, msg[m.end() :], process, pid, m["level"], ts)
    for rx in (_VLLM_HEADER, _UVICORN, _BRACKET_TS, _ISO_HEADER):
        m = rx.match(msg)
        if m:
            groups = m.groupdict()
            ts = groups.get("ts") or ts
            level = groups.get("level") or level
            ranks = (groups.get("ranks") or "").strip()
            if ranks:
                process = ranks
            msg = msg[m.end() :]
            if rx is _BRACKET_TS:
                m2 = _UVICORN.match(msg)
                if m2:
                    level, msg = m2.group("level"), msg[m2.end() :]
            break
    return LogLine(number, text, msg, process, pid, level, ts)


def _logfmt_message(rest: str) -> str:
    """Ollama's ``msg="..." key=value ...``: the message unquoted, then the other fields."""
    if not rest.startswith('"'):
        return rest
    i, out = 1, []
    while i < len(rest):
        c = rest[i]
        if c == "\\" and i + 1 < len(rest):
            out.append(rest[i + 1])
            i += 2
            continue
        if c == '"':
            break
        out.append(c)
        i += 1
    tail = rest[i + 1 :].strip()
    return "".join(out) + (" " + tail if tail else "")


def _json_record(text: str) -> tuple[str, str | None, str | None, str | None] | None:
    """A JSON log record (journalctl -o json, vLLM's json formatter, TGI --json-output)."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    message = obj.get("MESSAGE", obj.get("message", obj.get("msg")))
    fields = obj.get("fields")
    if message is None and isinstance(fields, dict):
        message = fields.get("message")
    if isinstance(message, list):
        try:
            message = bytes(int(b) & 0xFF for b in message).decode("utf-8", "replace")
        except (TypeError, ValueError):
            return None
    if not isinstance(message, str):
        return None
    message = strip_controls(message.split("\n")[-1] if "\n" in message else message)
    ts = _str_or_none(obj.get("asctime") or obj.get("timestamp"))
    level = _str_or_none(obj.get("levelname") or obj.get("level"))
    process = _str_or_none(obj.get("processName"))
    if "MESSAGE" in obj:  # journald: the message is a whole engine line; parse its header
        return message, None, None, None
    return message, ts, level, process


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


# -- whole buffers (the fast path) ---------------------------------------------------------


def decode(data: bytes) -> str:
    """Bytes to text; invalid UTF-8 becomes U+FFFD, never an error."""
    return data.decode("utf-8", "replace")


def iter_lines(data: bytes) -> Iterator[str]:
    """Every line of ``data``, decoded, one at a time (a block of short lines is never held
    decoded whole); a partial last line counts, a final newline does not."""
    for _number, _end, text in line_spans(data):
        yield text


def line_spans(data: bytes, start: int = 0, number: int = 1) -> Iterator[tuple[int, int, str]]:
    """(line number, offset past the line, text) of every line from offset ``start`` (the
    beginning of line ``number``): :func:`iter_lines`, resumable."""
    pos, n = start, len(data)
    while pos < n:
        end = data.find(b"\n", pos)
        if end == -1:
            yield number, n, decode(data[pos:])
            return
        yield number, end + 1, decode(data[pos:end])
        pos = end + 1
        number += 1


def needs_full_read(data: bytes) -> bool:
    """True when lines hide their text: JSON records (journalctl -o json, JSON formatters)."""
    return data[:4096].lstrip()[:1] == b"{" or has_any(data, FULL_READ_MARKS)


# journald's JSON for a message that is not valid UTF-8: its text is a list of byte values
FULL_READ_MARKS = ('"MESSAGE":[', '"MESSAGE": [')
DFA_AFTER_BYTES = 32 << 20  # a token set that has scanned this much gets a full DFA
_WINDOW = 256 * 1024  # bytes searched per automaton call: its list of matches stays small


@cache
def _finder(tokens: tuple[str, ...], dfa: bool = False) -> ahocorasick_rs.BytesAhoCorasick:
    """One automaton for a set of tokens: a single vectorised pass finds them all (leftmost
    first), where one ``bytes.find`` sweep per token read the buffer once for each. ``dfa``: a
    full DFA, slower to build, faster to run (see :func:`finder_for`)."""
    if any("\n" in t or not t for t in tokens):
        raise ValueError(f"a screen token must be one line and not empty: {tokens!r}")
    return ahocorasick_rs.BytesAhoCorasick(
        [t.encode() for t in tokens],
        matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST,
        **({"implementation": ahocorasick_rs.Implementation.DFA} if dfa else {}),
    )


_SCANNED: dict[tuple[str, ...], int] = {}


def finder_for(tokens: tuple[str, ...], n_bytes: int) -> ahocorasick_rs.BytesAhoCorasick:
    """The automaton for scanning ``n_bytes`` more with ``tokens``: a full DFA once a token set
    has scanned :data:`DFA_AFTER_BYTES` (it runs about 2.4x the default's speed over a serving
    journal, but takes ~50 ms to build for the ~550 after-ready tokens of vLLM: a small log
    would pay more to build it than it saves)."""
    seen = _SCANNED.get(tokens, 0) + n_bytes
    _SCANNED[tokens] = seen
    return _finder(tokens, seen > DFA_AFTER_BYTES)


@cache
def line_finder(tokens: tuple[str, ...]) -> ahocorasick_rs.AhoCorasick:
    """The automaton of :func:`_finder` for one decoded line (the live path's screen)."""
    if any("\n" in t or not t for t in tokens):
        raise ValueError(f"a screen token must be one line and not empty: {tokens!r}")
    return ahocorasick_rs.AhoCorasick(
        list(tokens), matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST
    )


def _hits(data: bytes, tokens: tuple[str, ...], start: int = 0) -> Iterator[int]:
    """The offset of every token occurrence at or after ``start`` the automaton reports, in
    order.

    Searched in windows that end at a newline (a token never spans one), so a buffer full
    of matches costs a bounded list at a time; a line that is already a hit is skipped to
    its end (the caller wants lines, and a long line of matches would cost a long list).
    """
    finder = finder_for(tokens, len(data) - start)
    view = memoryview(data)
    pos, n = start, len(data)
    while pos < n:
        end = data.find(b"\n", pos + _WINDOW)
        end = n if end == -1 else end + 1
        for _, start, _ in finder.find_matches_as_indexes(view[pos:end]):
            yield pos + start
        pos = end


def has_any(data: bytes, tokens: tuple[str, ...]) -> bool:
    """Whether any of ``tokens`` occurs in ``data`` (one pass, stops at the first window
    with a hit)."""
    return next(_hits(data, tokens), None) is not None


def candidates(data: bytes, tokens: tuple[str, ...]) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line containing one of ``tokens``, in order.

    One pass of a multi-token automaton over the buffer; lines without any token are never
    decoded, and lines come one at a time (a buffer of short matching lines is not held
    decoded all at once).
    """
    for number, _end, text in candidate_spans(data, tokens):
        yield number, text


def candidate_spans(
    data: bytes,
    tokens: tuple[str, ...],
    start: int = 0,
    number: int = 1,
    *,
    also: tuple[str, ...] | None = None,
) -> Iterator[tuple[int, int, str]]:
    """(line number, offset past the line, text) of every line containing one of ``tokens``
    (and, given ``also``, one of those too: tested on the line's bytes before it is decoded),
    from offset ``start`` (the beginning of line ``number``) on: :func:`candidates`, resumable
    where the caller changes its tokens."""
    prev, line_end = start, -1
    second = _finder(also) if also is not None else None
    view = memoryview(data)
    for pos in _hits(data, tokens, start):
        if pos < line_end:  # another token on a line already given
            continue
        begin = data.rfind(b"\n", 0, pos) + 1
        end = data.find(b"\n", pos)
        line_end = end if end != -1 else len(data)
        if second is not None and not second.find_matches_as_indexes(view[begin:line_end]):
            continue
        number += data.count(b"\n", prev, begin)
        prev = begin
        yield number, line_end + 1, decode(data[begin:line_end])


def last_line(data: bytes) -> tuple[int, str] | None:
    """(number, text) of the last line that is not blank, or None."""
    end, step = len(data), 4096
    while end > 0:  # trailing blanks, without copying the whole buffer
        chunk = data[max(0, end - step) : end].rstrip()
        if chunk:
            end = max(0, end - step) + len(chunk)
            break
        end -= step
    if end <= 0:
        return None
    start = data.rfind(b"\n", 0, end) + 1
    return data.count(b"\n", 0, start) + 1, decode(data[start:end])


def find_first(data: bytes, tokens: tuple[str, ...]) -> tuple[int, str] | None:
    """(offset, line text) of the earliest occurrence of any token."""
    pos = next(_hits(data, tokens), None) if tokens else None
    if pos is None:
        return None
    start = data.rfind(b"\n", 0, pos) + 1
    end = data.find(b"\n", pos)
    return pos, decode(data[start : end if end != -1 else len(data)])
