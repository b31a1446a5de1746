"""Automatic remediation, as one pure decision: given how a startup failed and the command
line it ran with, what to change before starting again, or why nothing is retried.

Every flag comes from the engine's knowledge pack (``Pack.flags``: its memory share, max
sequences, eager mode, context length, graph batch, defaults); vLLM's names are shown. The
rules (issue 6), in the order ``decide`` applies them:

- ``config_error``, ``missing_or_corrupt_weights``, ``unsupported_hardware``: never
  retried, they fail the same way every time (``FailureClass.is_retryable``);
- a CUDA OOM in the sampler warmup lowers the max sequences (``--max-num-seqs``): to the
  plan's value when a plan is given (the reason in the plan's numbers for its model runner),
  else to the pack's remedy value, else to half the current value;
- a CUDA OOM while capturing CUDA graphs lowers the memory share (``--gpu-memory-utilization``,
  SGLang's ``--mem-fraction-static``; 0.05 a step, at most ``UTILIZATION_STEPS`` times, never
  under ``UTILIZATION_FLOOR``), then the graph batch where the engine has one (SGLang's
  ``--cuda-graph-max-bs``), and only last turns CUDA graphs off (``--enforce-eager``,
  ``--disable-cuda-graph``);
- ``kv_cache_insufficient`` sets the context length (``--max-model-len``) to the estimate the
  log gives (or the plan's); without one it uses the pack's other flag remedies;
- ``gpu_memory_utilization`` (another process held the memory at start) first waits for
  the GPUs with the guard, then lowers the memory share to what the log says is free;
- any other class, or an engine without the rule's flag: the pack's remedies whose flag is in
  ``flags.retry_safe`` (settings that trade capacity for memory, never the model, the port or
  the parallelism).

Never the same change twice: ``history`` holds the changes already made. Each decision
carries a one-line reason. Nothing here runs a process or reads a clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bringup.core import engine_args
from bringup.core.diagnosis import Failure
from bringup.core.packs.types import EngineFlags, Pack
from bringup.core.plan.remedy import warmup_why
from bringup.core.plan.result import Plan
from bringup.core.vocab import FailureClass, Phase

UTILIZATION_STEP = 0.05
UTILIZATION_STEPS = 2  # graph-capture OOM: lower the memory share this often, then eager mode
UTILIZATION_FLOOR = 0.5
SHARE_FALLBACK = 0.9  # the memory share assumed for an engine that names no default


@dataclass(frozen=True, slots=True)
class Change:
    """One change before the next attempt: set ``flag`` (to ``value``; None for a boolean
    flag), or, with ``wait_for_gpus``, wait until the GPUs are free and start unchanged."""

    flag: str | None
    value: str | None
    reason: str  # one line: what and why
    wait_for_gpus: bool = False

    def same_as(self, other: Change) -> bool:
        """Whether ``other`` makes the same change (the reason aside)."""
        return (self.flag, self.value, self.wait_for_gpus) == (
            other.flag,
            other.value,
            other.wait_for_gpus,
        )


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do next: ``change`` None means stop, and ``reason`` says why."""

    change: Change | None
    reason: str


