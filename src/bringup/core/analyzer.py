"""Reading a startup log, line by line or all at once, into events and a verdict.

``LogAnalyzer`` is the streaming reader the supervisor feeds live; ``diagnose_bytes`` is
the fast path for whole files. Both walk the same knowledge-pack tables and give the same
verdict. The fast path first screens the buffer for the few substrings every interesting
line carries (``Pack.screen``), so noise lines (NCCL INFO, access logs, download bars) cost
one ``bytes.find`` pass per substring and are never decoded.

Root cause: the first line that states a cause wins; a wrapper (``Engine core
initialization failed``) holds the place until a specific line arrives; a line the pack
names as the refinement of another (``Signature.refines``: the sampler-warmup line after the
torch OOM it wraps) replaces it when it comes shortly after, and only a failure something may
refine is offered as tentative (a live follower holds it for its grace). An unhandled exception no signature knows (``ImportError: ...``,
the last line of a traceback, a Rust panic, a C++ ``what():``) is a cause too, but a weak
one, classified by the general rules of ``core.causes`` (its type, message and frames): a
known signature shortly after it replaces it; a traceback logged at WARNING level is not a
cause at all. A figure no healthy start reports (``core.fact_checks``: negative KV memory)
is a weak cause at its line. A summary (a wrapper signature of a consequence class) names
the nearest earlier error line a rule explains, else its own signal or exit code. A new
attempt in the same log (banner again) starts over.

What lies, and the rules that see through it:

- the engine is not known: lines are read with ``packs.generic()`` (every pack's
  signatures and the engine-agnostic ones), and a line only one engine prints names it;
- a failure after the startup reached ``ready`` is the server's runtime failure, not a
  startup failure (kept apart), except a bind error: a server that could not bind its port
  never served (uvicorn prints ``Application startup complete.`` before it binds);
- a bind error naming a port other than the one this server was told to use belongs to
  another server in the same output;
- a run of NUL bytes is a hole a truncated log file gets when another process still writes
  at its old offset: what follows belongs to an older process and is not read;
- a whole log that ends at a step known to hang (NCCL init, the P2P probe) is a hang there,
  with no root-cause line (none states one).

The analyzer is read in parts: ``analyzer_state`` (what it keeps, its own patterns),
``analyzer_offers`` (which cause wins), ``analyzer_verdict`` (the verdict), ``after_ready``
(what still matters once ready), ``engine_detect`` (which engine, the screens); this module
reads the lines.
"""

from __future__ import annotations

from collections.abc import Sequence

from bringup.core import fact_checks, logline, packs
from bringup.core.after_ready import AfterReady, _after_ready_of, may_matter_in
from bringup.core.analyzer_state import (
    _CHAINED,
    _ERROR_LEVELS,
    _EXCEPTION,
    _FRAME,
    _MAX_ERRORS,
    _MAX_FRAMES,
    _MAX_PENDING,
    _NUL_RUN,
    _PANIC,
    _PROMPT,
    _QUIET_LEVELS,
    _TRACEBACK,
    _WHAT,
    _Rules,
)
from bringup.core.analyzer_verdict import Verdicts
from bringup.core.diagnosis import (
    Diagnosis,
    EngineEvent,
    Event,
    Failure,
    PhaseEvent,
    ProgressEvent,
    TimelineEntry,
)
from bringup.core.engine_detect import (
    _generic_screen,
    _screen_of,
    _shape_engine,
    detect_bytes,
    detect_engine,
)
from bringup.core.logline import LogLine
from bringup.core.packs import index as pack_index
from bringup.core.packs.types import Pack
from bringup.core.vocab import Engine, Phase

__all__ = ["AfterReady", "LogAnalyzer", "detect_bytes", "detect_engine", "diagnose_bytes"]


