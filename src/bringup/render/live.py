"""How a followed startup looks: a rich live view on a terminal, plain lines otherwise,
JSON Lines with ``--json``. Observers of a followed startup: they get its typed events and
read-only snapshots (``core.live``, ``core.startup.StartupSnapshot``), never the follower, and
never decide anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from bringup.core.live import (
    FailureFound,
    GpuSample,
    LiveEvent,
    PhaseReached,
    ProbeSeen,
    Progress,
    Ready,
    SlowPhase,
    StartupResult,
)
from bringup.core.phase_words import PHASE_WORDS, status_text
from bringup.core.probes import ProbeKind, probe_fields
from bringup.core.startup import StartupSnapshot, summary_json
from bringup.core.verdict import State
from bringup.core.vocab import Outcome, Phase
from bringup.render.console import make_console
from bringup.render.json_out import write_line
from bringup.render.startup_live import predicted_words, rate_and_eta, slow_line, weights_bar
from bringup.units import format_bytes, format_seconds


def progress_words(phase: Phase, done: int, total: int, unit: str) -> str:
    """``loading weights 45/125 shards``; the unit is left out where the phase's words say it
    (``capturing CUDA graphs 51/51``, not ``... 51/51 graphs``)."""
    words = PHASE_WORDS[phase]
    said = bool(unit) and any(w.startswith(unit.rstrip("s")) for w in words.split())
    return f"{words} {done}/{total}" + ("" if said or not unit else f" {unit}")


def format_failure(fields: Mapping[str, Any]) -> list[str]:
    """The diagnosis block: class, phase, why, root-cause line, remedy. A stall (``outcome``
    ``stalled``) says so: ``STALLED during distributed_init (timeouts)``, not ``FAILED``."""
    if fields.get("outcome") == "stalled":
        out = [f"STALLED during {fields['phase']} ({fields['class']})"]
    else:
        out = [f"FAILED: {fields['class']} during {fields['phase']}"]
    if fields.get("summary"):
        out.append(f"  why:        {fields['summary']}")
    if fields.get("line"):
        out.append(f"  root cause: {fields['line']}")
    for r in fields.get("remedy") or []:
        flag = (
            f" ({r['flag']}{' ' + r['value'] if r.get('value') else ''})" if r.get("flag") else ""
        )
        env = f" ({r['env']})" if r.get("env") else ""
        out.append(f"  remedy:     {r['text']}{flag}{env}")
    return out


def format_probe(fields: Mapping[str, Any]) -> str:
    """``probe health: HTTP 503 (Loading model)`` / ``probe smoke: ok (35ms)``."""
    if fields["ok"]:
        what = f"ok ({format_seconds(fields['latency_seconds'])})"
    elif fields.get("refused"):
        what = "connection refused (not listening yet)"
    elif fields.get("status") is not None:
        what = f"HTTP {fields['status']}" + (f" ({fields['error']})" if fields.get("error") else "")
    else:
        what = fields.get("error") or "no answer"
    return f"probe {fields['probe']}: {what}"


def format_timeline(timeline: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per phase: when it was reached and how long it took."""
    return [
        f"  {t['phase']:<20} at {format_seconds(t['t']):>7}   took {format_seconds(t['duration_seconds']):>7}"
        for t in timeline
    ]


def _exit_note(result: StartupResult) -> str:
    """ " (server exit status 1)", or what bringup did and how the server ended."""
    if result.server_exit is not None:
        return f" ({result.server_exit.phrase()})"
    if result.server_exit_code is not None:
        return f" (server exit status {result.server_exit_code})"
    return ""


def format_ending(result: StartupResult, machine: StartupSnapshot) -> list[str]:
    """The closing lines: the verdict, the time to ready and the phase timeline."""
    summary = result.summary
    lines: list[str] = []
    # the phase of the verdict's own failure (the FAILED line above names it), not the
    # phase the log reached after it
    phase = result.failure.phase if result.failure is not None else machine.phase
    if machine.state is State.READY:
        lines.append(
            f"ready in {format_seconds(result.time_to_ready_seconds or 0.0)}: {result.model or 'the model'} answered at {result.url}"
        )
    elif machine.state is State.STOPPED:
        lines.append(
            f"stopped on request; it had been ready in {format_seconds(result.time_to_ready_seconds or 0.0)}"
        )
    elif machine.state is State.STALLED or result.outcome is Outcome.STALLED:
        lines.append(
            f"stalled in {phase}: {result.failure.summary if result.failure else ''}"
            f"{_exit_note(result)}"
        )
    elif machine.state is State.FAILED:
        lines.append(f"failed in {phase}{_exit_note(result)}")
    else:
        lines.append(f"interrupted in {machine.phase} before a verdict")
    lines.append("timeline:")
    lines += format_timeline(summary["timeline"])
    return lines


