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
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from functools import cache
from typing import Any

import ahocorasick_rs

from bringup import exit_codes
from bringup.core import causes, fact_checks, logline, packs, verdict
from bringup.core.diagnosis import (
    Candidate,
    Confidence,
    Diagnosis,
    EngineEvent,
    Event,
    FactEvent,
    Failure,
    FailureEvent,
    PhaseEvent,
    ProgressEvent,
    Remedy,
    TimelineEntry,
)
from bringup.core.logline import LogLine
from bringup.core.packs import index as pack_index
from bringup.core.packs import remedies
from bringup.core.packs.types import EngineFlags, Pack, RemedyContext, Signature
from bringup.core.vocab import Engine, FailureClass, Outcome, Phase

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line \d+, in (?P<func>[\w<>.]+)')
_TRACEBACK = "Traceback (most recent call last)"
_REFINE_WINDOW_LINES = 200  # a specific line this close after a generic one refines it
_MAX_PENDING = 5_000  # lines kept before the engine is recognised, replayed once it is
_MAX_FRAMES = 400
_NUL_RUN = "\x00" * 64  # a hole in a truncated file: what follows is an older process's
# the last line of a Python traceback: "ValueError: ...", "torch.OutOfMemoryError: ..."
_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*(?P<type>[A-Z]\w*(?:Error|Exception|Failure))(?::\s+(?P<text>\S.*))?$"
)
# a Rust panic with its message (TGI's router and launcher): a cause, read like an exception
_PANIC = re.compile(
    r"panicked at '(?P<text>.+)'(?:, \S+:\d+:\d+)?$|panicked at \S+:\d+:\d+:\s*(?P<text2>.+)?$"
)
# a C++ exception's message (libstdc++'s terminate handler)
_WHAT = re.compile(r"^\s*what\(\):\s+(?P<text>\S.*)$")
# a shell prompt with the user's command, pasted with the log: input, not output
_PROMPT = re.compile(r"^(?:\(\S+\) )?[\w.-]+@[\w.-]+:\S*[#$] |^\$ \S")
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
# classes that are consequences of an error, never the explanation of one
_CONSEQUENCES = frozenset({FailureClass.TIMEOUTS, FailureClass.ENGINE_CORE_DIED})
_QUIET_LEVELS = frozenset({"DEBUG", "INFO", "WARNING", "WARN", "I", "W", "D"})
_ERROR_LEVELS = frozenset({"ERROR", "CRITICAL", "FATAL", "E", "F"})
_MAX_ERRORS = 16  # error lines kept for a summary to point back at
_MAX_OFFERS = 32  # causes kept per attempt for the ranked candidates
_MAX_CANDIDATES = 3


class _Rules:
    """The rules of a pack one line can match (``packs.index``), table by table."""

    __slots__ = ("index", "mask")

    def __init__(self, index: pack_index.RuleIndex, text: str) -> None:
        self.index = index
        self.mask = index.scan(text)

    def __call__(self, table: str) -> Sequence[Any]:
        return self.index.pick(table, self.mask)


class _SafeGroups(dict[str, str]):
    """A line's named groups; a name the line lacks comes from the facts, else "?"."""

    def __init__(self, groups: dict[str, str], facts: dict[str, float | int | str]) -> None:
        super().__init__(groups)
        self.facts = facts

    def __missing__(self, key: str) -> str:
        return str(self.facts[key]) if key in self.facts else "?"