def decide(
    failure: Failure,
    argv: Sequence[str],
    *,
    pack: Pack,
    history: Sequence[Change] = (),
    facts: Mapping[str, float | int | str] | None = None,
    plan: Plan | None = None,
    can_wait: bool = True,
) -> Decision:
    """The next change for ``failure`` of the ``pack``'s engine started as ``argv``, or why none.

    Every flag it sets is the engine's own (``pack.flags``).
    """
    ctx = _Ctx(failure, list(argv), tuple(history), dict(facts or {}), plan, pack.flags)
    cls = failure.failure_class
    if not cls.is_retryable:
        return _stop(f"{cls} is not retried: it fails the same way on every start; fix it first")
    if cls is FailureClass.CUDA_OOM and failure.phase is Phase.WARMUP:
        candidates = _sampler_oom(ctx)
    elif cls is FailureClass.CUDA_OOM and failure.phase is Phase.CUDA_GRAPH_CAPTURE:
        candidates = _graph_oom(ctx)
    elif cls is FailureClass.KV_CACHE_INSUFFICIENT:
        candidates = _kv_insufficient(ctx)
    elif cls is FailureClass.GPU_MEMORY_UTILIZATION:
        candidates = _memory_taken(ctx, can_wait)
    else:
        candidates = _pack_remedies(ctx)
    for change in candidates:
        if change is not None and not any(change.same_as(h) for h in ctx.history):
            return Decision(change, change.reason)
    if ctx.history:
        return _stop(
            f"{cls} during {failure.phase} again, and every known change was already tried"
        )
    return _stop(f"no automatic change is known for {cls} during {failure.phase}")


def memory_share(argv: Sequence[str], flags: EngineFlags) -> float:
    """The share of each GPU the server asks for (its memory-share flag, else the default)."""
    flag = flags.memory_share
    raw = (engine_args.get_flag(argv, flag) or flags.defaults.get(flag)) if flag else None
    try:
        return min(1.0, max(0.0, float(raw))) if raw is not None else SHARE_FALLBACK
    except ValueError:
        return SHARE_FALLBACK


def apply(argv: Sequence[str], change: Change) -> list[str]:
    """``argv`` with ``change`` made (unchanged for a wait); the flag is added when absent."""
    if change.wait_for_gpus or change.flag is None:
        return list(argv)
    return engine_args.set_flag(argv, change.flag, change.value)


def _stop(reason: str) -> Decision:
    return Decision(None, reason)


@dataclass(frozen=True)
class _Ctx:
    failure: Failure
    argv: list[str]
    history: tuple[Change, ...]
    facts: dict[str, float | int | str]
    plan: Plan | None
    flags: EngineFlags

    def current(self, flag: str) -> float | None:
        """The flag's value now: the command line, else the log's facts, else the default."""
        raw: object = engine_args.get_flag(self.argv, flag)
        if raw is None:
            raw = self.facts.get(self.flags.facts.get(flag, ""), self.flags.defaults.get(flag))
        try:
            return float(str(raw)) if raw is not None else None
        except ValueError:
            return None

    def remedy_value(self, flag: str) -> str | None:
        for remedy in self.failure.remedy:
            if remedy.flag == flag and remedy.value is not None:
                return remedy.value
        return None

    def plan_value(self, flag: str) -> str | None:
        if self.plan is None:
            return None
        for rec in self.plan.recommendations:
            if rec.flag == flag and rec.value is not None:
                return rec.value
        return None

    def used(self, flag: str) -> int:
        return sum(1 for h in self.history if h.flag == flag)


def _lower(ctx: _Ctx, flag: str, value: str | None, why: str) -> Change | None:
    """A change that sets an integer ``flag`` to ``value``, only if that is lower than now."""
    if value is None or not value.isdigit():
        return None
    now = ctx.current(flag)
    if now is not None and int(value) >= now:
        return None
    was = f" from {int(now)}" if now is not None else ""
    return Change(flag, value, f"lower {flag}{was} to {value}: {why}")


