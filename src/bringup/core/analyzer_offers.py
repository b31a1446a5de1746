"""Which cause wins: a line's failure offered, weighed against the one held (the analyzer's
rules of precedence: a wrapper holds the place, a refinement replaces what it refines, a summary
names the cause before it, a known signature close after an unknown exception explains it).
"""

from __future__ import annotations

import dataclasses
import re

from bringup.core import causes, fact_checks, packs
from bringup.core.analyzer_state import (
    _CONSEQUENCES,
    _MAX_OFFERS,
    _REFINE_WINDOW_LINES,
    AnalyzerState,
    _Rules,
    _SafeGroups,
)
from bringup.core.diagnosis import Confidence, Event, Failure, FailureEvent, Remedy
from bringup.core.logline import LogLine
from bringup.core.packs import remedies
from bringup.core.packs.types import EngineFlags, Pack, RemedyContext, Signature
from bringup.core.vocab import Engine, FailureClass, Phase


class Offers(AnalyzerState):
    """Causes offered by lines, and the rules that decide which one is the failure."""

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
        summary = f"A process failed: {cause.why}."
        self._offer_weak(
            cause.failure_class,
            phase,
            ll,
            summary,
            (Remedy(cause.look_at),),
            Confidence.LIKELY,
            cause.why,
            key,
            events,
        )

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
        summary = f"A process stopped on an unhandled {kind}; {why}."
        self._offer_weak(cls, phase, ll, summary, remedy, confidence, why, key, events)

    def _offer_weak(
        self,
        cls: FailureClass,
        phase: Phase,
        ll: LogLine,
        summary: str,
        remedy: tuple[Remedy, ...],
        confidence: Confidence,
        why: str,
        key: str,
        events: list[Event],
    ) -> None:
        """A cause a general rule reads from ``ll`` (no signature: priority 0), final but weak:
        the engine's own line close after it, when there is one, names it instead."""
        new = Failure(cls, phase, ll.text, ll.number, summary, remedy, True, confidence, why)
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
        self._offer_weak(
            check.failure_class,
            phase,
            ll,
            check.summary.format_map(groups),
            remedies.own(ctx.flags, check.remedy(ctx)),
            Confidence.CERTAIN,
            f"a reported figure no healthy start has ({check.name})",
            key,
            events,
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
