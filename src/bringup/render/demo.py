"""What ``bringup demo`` prints: the plan's warning, each run's verdict, and the summary."""

from __future__ import annotations

import dataclasses
from typing import Any

from bringup.core.story import Story
from bringup.units import format_bytes, format_seconds


def format_plan(plan: dict[str, Any]) -> list[str]:
    """The plan's per-GPU picture in a few lines, the verdict and the flags it recommends."""
    g = plan["per_gpu"]
    v = plan["verdict"]
    lines = [
        (
            f"     per GPU: weights {format_bytes(g['weights_bytes'])}, KV cache {format_bytes(g['kv_cache_bytes'])}, "
            f"CUDA graphs {format_bytes(g['cuda_graph_bytes'])}, sampler warmup {format_bytes(g['sampler_warmup_bytes'])}, "
            f"headroom {format_bytes(g['headroom_bytes'])} of {format_bytes(g['total_bytes'])}"
        ),
        (
            "     verdict: fits"
            if v["fits"]
            else f"     verdict: DOES NOT FIT: {v['failure_class']} at {v['phase']}: {v['reason']}"
        ),
    ]
    lines += [
        f"     recommend: {r['flag']} {r['value']}  ({r['why']})" for r in plan["recommendations"]
    ]
    return lines


def format_attempt(story: Story, n: int) -> list[str]:
    """One run's verdict, with what makes it the point of the story."""
    a = story.attempts[n - 1]
    r = a.result
    if r is None:
        return ["     (not run)"]
    if r.failure is not None:
        f = r.failure
        alive = (
            f"while the server process was still running (pid {', '.join(map(str, a.server_alive_at_failure))})"
            if a.server_alive_at_failure
            else "after the server had exited"
        )
        lines = [
            (
                f"     FAILED after {format_seconds(a.failure_t or 0.0)}: {f.failure_class.value} in {f.phase.value}, "
                f"caught {alive}"
            ),
            f"     root cause (line {f.line_number}): {f.line.strip()[:160]}",
        ]
        remedies = a.remedies if a.remedies is not None else f.remedy
        lines += [f"     remedy: {rem.text}" for rem in remedies]
        return lines
    if r.time_to_ready_seconds is not None:
        answer = (a.answer or "").strip().replace("\n", " ")[:60]
        return [
            f"     READY in {format_seconds(r.time_to_ready_seconds)}: {r.model} answered the smoke request: {answer!r}"
        ]
    return [f"     ended {r.outcome.value} (exit {r.exit_code})"]


def format_summary(story: Story) -> list[str]:
    """What happened and when, and whether the story was told as it should be."""
    lines = ["4/4  summary"]
    if story.plan is not None:
        v = story.plan["verdict"]
        lines.append(
            "     before launch: plan predicted "
            + (f"{v['failure_class']} at {v['phase']}" if not v["fits"] else "a fit")
            + (
                f" and recommended --max-num-seqs {story.recommended_max_num_seqs}"
                if story.recommended_max_num_seqs
                else ""
            )
        )
    for n, a in enumerate(story.attempts, start=1):
        r = a.result
        if r is None:
            continue
        what = (
            f"{r.failure.failure_class.value} at {r.failure.phase.value}, caught at {format_seconds(a.failure_t or 0.0)}"
            if r.failure is not None
            else f"ready at {format_seconds(r.time_to_ready_seconds or 0.0)}"
        )
        lines.append(f"     run {n}: {what} (wall {format_seconds(a.wall_seconds)})")
        timeline = r.summary.get("timeline", [])
        if timeline:
            lines.append(
                "            "
                + " → ".join(f"{e['phase']} {format_seconds(float(e['t']))}" for e in timeline)
            )
    lines.append(
        "     the story was told: predicted, caught while alive, remedied, answered"
        if story.told
        else "     the story did NOT go as expected; see above"
    )
    return lines


def story_json(story: Story) -> dict[str, Any]:
    """The demo's ``--json`` summary object."""
    runs = []
    for a in story.attempts:
        r = a.result
        runs.append(
            {
                "argv": a.argv,
                "outcome": r.outcome.value if r else None,
                "summary": r.summary if r else None,
                "failure_seconds": a.failure_t,
                "server_pids_alive_at_failure": a.server_alive_at_failure,
                "answer": a.answer,
                "remedy": [dataclasses.asdict(rem) for rem in a.remedies or ()],
                "wall_seconds": round(a.wall_seconds, 3),
            }
        )
    return {
        "event": "demo",
        "told": story.told,
        "plan": story.plan,
        "recommended_max_num_seqs": story.recommended_max_num_seqs,
        "runs": runs,
    }