class LogAnalyzer:
    """Feed lines; get events as they happen and a ``Diagnosis`` at any moment."""

    def __init__(
        self, engine: Engine | None = None, *, screen: bool = True, after_ready: bool = True
    ) -> None:
        self._pack: Pack | None = packs.get(engine) if engine is not None else None
        self._use_screen = screen
        # the automaton of the pack's screen (None: every line is read)
        self._screen = _screen_of(self._pack) if screen and self._pack is not None else None
        # once ready, only lines that can still change the verdict are read (see AfterReady)
        self._use_after_ready = after_ready
        self._after_ready = _after_ready_of(self._pack) if after_ready else None
        self._number = 0
        self._version: str | None = None
        self._pending: list[tuple[int, str]] = []
        self._last: tuple[int, str] | None = None
        self._stale = False  # past a NUL hole: an older process's lines
        self._owner: Engine | None = None  # engine named by a generic-pack signature
        # engine whose logger alone writes a line of this shape (a fragment without a banner)
        self._shape_owner: Engine | None = None
        self._attempt = 1
        self._lines_read = 0  # lines read with a pack's tables (work, for tests and benchmarks)
        self._searches = 0  # the pattern searches those lines could cost at most
        self._reset_attempt()

    def _reset_attempt(self) -> None:
        self._phase = Phase.START
        self._timeline: list[TimelineEntry] = []
        self._facts: dict[str, float | int | str] = {}
        self._failure: Failure | None = None
        self._priority = 0
        self._sig: Signature | None = None  # the failure's signature (None: not a signature's)
        self._weak = False  # the failure is an unknown exception line, not a signature
        self._runtime: Failure | None = None  # the first failure after ready
        self._runtime_weak = False  # it is an unknown exception, not a signature
        self._hang_at: LogLine | None = None  # the last step, when it is one known to hang
        self._quiet_tb: set[str] = set()  # processes inside a traceback logged as a warning
        self._in_source: set[str] = set()  # processes whose next indented line is source code
        self._chained = False  # a chained traceback began, in the failing process, after it
        self._failure_key = ""  # the process the failure came from
        self._frames: dict[str, list[tuple[str, str]]] = {}  # (file, function), innermost last
        self._errors: list[LogLine] = []  # error lines no signature explained, newest last
        self._offers: list[Failure] = []  # every cause offered in this attempt (candidates)
        self._heartbeats = 0
        self._progress_line: LogLine | None = None
        self._progress: dict[str, tuple[int, int]] = {}

    @property
    def engine(self) -> Engine | None:
        """The engine, given or recognised from the lines; None until known."""
        return self._pack.engine if self._pack is not None else None

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

    def _offer(
        self,
        pack: Pack,
        rules: _Rules,
        sig: Signature,
        m: re.Match[str],
        ll: LogLine,
        key: str,
        events: list[Event],
    ) -> None:
        groups = _SafeGroups(
            {k.split("__")[0]: v for k, v in m.groupdict().items() if v is not None}, self._facts
        )
        if sig.failure_class is FailureClass.PORT_IN_USE and _other_port(groups, self._facts):
            return  # another server's bind error in the same output
        phase = self._failure_phase(pack, sig.phase, key, ll.message, sig.failure_class)
        # the facts so far and the failing line's own (its platform, its GPU's architecture)
        facts = {**self._facts, **self._facts_of(rules, ll.message)}
        ctx = RemedyContext(groups, facts, phase, _flags(pack, sig.owner))
        echo = any(p.search(ll.message) for p in rules("echoes"))
        if (
            sig.is_wrapper
            and sig.failure_class in _CONSEQUENCES
            and self._cause_behind(pack, ll, key, events)
        ):
            return  # a summary: the cause it sums up was named instead
        if echo:
            confidence, why = Confidence.LIKELY, f"another process's error, repeated ({sig.name})"
        elif sig.is_wrapper:
            confidence, why = (
                Confidence.GUESS,
                f"a summary line; no line before it states a cause ({sig.name})",
            )
        else:
            confidence, why = (
                Confidence.CERTAIN,
                f"the engine's message for this cause ({sig.name})",
            )
        new = Failure(
            sig.failure_class,
            phase,
            ll.text,
            ll.number,
            sig.summary.format_map(groups),
            remedies.own(ctx.flags, sig.remedy(ctx)),
            not (sig.is_wrapper or echo),
            confidence,
            why,
        )
        if sig.owner is not None and self._pack is None and new.is_final:
            self._owner = sig.owner
        self._consider(new, sig.priority, sig, weak=False, key=key, events=events)

    def _cause_behind(self, pack: Pack, ll: LogLine, key: str, events: list[Event]) -> bool:
        """A summary (``EngineCore failed to start.``, ``Shard 0 failed to start``) while no
        line has stated a cause (rule a): the nearest earlier error line of this attempt whose
        message a general rule explains is the cause; else the summary's own signal or exit
        code, when it names an informative one. True when one was offered."""
        if self._failure is not None and self._failure.is_final:
            return False
        for err in reversed(self._errors):
            cause = causes.classify("", err.message)
            if cause is not None:
                self._offer_cause(pack, cause, err, key, events)
                return True
        cause = causes.of_signal(ll.message)
        if cause is not None:
            self._offer_cause(pack, cause, ll, key, events)
            return True
        return False

    def _offer_cause(
        self, pack: Pack, cause: causes.Cause, ll: LogLine, key: str, events: list[Event]
    ) -> None:
        phase = self._failure_phase(pack, None, key, ll.message, cause.failure_class)
        new = Failure(
            cause.failure_class,
            phase,
            ll.text,
            ll.number,
            f"A process failed: {cause.why}.",
            (Remedy(cause.look_at),),
            True,
            Confidence.LIKELY,
            cause.why,
        )
        self._consider(new, 0, None, weak=True, key=key, events=events)

    def _offer_exception(
        self, pack: Pack, kind: str, text: str, ll: LogLine, key: str, events: list[Event]
    ) -> None:
        cause = causes.classify(kind, text, [f for _, f in self._frames.get(key, ())])
        cls_of = cause.failure_class if cause is not None else None
        phase = self._failure_phase(pack, None, key, text, cls_of)
        ctx = RemedyContext({"type": kind}, dict(self._facts), phase, pack.flags)
        if cause is None:
            cls, why = FailureClass.ENGINE_CORE_DIED, "no known signature or rule explains it"
            remedy, confidence = remedies.exception(ctx), Confidence.GUESS
        else:
            cls, why, confidence = cause.failure_class, cause.why, Confidence.LIKELY
            remedy = (Remedy(cause.look_at),)
        new = Failure(
            cls,
            phase,
            ll.text,
            ll.number,
            f"A process stopped on an unhandled {kind}; {why}.",
            remedy,
            True,
            confidence,
            why,
        )
        self._consider(new, 0, None, weak=True, key=key, events=events)

    def _consider(
        self,
        new: Failure,
        priority: int,
        sig: Signature | None,
        *,
        weak: bool,
        key: str,
        events: list[Event],
    ) -> None:
        if self._phase is Phase.READY and new.failure_class is not FailureClass.PORT_IN_USE:
            cur = self._runtime
            # a signature says more than an exception no signature knows, even a signature
            # that only points at a death (vLLM's "engine core exited unexpectedly" before its
            # EngineDeadError): an unknown exception never replaces a known line
            if cur is None or (
                not weak and (self._runtime_weak or (new.is_final and not cur.is_final))
            ):
                self._runtime, self._runtime_weak = new, weak  # the server's, not the startup's
                if not weak:
                    # an exception no signature knows, once serving, is most often one request's
                    # (socketserver's "Exception occurred during processing of request", a
                    # client that hung up): kept, but a live follower learns of a dead server
                    # from its exit or its health check, not from that line
                    events.append(FailureEvent(new))
            return
        if new.phase is Phase.READY:  # a bind error after "startup complete": not ready
            new = dataclasses.replace(new, phase=Phase.API_SERVER_STARTING)
        self._offers.append(new)
        del self._offers[:-_MAX_OFFERS]
        if self._takes(new, priority, sig, weak, key):
            self._failure, self._priority, self._sig, self._weak = new, priority, sig, weak
            self._failure_key = key
            # a line a signature of the pack names as its refinement may still follow (the
            # torch OOM before the sampler-warmup line that explains it): tentative too, so a
            # live follower holds it for its grace and takes the refinement, as the whole log
            # does; a failure nothing refines is the verdict at its line
            refinable = sig is not None and _refinable(self._pack or packs.generic(), sig)
            events.append(FailureEvent(new, tentative=weak or not new.is_final or refinable))

    def _takes(
        self, new: Failure, priority: int, sig: Signature | None, weak: bool, key: str
    ) -> bool:
        cur = self._failure
        if cur is None:
            return True
        if not cur.is_final:
            return new.is_final or priority > self._priority
        near = new.line_number - cur.line_number <= _REFINE_WINDOW_LINES
        if self._weak:  # an unknown exception: a known signature close after it explains it
            return new.is_final and not weak and near and new.failure_class not in _CONSEQUENCES
        if (
            self._chained
            and key == self._failure_key
            and new.is_final
            and not weak
            and new.failure_class is cur.failure_class
        ):
            self._chained = False
            return True  # a chained traceback: the exception raised last is the one that stopped it
        return new.is_final and not weak and near and _refines(sig, self._sig)

    def _failure_phase(
        self,
        pack: Pack,
        fixed: Phase | None,
        key: str,
        text: str = "",
        cls: FailureClass | None = None,
    ) -> Phase:
        """Where a failure happened: the signature's or the traceback's phase, but never
        before the phase the log already reached. A fragment that shows no phase: the step
        its message or its frames name, else where its class happens (core.causes)."""
        reached = self._current_phase_in(pack)
        phase = fixed or self._frame_phase(pack, key)
        if phase is None and reached is Phase.START:
            places = [f"{file} {func}" for file, func in reversed(self._frames.get(key, ()))]
            phase = causes.step_of(text, places) or causes.CLASS_PHASE.get(cls)
        phase = phase or reached
        return reached if phase.order < reached.order else phase

    def _frame_phase(self, pack: Pack, key: str) -> Phase | None:
        frames = {func for _, func in self._frames.get(key, ())}
        if not frames:
            return None
        for rule in pack.frames:
            if frames & rule.functions:
                return rule.phase
        return None

    def _current_phase(self) -> Phase:
        return self._current_phase_in(self._pack or packs.generic())

    def _current_phase_in(self, pack: Pack) -> Phase:
        return pack.phase_after.get(self._phase, self._phase)

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

    def _offer_fact(
        self,
        pack: Pack,
        check: fact_checks.FactCheck,
        ll: LogLine,
        key: str,
        events: list[Event],
    ) -> None:
        """A figure no healthy start reports (rule b): its line is the cause, with its
        numbers; weak, so the engine's own error line close after it, when there is one,
        names it in the engine's words."""
        phase = self._failure_phase(pack, check.phase, key)
        groups = _SafeGroups({}, self._facts)
        ctx = RemedyContext(groups, dict(self._facts), phase, pack.flags)
        new = Failure(
            check.failure_class,
            phase,
            ll.text,
            ll.number,
            check.summary.format_map(groups),
            remedies.own(ctx.flags, check.remedy(ctx)),
            True,
            Confidence.CERTAIN,
            f"a reported figure no healthy start has ({check.name})",
        )
        self._consider(new, 0, None, weak=True, key=key, events=events)

    @staticmethod
    def _facts_of(rules: _Rules, msg: str) -> dict[str, float | int | str]:
        """The facts one line carries, in the pack's rule order (a later rule wins)."""
        found: dict[str, float | int | str] = {}
        for rule in rules("facts"):
            m = rule.pattern.search(msg)
            if not m:
                continue
            for group, raw in m.groupdict().items():
                if raw is None:
                    continue
                name = group.split("__")[0]
                convert = rule.convert.get(name)
                try:
                    found[name] = convert(raw) if convert is not None else raw
                except ValueError:
                    continue
        return found

    def _set_fact(
        self, name: str, value: float | int | str, number: int, events: list[Event]
    ) -> bool:
        """Record a fact; True when it is new or changed."""
        if self._facts.get(name) != value:
            self._facts[name] = value
            events.append(FactEvent(name, value, number))
            return True
        return False

    # -- verdict ---------------------------------------------------------------------------

    def _settle(self, exit_code: int | None) -> Failure | None:
        failure = self._failure
        if failure is not None and not failure.is_final:
            cls = (
                FailureClass.HOST_OOM
                if exit_code in exit_codes.KILLED_EXIT_CODES
                else failure.failure_class
            )
            if cls is not failure.failure_class:
                return self._exit_failure(exit_code, at=failure)
            return dataclasses.replace(failure, is_final=True)
        if failure is None and exit_code is not None and self._runtime is not None:
            return dataclasses.replace(self._runtime, is_final=True)  # it served, then died
        if (
            failure is None
            and exit_code is not None
            and (exit_code != 0 or self._phase is not Phase.READY)
        ):
            return self._exit_failure(exit_code, at=None)
        return failure

    def _exit_failure(self, exit_code: int | None, at: Failure | None) -> Failure:
        killed = exit_code in exit_codes.KILLED_EXIT_CODES
        cls = FailureClass.HOST_OOM if killed else FailureClass.ENGINE_CORE_DIED
        phase = self._current_phase() if self._pack is not None else self._phase
        last = ""
        if at is not None:
            line, number, phase = at.line, at.line_number, at.phase
        else:  # no line states a cause: name none (the last line is only where it stopped)
            line, number = "", 0
            if self._last is not None:
                last = f" Its last line was line {self._last[0]}."
        base = self._pack.exit_summary if self._pack is not None else "The process exited."
        summary = (
            f"The process was killed with SIGKILL (exit {exit_code}), usually by the "
            "kernel's OOM killer."
            if killed
            else f"{base} (exit code {exit_code}){last}"
        )
        ctx = RemedyContext({}, dict(self._facts), phase, _flags(self._pack, None))
        remedy = remedies.host_oom(ctx) if killed else remedies.engine_died(ctx)
        confidence, why = (
            (Confidence.LIKELY, "killed with SIGKILL, most often the kernel's OOM killer")
            if killed
            else (Confidence.GUESS, "the process exited and no line states why")
        )
        return Failure(cls, phase, line, number, summary, remedy, True, confidence, why)

    def _hang(self) -> Failure | None:
        pack = self._pack
        if pack is None or self._heartbeats < pack.stall_heartbeats:
            return None
        phase = self._current_phase()
        cls = pack.hang_classes.get(phase, FailureClass.TIMEOUTS)
        ll = self._progress_line
        after = f" after line {ll.number}" if ll is not None else ""
        ctx = RemedyContext({}, dict(self._facts), phase, pack.flags)
        remedy = remedies.nccl(ctx) if cls is FailureClass.NCCL_ERROR else remedies.stalled(ctx)
        summary = (
            f"The startup stopped in {phase.value}: {self._heartbeats} 'still waiting' "
            f"lines and no progress{after}; no line states why."
        )
        why = "no progress while the engine kept waiting"
        return Failure(cls, phase, "", 0, summary, remedy, True, Confidence.LIKELY, why)

    def _hang_point(self) -> Failure | None:
        """A finished log that ends at a step known to hang, with nothing after it."""
        ll = self._hang_at
        if ll is None:
            return None
        pack = self._pack or packs.generic()
        phase = self._failure_phase(pack, None, "")
        cls = pack.hang_classes.get(phase, FailureClass.TIMEOUTS)
        ctx = RemedyContext({}, dict(self._facts), phase, pack.flags)
        remedy = remedies.nccl(ctx) if cls is FailureClass.NCCL_ERROR else remedies.stalled(ctx)
        summary = (
            f"The log ends at a step that is known to hang (line {ll.number}: "
            f"{ll.message[:120]}) with nothing after it; no line states why it stopped."
        )
        why = "the log ends at a step known to hang"
        return Failure(cls, phase, "", 0, summary, remedy, True, Confidence.LIKELY, why)

    def _verdict(self, failure: Failure | None, *, whole_log: bool = False) -> Diagnosis:
        phase = self._phase
        ready = self._phase is Phase.READY
        hang = None
        if failure is None and not ready:
            hang = self._hang() or (self._hang_point() if whole_log else None)
        decided = verdict.decide(verdict.Facts(failure=failure, hang=hang, ready=ready, live=False))
        outcome, failure = decided.outcome, decided.failure
        if outcome is Outcome.INCOMPLETE:
            # a milestone ("weights loaded") with lines after it: the next phase began
            phase = self._current_phase()
        if failure is not None and failure.phase is not Phase.READY:
            # the header and the failure agree; a failed start never was ready
            if failure.phase.order > phase.order:
                phase = failure.phase
            if phase is Phase.READY:
                phase = Phase.API_SERVER_STARTING
        if failure is not None:
            failure = _with_candidates(failure, self._offers)
        engine = self.engine or (self._owner if failure is not None else None) or self._shape_owner
        return Diagnosis(
            engine=engine.value if engine is not None else None,
            engine_version=self._version,
            outcome=outcome,
            phase=phase,
            failure=failure,
            timeline=tuple(self._timeline),
            facts=dict(self._facts),
            after_ready=self._runtime if outcome is Outcome.READY else None,
        )