class LogAnalyzer(Verdicts):
    """Feed lines; get events as they happen and a ``Diagnosis`` at any moment."""

    def __init__(
        self, engine: Engine | None = None, *, screen: bool = True, after_ready: bool = True
    ) -> None:
        self._pack = packs.get(engine) if engine is not None else None
        self._use_screen = screen
        # the automaton of the pack's screen (None: every line is read)
        self._screen = _screen_of(self._pack) if screen and self._pack is not None else None
        # once ready, only lines that can still change the verdict are read (see AfterReady)
        self._use_after_ready = after_ready
        self._after_ready = _after_ready_of(self._pack) if after_ready else None
        self._number = 0
        self._version = None
        self._pending = []
        self._last = None
        self._stale = False  # past a NUL hole: an older process's lines
        self._owner = None  # engine named by a generic-pack signature
        # engine whose logger alone writes a line of this shape (a fragment without a banner)
        self._shape_owner = None
        self._attempt = 1
        self._lines_read = 0  # lines read with a pack's tables (work, for tests and benchmarks)
        self._searches = 0  # the pattern searches those lines could cost at most
        self._reset_attempt()

    @property
    def work(self) -> tuple[int, int]:
        """(lines read with a pack's tables, pattern searches they could cost at most): the
        work done so far, whatever the clock says (for tests and benchmarks)."""
        return self._lines_read, self._searches

    @property
    def attempt(self) -> int:
        """Which start of the server the lines read now belong to (1 first; a log of several
        starts begins again at each new banner)."""
        return self._attempt

    @property
    def pack(self) -> Pack | None:
        """The knowledge pack in use; None until the engine is known."""
        return self._pack

    def feed(self, line: str) -> list[Event]:
        """Read the next line (without its newline). Line numbers count from 1."""
        self._number += 1
        return self.feed_numbered(self._number, line)

    def feed_numbered(self, number: int, line: str) -> list[Event]:
        """Read ``line`` as line ``number`` (lines in between were noise, skipped unread)."""
        if number > self._number:
            self._number = number
        if self._stale:
            return []
        if "\x00" in line and _NUL_RUN in line:
            self._stale = True
            line = line[: line.find(_NUL_RUN)].rstrip("\x00")
        if line and not line.isspace():
            self._last = (number, line)
        if self._pack is None:
            return self._detect(number, line)
        after = self._after_ready
        if (
            after is not None
            and self._phase is Phase.READY
            and not self._in_source
            and not after.may_matter(line, self._version is None)
        ):
            return []
        screen = self._screen
        if (
            screen is not None
            and not screen.find_matches_as_indexes(line)
            and not line.startswith("{")  # a JSON record may hide its text (journald bytes)
        ):
            return []
        try:
            return self._process(self._pack, logline.parse(line, number))
        except RecursionError:  # pragma: no cover - pathological regex input
            return []

    def feed_lines(self, lines: Sequence[str]) -> list[tuple[int, list[Event]]]:
        """:meth:`feed` each of ``lines`` in order; the (index, events) of those that gave
        events. Once the start is ready, the batch is screened with the after-ready tokens in
        one automaton pass (a follower gets its lines in bursts, and one call per line costs
        more than the pass): a line without a token is counted, as :meth:`feed` counts it, and
        never parsed; the others are fed one by one, and the batch is screened again from
        where a line changed what matters (a restart, a traceback's source lines)."""
        out: list[tuple[int, list[Event]]] = []
        i, n = 0, len(lines)
        while i < n:
            tokens = self._after_ready_tokens()
            if tokens is None or self._stale:
                events = self.feed(lines[i])
                if events:
                    out.append((i, events))
                i += 1
                continue
            for k in [*may_matter_in(lines, i, tokens), n]:
                self._skip(lines, i, k)
                if k == n:
                    i = n
                    break
                events = self.feed(lines[k])
                if events:
                    out.append((k, events))
                i = k + 1
                if self._stale or self._after_ready_tokens() is not tokens:
                    break  # what matters changed: screen the rest again
        return out

    def _skip(self, lines: Sequence[str], start: int, end: int) -> None:
        """Count ``lines[start:end]`` as :meth:`feed` counts lines it does not read."""
        if end <= start:
            return
        for k in range(end - 1, start - 1, -1):
            line = lines[k]
            if line and not line.isspace():
                self._last = (self._number + k - start + 1, line)
                break
        self._number += end - start

    def prepare(self) -> None:
        """Build the per-line pattern indexes now (the pack's, or every pack's while the engine
        is not known), so the first lines read do not pay for them: a follower calls this
        while the server it started is still importing."""
        for pack in (
            [self._pack] if self._pack is not None else [packs.generic(), *packs.all_packs()]
        ):
            pack_index.of(pack)

    def note_last(self, number: int, line: str) -> None:
        """Record the last non-blank line (the fast path skips lines; exits point here)."""
        self._number = max(self._number, number)
        self._last = (number, line)

    def read_block(self, data: bytes, first: int, screen: tuple[str, ...] | None) -> None:
        """Feed the lines of ``data`` (line ``first`` first) that can matter: with ``screen``,
        only lines holding one of its tokens (never decoded otherwise); once the start is
        ready, only lines holding an after-ready token, until the state says otherwise (a
        restart, a traceback's source lines): the whole-log reader's loop."""
        pos, number = 0, first
        while pos < len(data):
            ready = self._after_ready_tokens()
            tokens = ready if ready is not None else screen
            spans = (
                logline.line_spans(data, pos, number)
                if tokens is None
                else logline.candidate_spans(
                    data, tokens, pos, number, also=screen if ready is not None else None
                )
            )
            for n, end, line in spans:
                self.feed_numbered(n, line)
                if self._after_ready_tokens() is not ready:  # read on with the other tokens
                    pos, number = end, n + 1
                    break
            else:
                return

    def _after_ready_tokens(self) -> tuple[str, ...] | None:
        """The tokens a line must hold to be read now: the after-ready ones when they apply."""
        after = self._after_ready
        if after is None or self._phase is not Phase.READY or self._in_source:
            return None
        return after.tokens(self._version is None)

    def diagnosis(self) -> Diagnosis:
        """The verdict so far (``incomplete`` while the startup is still going)."""
        return self._verdict(self._failure)

    def finish(self, exit_code: int | None = None, *, whole_log: bool = False) -> Diagnosis:
        """The verdict at end of input, or when the process exited with ``exit_code``.

        ``whole_log``: the input is a finished log (``diagnose``), not a live startup cut
        short: a log that ends at a step known to hang is then a hang.
        """
        return self._verdict(self._settle(exit_code), whole_log=whole_log and exit_code is None)

    @property
    def runtime_failure(self) -> Failure | None:
        """The first failure after the startup reached ready (not a startup failure)."""
        return self._runtime

    # -- detection -------------------------------------------------------------------------

    def _detect(self, number: int, line: str) -> list[Event]:
        text = line
        if line.lstrip().startswith("{"):
            text = logline.parse(line, number).text
        pack = detect_engine(text)
        if pack is None:
            if self._shape_owner is None:
                self._shape_owner = _shape_engine(text)
            self._pending.append((number, line))
            if len(self._pending) > _MAX_PENDING:
                del self._pending[: _MAX_PENDING // 10]
            screen = _generic_screen() if self._use_screen else None
            if screen is not None and not screen.find_matches_as_indexes(text):
                return []
            try:
                events = self._process(packs.generic(), logline.parse(line, number))
            except RecursionError:  # pragma: no cover - pathological regex input
                return []
            if self._owner is None:
                return events
            pack = packs.get(self._owner)
            line_given = False
        else:
            line_given = True
        return self._switch(pack, (number, line) if line_given else None)

    def _switch(self, pack: Pack, line: tuple[int, str] | None) -> list[Event]:
        """The engine is known: read again, with its pack, what was read without it."""
        assert pack.engine is not None
        self._pack = pack
        self._screen = _screen_of(pack) if self._use_screen else None
        self._after_ready = _after_ready_of(pack) if self._use_after_ready else None
        self._attempt = 1
        self._reset_attempt()
        events: list[Event] = [EngineEvent(pack.engine.value, None)]
        pending, self._pending = self._pending, []
        for n, text_line in [*pending, *([line] if line is not None else [])]:
            events.extend(self.feed_numbered(n, text_line))
        return events

    # -- one line --------------------------------------------------------------------------

    def _process(self, pack: Pack, ll: LogLine) -> list[Event]:
        msg = ll.message
        events: list[Event] = []
        # the patterns this line can match: the others need a string it does not contain
        rules = _Rules(pack_index.of(pack), msg)
        self._lines_read += 1
        self._searches += rules.mask.bit_count()
        if self._version is None:
            self._find_version(pack, rules, msg, events)
        if (self._failure is not None or self._phase.order > Phase.CONFIG.order) and any(
            p.search(msg) for p in rules("restart")
        ):
            self._attempt += 1
            self._reset_attempt()
        key = ll.process or ""
        frame = _FRAME.match(msg)
        if frame:
            frames = self._frames.setdefault(key, [])
            frames.append((frame.group("file"), frame.group("func")))
            del frames[:-_MAX_FRAMES]
            self._in_source.add(key)
            return events
        if key in self._in_source:
            if msg.startswith(
                "    "
            ):  # the source line (or carets) under a frame: code, not output
                return events
            self._in_source.discard(key)
        if msg.startswith(_CHAINED):
            self._chained = self._failure is not None and key == self._failure_key
            return events
        if _PROMPT.match(msg):
            return events
        if msg.startswith(_TRACEBACK):
            self._frames[key] = []
            if ll.level in _QUIET_LEVELS:
                self._quiet_tb.add(key)  # logged with exc_info at WARNING: not a cause
            else:
                self._quiet_tb.discard(key)
            return events
        if not rules.mask:  # no pattern of the pack can match: an exception line, or nothing
            self._exception(pack, ll, key, events)
            return events
        if any(p.search(msg) for p in rules("exclusions")):
            return events
        # the phase first: a tqdm bar glued to an error line moved on before the error came
        self._progress_and_phase(rules, ll, events)
        quiet = ll.level in _QUIET_LEVELS or (ll.level is None and key in self._quiet_tb)
        for sig in rules("signatures"):
            if sig.loud_only and quiet:
                continue  # an engine's error text, here logged as advice: not a cause
            m = sig.pattern.search(msg)
            if m:
                if sig.until is not None and self._phase.order > sig.until.order:
                    continue
                self._offer(pack, rules, sig, m, ll, key, events)
                break
        else:
            self._exception(pack, ll, key, events)
        self._read_facts(pack, rules, ll, key, events)
        return events

    def _exception(self, pack: Pack, ll: LogLine, key: str, events: list[Event]) -> None:
        """A line no signature explains: the last line of a traceback, a Rust panic or a C++
        exception's message is a (weak) cause, read by the general rules (core.causes)."""
        quiet = ll.level in _QUIET_LEVELS or (ll.level is None and key in self._quiet_tb)
        if quiet:
            return
        msg = ll.message
        m = _EXCEPTION.match(msg)
        if m:
            self._offer_exception(pack, m.group("type"), m.group("text") or "", ll, key, events)
            return
        if "panicked at" in msg or "what():" in msg:
            m = _PANIC.search(msg) or _WHAT.match(msg)
            if m:
                text = m.groupdict().get("text") or m.groupdict().get("text2") or ""
                kind = "panic" if "panicked at" in msg else "C++ exception"
                self._offer_exception(pack, kind, text, ll, key, events)
                return
        if ll.level in _ERROR_LEVELS:  # an error with a reason: what a later summary sums up
            self._errors.append(ll)
            del self._errors[:-_MAX_ERRORS]

    def _find_version(self, pack: Pack, rules: _Rules, msg: str, events: list[Event]) -> None:
        if pack.engine is None:
            return
        for pattern in rules("version"):
            m = pattern.search(msg)
            if m:
                self._version = m.group("version")
                events.append(EngineEvent(pack.engine.value, self._version))
                return

    def _progress_and_phase(self, rules: _Rules, ll: LogLine, events: list[Event]) -> None:
        msg = ll.message
        moved = False
        for rule in rules("progress"):
            m = rule.pattern.search(msg)
            if not m:
                continue
            done, total = int(m.group("done")), int(m.group("total"))
            moved = self._advance(rule.phase, ll, events) or moved
            if self._progress.get(rule.unit) != (done, total):
                self._progress[rule.unit] = (done, total)
                events.append(ProgressEvent(rule.phase, done, total, rule.unit, ll.number))
                moved = True
                for fact, value in ((rule.done_fact, done), (rule.total_fact, total)):
                    if fact is not None:
                        self._set_fact(fact, value, ll.number, events)
            break
        else:
            for marker in rules("phases"):
                if marker.pattern.search(msg):
                    if marker.requires is None or self._phase.order >= marker.requires.order:
                        self._advance(marker.phase, ll, events)
                        moved = True  # a phase line, even of the same phase, is progress
                    break
        if any(p.search(msg) for p in rules("hang_points")):
            self._hang_at = ll
        elif moved:
            self._hang_at = None
        if moved:
            self._heartbeats = 0
            self._progress_line = ll
        elif any(p.search(msg) for p in rules("heartbeats")):
            self._heartbeats += 1

    def _advance(self, phase: Phase, ll: LogLine, events: list[Event]) -> bool:
        if phase.order < self._phase.order or (phase is self._phase and self._timeline):
            return False
        self._phase = phase
        entry = TimelineEntry(phase, ll.number, ll.timestamp)
        self._timeline.append(entry)
        events.append(PhaseEvent(entry))
        return True

    def _read_facts(
        self, pack: Pack, rules: _Rules, ll: LogLine, key: str, events: list[Event]
    ) -> None:
        changed = {
            name
            for name, value in self._facts_of(rules, ll.message).items()
            if self._set_fact(name, value, ll.number, events)
        }
        check = fact_checks.broken(self._facts, changed) if changed else None
        if check is not None:
            self._offer_fact(pack, check, ll, key, events)


def diagnose_bytes(data: bytes, engine: Engine | None = None) -> Diagnosis:
    """The verdict on a whole log given as bytes: the fast path (screen, then read)."""
    hole = data.find(_NUL_RUN.encode())
    if hole >= 0:  # an older process's lines follow the hole (the line reader stops there too)
        data = data[:hole]
    pack = packs.get(engine) if engine is not None else detect_bytes(data)
    analyzer = LogAnalyzer(pack.engine if pack is not None else None)
    if pack is None or pack.screen is None or logline.needs_full_read(data):
        analyzer.read_block(data, 1, None)
        return analyzer.finish(whole_log=True)
    analyzer.read_block(data, 1, pack.screen)
    last = logline.last_line(data)
    if last is not None:
        analyzer.note_last(*last)
    return analyzer.finish(whole_log=True)
