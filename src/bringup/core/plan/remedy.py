"""The remedy for a sampler-warmup OOM in the plan's numbers, for the model runner it planned.

A log's own remedy (the vLLM pack's ``sampler_oom``) knows only the dummy requests the log
names, so it quarters them. A plan made for the same setup knows the runner's rule
(:mod:`~bringup.core.plan.peaks`), the vocabulary, the bytes and the largest
``--max-num-seqs`` that fits; :func:`warmup_remedy` says that, and :func:`with_plan` puts it
in place of the log's guess where both are at hand (the demo's diagnosis, ``up``/``run
--retry`` with a plan).
"""

from __future__ import annotations

from collections.abc import Sequence

from bringup.core.diagnosis import Failure, Remedy
from bringup.core.plan.result import Plan
from bringup.core.vocab import FailureClass, Phase

FLAG = "--max-num-seqs"


def warmup_why(plan: Plan) -> tuple[str, str] | None:
    """``(value, why)``: the plan's ``--max-num-seqs`` for its predicted sampler-warmup OOM,
    and why in the plan's numbers; None when the plan predicts no such OOM or has no value."""
    v = plan.verdict
    if v.fits or v.failure_class is not FailureClass.CUDA_OOM or v.phase is not Phase.WARMUP:
        return None
    rec = next((r for r in plan.recommendations if r.flag == FLAG and r.value), None)
    if rec is None or rec.value is None:
        return None
    return rec.value, f"{v.reason}; {rec.value} is the plan's {rec.why}"


def warmup_remedy(plan: Plan) -> Remedy | None:
    """``Set --max-num-seqs N: <the plan's reason>; N is the plan's <why>.``, or None."""
    found = warmup_why(plan)
    if found is None:
        return None
    value, why = found
    return Remedy(f"Set {FLAG} {value}: {why}.", FLAG, value)


def with_plan(failure: Failure, plan: Plan | None) -> tuple[Remedy, ...]:
    """The failure's remedies, with the plan's ``--max-num-seqs`` first in place of the log's
    own for that flag when the failure is the OOM the plan predicted (a CUDA OOM in the
    warmup); otherwise the failure's remedies unchanged."""
    remedies: Sequence[Remedy] = failure.remedy
    if plan is None or failure.failure_class is not FailureClass.CUDA_OOM:
        return tuple(remedies)
    if failure.phase is not Phase.WARMUP:
        return tuple(remedies)
    mine = warmup_remedy(plan)
    if mine is None:
        return tuple(remedies)
    return (mine, *(r for r in remedies if r.flag != FLAG))