def _with_candidates(failure: Failure, offers: Sequence[Failure]) -> Failure:
    """The verdict with up to three ranked candidates: itself first, then the other causes
    the attempt offered, of other classes, surest first and nearest to it next."""
    ranked = sorted(
        (f for f in offers if f.failure_class is not failure.failure_class),
        key=lambda f: (f.confidence.rank, abs(f.line_number - failure.line_number)),
    )
    chosen: list[Failure] = [failure]
    for f in ranked:
        if len(chosen) == _MAX_CANDIDATES:
            break
        if all(f.failure_class is not c.failure_class for c in chosen):
            chosen.append(f)
    return dataclasses.replace(
        failure,
        candidates=tuple(
            Candidate(f.failure_class, f.line_number, f.line, f.why or f.summary, f.confidence)
            for f in chosen
        ),
    )


def _refines(new: Signature | None, cur: Signature | None) -> bool:
    """Whether ``new``'s line, close after ``cur``'s, explains ``cur``'s failure better: the
    pack says so (``Signature.refines``), in the same class; with the generic pack, a name
    resolves among the common signatures and those of ``new``'s own engine."""
    return (
        new is not None
        and cur is not None
        and not new.is_wrapper
        and new.failure_class is cur.failure_class
        and cur.name in new.refines
        and (cur.owner is None or cur.owner is new.owner)
    )