class JsonLinesObserver:
    """One JSON object per event on ``stream``, then the summary as the last line."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def _write(self, obj: Mapping[str, Any]) -> None:
        write_line(obj, self.stream)

    def event(self, event: LiveEvent) -> None:
        self._write(event.to_json())

    def line(self, stream: str, text: str) -> None: ...
    def note(self, text: str) -> None: ...
    def refresh(self, snapshot: StartupSnapshot) -> None: ...

    def close(self, result: StartupResult, snapshot: StartupSnapshot) -> None:
        self._write(result.summary)


class PlainObserver:
    """Plain lines: bringup's own prefixed ``bringup:``; the engine's lines echoed verbatim."""

    def __init__(
        self, stream: TextIO, *, echo: bool = True, gpu_every_seconds: float = 5.0
    ) -> None:
        self.stream = stream
        self.echo = echo
        self.gpu_every_seconds = gpu_every_seconds
        self._last_gpu_t = -1e9
        self._last_progress_t = -1e9

    def _say(self, t: float | None, text: str) -> None:
        stamp = f"[{format_seconds(t):>7}] " if t is not None else ""
        self.stream.write(f"bringup: {stamp}{text}\n")
        self.stream.flush()

    def event(self, event: LiveEvent) -> None:
        if isinstance(event, PhaseReached):
            words = f"phase {event.phase}: {PHASE_WORDS[event.phase]}{predicted_words(event)}"
            self._say(event.t, words)
        elif isinstance(event, SlowPhase):
            self._say(event.t, slow_line(event))
        elif isinstance(event, Progress):
            if event.late:
                return  # a phase that is over: its late last line would be a step back
            if event.done == event.total or event.t - self._last_progress_t >= 1.0:
                self._last_progress_t = event.t
                self._say(
                    event.t,
                    progress_words(event.phase, event.done, event.total, event.unit)
                    + rate_and_eta(event),
                )
        elif isinstance(event, GpuSample):
            if event.t - self._last_gpu_t >= self.gpu_every_seconds:
                self._last_gpu_t = event.t
                used = ", ".join(
                    f"GPU {g.index} {format_bytes(g.used_bytes)}/{format_bytes(g.total_bytes)}"
                    for g in event.gpus
                )
                self._say(event.t, f"memory: {used}")
        elif isinstance(event, ProbeSeen):
            self._say(event.t, format_probe(event.fields))
        elif isinstance(event, FailureFound):
            for i, line in enumerate(format_failure(event.fields)):
                self._say(event.t if i == 0 else None, line)
        elif isinstance(event, Ready):
            self._say(
                event.t,
                f"READY: {event.model or 'the model'} answered the smoke request ({event.url})",
            )

    def line(self, stream: str, text: str) -> None:
        if self.echo:
            self.stream.write(text + "\n")

    def note(self, text: str) -> None:
        self._say(None, text)

    def refresh(self, snapshot: StartupSnapshot) -> None:
        if self.echo:
            self.stream.flush()

    def close(self, result: StartupResult, snapshot: StartupSnapshot) -> None:
        for line in format_ending(result, snapshot):
            self._say(None, line)


class RichObserver:
    """A live panel on a terminal: phase and elapsed time, progress, phases, GPUs, probes."""

    def __init__(self, console: Console, *, title: str = "bringup") -> None:
        self.console = console
        self.title = title
        self._live = Live(console=console, auto_refresh=False, transient=True)
        self._live.start()
        self._last_refresh = -1e9
        self._shown: tuple[object, ...] = ()  # the state, phase and probe verdicts on screen
        self._last_line = ""
        self._weights: Progress | None = None  # the weights' last progress, for the bar

    def event(self, event: LiveEvent) -> None:
        if isinstance(event, FailureFound):
            for line in format_failure(event.fields):
                self.console.print(
                    Text(line, style="bold red" if line.startswith(("FAILED", "STALLED")) else "")
                )
        elif isinstance(event, Ready):
            self.console.print(
                Text(f"READY in {format_seconds(event.t)}: the model answered", style="bold green")
            )
        elif isinstance(event, PhaseReached):
            words = f"{PHASE_WORDS[event.phase]}{predicted_words(event)}"
            self.console.print(Text(f"[{format_seconds(event.t):>7}] {words}", style="cyan"))
        elif isinstance(event, SlowPhase):
            self.console.print(Text(f"bringup: {slow_line(event)}", style="yellow"))
        elif isinstance(event, Progress) and event.eta_seconds is not None:
            self._weights = event

    def line(self, stream: str, text: str) -> None:
        if text.strip():
            self._last_line = text

    def note(self, text: str) -> None:
        self.console.print(Text(f"bringup: {text}", style="yellow"))

    def refresh(self, snapshot: StartupSnapshot) -> None:
        """At most four frames a second, but at once when the state, the phase or a probe's
        verdict changed: the frame never shows a state that is over (``probe health:
        connection refused`` under a server that answered)."""
        now = snapshot.elapsed_seconds
        shown = _what_is_shown(snapshot)
        if now - self._last_refresh < 0.25 and shown == self._shown:
            return
        self._last_refresh = now
        self._shown = shown
        self._live.update(self._panel(snapshot), refresh=True)

    def _panel(self, m: StartupSnapshot) -> RenderableType:
        head = Text(f"{self.title}: {status_text(m.phase, m.progress)}", style="bold")
        head.append(
            f"   {format_seconds(m.phase_elapsed_seconds)} in phase, {format_seconds(m.elapsed_seconds)} in all",
            style="dim",
        )
        phases = Table.grid(padding=(0, 2))
        spans = m.spans
        for i, span in enumerate(spans):
            until = spans[i + 1].t if i + 1 < len(spans) else m.elapsed_seconds
            phases.add_row(span.phase.value, format_seconds(span.t), format_seconds(until - span.t))
        parts: list[RenderableType] = [head, phases]
        if self._weights is not None and m.progress is not None:
            parts.append(weights_bar(self._weights))
        for g in m.gpus:
            share = g.memory_used_bytes / g.memory_total_bytes if g.memory_total_bytes else 0.0
            bar = "█" * int(share * 30) + "·" * (30 - int(share * 30))
            parts.append(
                Text(
                    f"GPU {g.index} {bar} {format_bytes(g.memory_used_bytes)} / {format_bytes(g.memory_total_bytes)}"
                )
            )
        for kind in ProbeKind:
            obs = m.probes.get(kind)
            if obs is not None:
                parts.append(Text(format_probe(probe_fields(obs)), style="dim"))
        if self._last_line:
            parts.append(Text(self._last_line[: self.console.width - 1], style="dim"))
        return Group(*parts)

    def close(self, result: StartupResult, snapshot: StartupSnapshot) -> None:
        # the last frame is the final state (stop() draws the frame once more before it
        # clears it, and a terminal that cannot clear it keeps it)
        self._live.update(self._panel(snapshot), refresh=True)
        self._live.stop()
        for line in format_ending(result, snapshot):
            self.console.print(line)


def _what_is_shown(m: StartupSnapshot) -> tuple[object, ...]:
    """What a frame must not show stale: the state, the phase, each probe's verdict."""
    probes = tuple((kind, probe_fields(obs)["ok"]) for kind, obs in sorted(m.probes.items()))
    return (m.state, m.phase, probes)


