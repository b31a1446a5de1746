"""The verdict: at any moment, at the end of a log, or when the process exited."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from bringup import exit_codes
from bringup.core import packs, verdict
from bringup.core.analyzer_offers import Offers, _flags
from bringup.core.analyzer_state import _MAX_CANDIDATES
from bringup.core.diagnosis import Candidate, Confidence, Diagnosis, Failure
from bringup.core.packs import remedies
from bringup.core.packs.types import Pack, RemedyContext
from bringup.core.vocab import FailureClass, Outcome, Phase


class Verdicts(Offers):
    """The verdict from what was read (see :class:`LogAnalyzer`)."""

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
        ll = self._progress_line
        after = f" after line {ll.number}" if ll is not None else ""
        summary = (
            f"The startup stopped in {phase.value}: {self._heartbeats} 'still waiting' "
            f"lines and no progress{after}; no line states why."
        )
        return self._hang_failure(pack, phase, summary, "no progress while the engine kept waiting")

    def _hang_point(self) -> Failure | None:
        """A finished log that ends at a step known to hang, with nothing after it."""
        ll = self._hang_at
        if ll is None:
            return None
        pack = self._pack or packs.generic()
        phase = self._failure_phase(pack, None, "")
        summary = (
            f"The log ends at a step that is known to hang (line {ll.number}: "
            f"{ll.message[:120]}) with nothing after it; no line states why it stopped."
        )
        return self._hang_failure(pack, phase, summary, "the log ends at a step known to hang")

    def _hang_failure(self, pack: Pack, phase: Phase, summary: str, why: str) -> Failure:
        """A start that stopped with no line saying why: the phase's hang class (NCCL's where
        the phase waits on it, else timeouts), likely, with the matching remedy."""
        cls = pack.hang_classes.get(phase, FailureClass.TIMEOUTS)
        ctx = RemedyContext({}, dict(self._facts), phase, pack.flags)
        remedy = remedies.nccl(ctx) if cls is FailureClass.NCCL_ERROR else remedies.stalled(ctx)
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