def _refinable(pack: Pack, sig: Signature) -> bool:
    """Whether some signature of ``pack`` may refine ``sig``'s failure (asked at an offer)."""
    return any(_refines(s, sig) for s in pack.signatures)


def detect_engine(text: str) -> Pack | None:
    """The pack whose detection substring occurs earliest in ``text`` (at one place, the pack
    tried first); None if none does. One automaton pass, leftmost match first."""
    finder, owners = _detector()
    found = finder.find_matches_as_indexes(text)
    return owners[found[0][0]] if found else None


def _shape_engine(text: str) -> Engine | None:
    """The engine whose logger alone writes lines shaped like ``text`` (``Pack.detect_lines``:
    vLLM's header, SGLang's rank prefix, Ollama's slog records); None if none does."""
    for pack in packs.all_packs():
        for shape in pack.detect_lines:
            if shape.search(text):
                return pack.engine
    return None


@cache
def _detector() -> tuple[ahocorasick_rs.AhoCorasick, tuple[Pack, ...]]:
    """Every pack's detection substrings, in pack order, and the pack of each."""
    tokens = tuple(t for pack in packs.all_packs() for t in pack.detect)
    owners = tuple(pack for pack in packs.all_packs() for _ in pack.detect)
    return logline.line_finder(tokens), owners


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


