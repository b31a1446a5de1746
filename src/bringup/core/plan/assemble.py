"""The plan for one set of settings: the planner's evaluation, then the recommendations.

Kept apart from ``planner`` so that ``recommend`` (which asks the planner about other
settings) and the planner do not import each other.
"""

from __future__ import annotations

from bringup.core.plan.planner import Planner, kv_cache, per_gpu, sampler_warmup, verdict
from bringup.core.plan.recommend import recommend
from bringup.core.plan.result import Plan
from bringup.core.plan.settings import Settings


def make_plan(planner: Planner, s: Settings) -> Plan:
    """The full plan for ``s``, with recommendations."""
    outcome = planner.evaluate(s)
    return Plan(
        model=planner.model_info(),
        settings=s,
        per_gpu=per_gpu(outcome.rank),
        kv_cache=kv_cache(outcome.rank, s),
        verdict=verdict(outcome),
        recommendations=tuple(recommend(planner, outcome)),
        sampler_warmup=sampler_warmup(outcome),
    )