class Observers:
    """Several observers as one."""

    def __init__(self, *observers: Any) -> None:
        self.observers = observers

    def event(self, event: LiveEvent) -> None:
        for o in self.observers:
            o.event(event)

    def line(self, stream: str, text: str) -> None:
        for o in self.observers:
            o.line(stream, text)

    def note(self, text: str) -> None:
        for o in self.observers:
            o.note(text)

    def refresh(self, snapshot: StartupSnapshot) -> None:
        for o in self.observers:
            o.refresh(snapshot)

    def close(self, result: StartupResult, snapshot: StartupSnapshot) -> None:
        for o in self.observers:
            o.close(result, snapshot)


def is_terminal(stream: TextIO, environ: Mapping[str, str]) -> bool:
    """A live view only on a real terminal (TERM=dumb counts as none); colour is make_console's call."""
    return environ.get("TERM") != "dumb" and bool(getattr(stream, "isatty", lambda: False)())


def make_observer(
    stdout: TextIO,
    stderr: TextIO,
    environ: Mapping[str, str],
    *,
    as_json: bool,
    quiet: bool,
    title: str = "bringup",
) -> Observers:
    """JSON Lines on stdout with ``--json`` (human output then on stderr); rich or plain human output."""
    human_stream = stderr if as_json else stdout
    if is_terminal(human_stream, environ):
        human: Any = RichObserver(make_console(human_stream, environ), title=title)
    else:
        human = PlainObserver(human_stream, echo=not quiet)
    return Observers(JsonLinesObserver(stdout), human) if as_json else Observers(human)


__all__ = [
    "PHASE_WORDS",
    "JsonLinesObserver",
    "Observers",
    "PlainObserver",
    "RichObserver",
    "make_observer",
    "status_text",
    "summary_json",
]