def detect_bytes(data: bytes) -> Pack | None:
    """The engine of a whole buffer: the pack whose substring occurs first."""
    tokens = tuple(t for pack in packs.all_packs() for t in pack.detect)
    first = logline.find_first(data, tokens)
    return detect_engine(first[1]) if first is not None else None


# Once a start is ready, a phase line, a heartbeat or a hang point can no longer change the
# verdict (a phase never goes back within an attempt; a hang is judged only before ready), so
# the tables a line must match to matter then are these, with ``version`` while none is known,
# and the analyzer's own traceback checks (the exception line, a frame, the traceback's head, a
# chained traceback's separator).
_AFTER_READY_TABLES = ("restart", "exclusions", "progress", "signatures", "facts")
_OWN_CHECKS = (_EXCEPTION, _FRAME, re.compile(re.escape(_TRACEBACK)), *map(re.compile, _CHAINED))


class AfterReady:
    """What a line must hold to matter once the start is ready: one of the strings every
    match of those tables' patterns needs (``packs.index.required``), read off the pack, and
    one of the pack's screen tokens (a line the screen skips stays skipped). A serving
    journal's stats, access and request lines hold none, so after ready they cost one
    automaton pass and are never parsed. Worked out when a start first is ready (a start that
    fails never pays for it); None when a pattern that can still matter has no such strings
    (every line is then read as before)."""

    def __init__(self, pack: Pack) -> None:
        self._pack = pack
        self._built = False
        self._tokens: dict[bool, tuple[str, ...]] | None = None
        self._finders: dict[bool, ahocorasick_rs.AhoCorasick] = {}

    def tokens(self, need_version: bool) -> tuple[str, ...] | None:
        """The tokens, with the version patterns' while the version is not known."""
        if not self._built:
            self._build()
        return self._tokens[need_version] if self._tokens is not None else None

    def may_matter(self, line: str, need_version: bool) -> bool:
        """Whether ``line`` holds a token (a JSON record may hide its text: it always may)."""
        if self.tokens(need_version) is None:
            return True
        return bool(self._finders[need_version].find_matches_as_indexes(line)) or (
            line.startswith("{")
        )

    def _build(self) -> None:
        self._built = True
        index = pack_index.of(self._pack)
        own: set[str] = set()
        for pattern in _OWN_CHECKS:
            strings = pack_index.required(pattern)
            if strings is None:  # pragma: no cover - the analyzer's own patterns all have some
                return
            own |= strings
        base = index.required_of(_AFTER_READY_TABLES)
        version = index.required_of(("version",))
        if base is None or version is None:
            return
        self._tokens = {True: _fewest(own | base | version), False: _fewest(own | base)}
        self._finders = {k: logline.line_finder(v) for k, v in self._tokens.items()}