def _sampler_oom(ctx: _Ctx) -> list[Change | None]:
    flag = ctx.flags.max_sequences
    if flag is None:
        return _pack_remedies(ctx)
    why = "the sampler warmup allocates max_num_seqs x vocabulary logits at once, and that did not fit"
    now = ctx.current(flag)
    half = str(max(1, int(now) // 2)) if now is not None and now > 1 else None
    plan = ctx.plan_value(flag)
    planned = warmup_why(ctx.plan) if ctx.plan is not None else None
    plan_why = planned[1] if planned and planned[0] == plan else why + " (the plan says this fits)"
    return [
        _lower(ctx, flag, plan, plan_why),
        _lower(ctx, flag, ctx.remedy_value(flag), why),
        _lower(ctx, flag, half, why),
    ]


def _fmt_util(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _graph_oom(ctx: _Ctx) -> list[Change | None]:
    """Less memory share (a step at a time), then smaller graphs, then no graphs at all."""
    fl = ctx.flags
    if fl.memory_share is None and fl.graph_batch is None and fl.eager is None:
        return _pack_remedies(ctx)
    why = "CUDA graphs are captured outside the KV cache budget and did not fit"
    out: list[Change | None] = []
    share = fl.memory_share
    util = ctx.current(share) if share else None
    if share and util is not None and ctx.used(share) < UTILIZATION_STEPS:
        lower = round(util - UTILIZATION_STEP, 2)
        if lower >= UTILIZATION_FLOOR:
            out.append(
                Change(
                    share,
                    _fmt_util(lower),
                    f"lower {share} from {_fmt_util(util)} to {_fmt_util(lower)}: {why}",
                )
            )
    elif share and util is None and not ctx.used(share):
        value = ctx.remedy_value(share)
        if value is not None:
            out.append(Change(share, value, f"lower {share} to {value}: {why}"))
    if fl.graph_batch is not None:
        out.append(
            _lower(ctx, fl.graph_batch, ctx.remedy_value(fl.graph_batch), "fewer CUDA graphs")
        )
    if fl.eager is not None and not engine_args.has_flag(ctx.argv, fl.eager):
        out.append(
            Change(
                fl.eager,
                None,
                f"add {fl.eager}: graph capture still ran out of memory with a lower "
                "utilization; no CUDA graphs (slower decoding)",
            )
        )
    return out


def _kv_insufficient(ctx: _Ctx) -> list[Change | None]:
    flag = ctx.flags.context_length
    if flag is None:
        return _pack_remedies(ctx)
    out: list[Change | None] = []
    for value, where in (
        (ctx.remedy_value(flag), "the log's estimate of what the KV cache holds"),
        (ctx.plan_value(flag), "the plan's longest request that fits"),
    ):
        if value is not None and value.isdigit():
            out.append(
                Change(
                    flag,
                    value,
                    f"set {flag} {value}: {where}; one full-length request did not fit",
                )
            )
    return out + _pack_remedies(ctx, skip={flag})


def _memory_taken(ctx: _Ctx, can_wait: bool) -> list[Change | None]:
    out: list[Change | None] = []
    if can_wait:
        out.append(
            Change(
                None,
                None,
                "another process held GPU memory at start: wait with the guard "
                "until the GPUs are free, then start again unchanged",
                wait_for_gpus=True,
            )
        )
    share = ctx.flags.memory_share
    value = (ctx.remedy_value(share) or ctx.plan_value(share)) if share else None
    if share is not None and value is not None:
        out.append(
            Change(
                share,
                value,
                f"set {share} {value}: ask only for the memory "
                "that is free while the other process keeps its share",
            )
        )
    return out


def _pack_remedies(ctx: _Ctx, skip: frozenset[str] | set[str] = frozenset()) -> list[Change | None]:
    out: list[Change | None] = []
    for remedy in ctx.failure.remedy:
        if remedy.flag is None or remedy.flag not in ctx.flags.retry_safe or remedy.flag in skip:
            continue
        if remedy.value is None and engine_args.has_flag(ctx.argv, remedy.flag):
            continue
        if remedy.value is not None and engine_args.get_flag(ctx.argv, remedy.flag) == remedy.value:
            continue
        value = f" {remedy.value}" if remedy.value is not None else ""
        out.append(
            Change(
                remedy.flag, remedy.value, f"set {remedy.flag}{value}: {_first_clause(remedy.text)}"
            )
        )
    return out


def _first_clause(text: str) -> str:
    """The remedy sentence's reason, lower-cased, on one line."""
    _, sep, rest = text.partition(": ")
    clause = rest if sep else text
    clause = clause.strip().rstrip(".").replace("\n", " ")
    return clause[:1].lower() + clause[1:]
