"""Human output of ``bringup guard``: who holds each GPU while waiting, and the verdict.

``format_*`` return rich ``Text`` lines (pure); ``print_lines`` writes them. Only the
state word is coloured (green free, yellow busy, red timed out / not ended).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence

from rich.console import Console
from rich.text import Text

from bringup.core.guard import Ended, GpuState, GuardResult, Holder, Threshold
from bringup.units import format_bytes, format_seconds

CMDLINE_WIDTH = 120


def format_limit(threshold: Threshold) -> str:
    """``at most 1000.00 MiB used`` or ``at least 70.00 GiB free``."""
    if threshold.need_bytes is not None:
        return f"at least {format_bytes(threshold.need_bytes)} free"
    return f"at most {format_bytes(threshold.max_used_bytes or 0)} used"


def format_gpu(state: GpuState) -> list[Text]:
    """One line for the GPU, then one indented line per holder."""
    word = Text("free", style="green") if state.ok else Text("busy", style="yellow")
    head = Text(f"GPU {state.index}")
    if state.name:
        head.append(f" ({state.name})")
    free_bytes = max(0, state.total_bytes - state.used_bytes)
    head.append(f": {format_bytes(state.used_bytes)} used")
    if state.total_bytes:
        head.append(f", {format_bytes(free_bytes)} free")
    head.append(": ")
    head.append_text(word)
    lines = [head]
    lines.extend(format_holder(h) for h in state.holders)
    if not state.ok and not state.holders:
        lines.append(
            Text("  no process listed (another container or a driver without process accounting?)")
        )
    return lines


def format_holder(holder: Holder) -> Text:
    """``PID 4242 python3, 69.50 GiB, unit vllm.service: /usr/bin/python3 …``."""
    parts = [f"PID {holder.pid} {holder.name or '?'}"]
    parts.append(format_bytes(holder.used_bytes) if holder.used_bytes is not None else "? bytes")
    if holder.unit:
        parts.append(f"unit {holder.unit}")
    if holder.container:
        parts.append(f"container {holder.container}")
    line = "  " + ", ".join(parts)
    if holder.cmdline:
        line += ": " + _shorten(shlex.join(holder.cmdline), CMDLINE_WIDTH)
    return Text(line)


def format_waiting(
    states: Sequence[GpuState], threshold: Threshold, waited_seconds: float, timeout_seconds: float
) -> list[Text]:
    """The block printed every few seconds while the guard waits."""
    busy = [str(s.index) for s in states if not s.ok]
    head = Text(
        f"waiting for GPU {','.join(busy)} to have {format_limit(threshold)} "
        f"({_elapsed(waited_seconds)} of {_elapsed(timeout_seconds)})"
    )
    return [head, *(line for s in states for line in format_gpu(s))]


def format_ended(ended: Ended) -> Text:
    """``ended PID 4242 (python3, runs the service's command line) with SIGTERM``."""
    what = f"PID {ended.pid} ({ended.name or '?'}, {ended.reason})"
    if ended.outcome in ("SIGTERM", "SIGKILL"):
        return Text(f"ended stale {what} with {ended.outcome}")
    if ended.outcome == "gone":
        return Text(f"stale {what} was already gone")
    line = Text(f"could not end stale {what}: ")
    line.append("permission denied" if ended.outcome == "denied" else "still running", style="red")
    return line


def format_result(result: GuardResult, threshold: Threshold, timeout_seconds: float) -> list[Text]:
    """The final verdict, with the holders of every GPU still busy."""
    gpus = ",".join(str(s.index) for s in result.gpus)
    waited = _elapsed(result.waited_seconds)
    if result.ok and not result.gpus:
        return [Text("no GPU on this machine: nothing to wait for")]
    if result.ok:
        line = Text(f"GPU {gpus}: ")
        line.append("free", style="green")
        line.append(f" ({format_limit(threshold)}) after {waited}")
        return [line]
    line = Text("timed out", style="red")
    line.append(
        f" after {waited} (--timeout {_elapsed(timeout_seconds)}): "
        f"GPU {','.join(str(s.index) for s in result.gpus if not s.ok)} "
        f"still not {format_limit(threshold)}"
    )
    return [line, *(text for s in result.gpus if not s.ok for text in format_gpu(s))]


def print_lines(console: Console, lines: Iterable[Text]) -> None:
    """Write each line as it is (no markup, no wrapping of command lines)."""
    for line in lines:
        console.print(line, markup=False, highlight=False)


def _elapsed(seconds: float) -> str:
    return f"{seconds:.1f}s" if seconds < 60 else format_seconds(seconds)


def _shorten(text: str, width: int) -> str:
    """One line, at most ``width`` characters, eliding the middle (both ends tell most)."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    head = width * 3 // 5
    return text[:head] + "…" + text[len(text) - (width - head - 1) :]