_AFTER_READY: dict[int, tuple[Pack, AfterReady]] = {}


def _after_ready_of(pack: Pack | None) -> AfterReady | None:
    """The pack's :class:`AfterReady`, one per pack; None for no pack."""
    if pack is None:
        return None
    found = _AFTER_READY.get(id(pack))
    if found is None or found[0] is not pack:
        found = (pack, AfterReady(pack))
        _AFTER_READY[id(pack)] = found
    return found[1]


def _fewest(strings: set[str] | frozenset[str]) -> tuple[str, ...]:
    """The strings that hold no other of them: a line holds one of ``strings`` exactly when it
    holds one of these (fewer tokens make a faster automaton). One automaton pass over each
    string finds the others it holds."""
    ordered = sorted(strings)
    finder = ahocorasick_rs.AhoCorasick(ordered)
    return tuple(
        s
        for i, s in enumerate(ordered)
        if all(j == i for j, _, _ in finder.find_matches_as_indexes(s, overlapping=True))
    )


@cache
def _generic_screen() -> ahocorasick_rs.AhoCorasick | None:
    return _screen_of(packs.generic())


def _screen_of(pack: Pack) -> ahocorasick_rs.AhoCorasick | None:
    """The automaton that tells whether a screen token occurs in a line, in one pass (a third
    of the time of one ``in`` test per token, a fifth with the generic pack's); None when the
    pack reads every line."""
    return logline.line_finder(pack.screen) if pack.screen is not None else None


def _other_port(groups: dict[str, str], facts: dict[str, float | int | str]) -> bool:
    """A bind error naming a port other than the one this server was told to serve on."""
    port, ours = groups.get("port"), facts.get("port")
    return port is not None and port.isdigit() and ours is not None and int(port) != int(ours)


def _flags(pack: Pack | None, owner: Engine | None) -> EngineFlags:
    """The engine's flag names for remedy builders: the signature's owner's (read with the
    generic pack), else the pack's; none when the engine is not known."""
    if owner is not None:
        return packs.get(owner).flags
    return pack.flags if pack is not None else EngineFlags(known=False)
