"""Pieces that ``bringup plan``'s modes share (the vLLM plan, the GGUF plan, ``--compare``) and
that ``bench`` uses: a bandwidth given as a rate, this machine's CPU as the decoding processor.

Its own module so that ``plan`` can dispatch to ``plan_gguf`` and ``plan_compare`` without
either of them importing ``plan`` back.
"""

from __future__ import annotations

from bringup.core.plan import decode
from bringup.core.words import count
from bringup.errors import UsageError
from bringup.render.busy import Busy, quiet
from bringup.units import parse_size


def cpu_processor(
    memory_bandwidth: float | None,
    threads: int | None,
    busy: Busy = quiet,
    engine_python: str | None = None,
) -> decode.Processor:
    """This machine's CPU: the given bandwidth, or its read bandwidth measured now (seconds:
    ``busy`` shows a spinner meanwhile on a terminal): as float32 dot products stream it, or,
    with ``engine_python``, as PyTorch's matrix-vector product in that interpreter streams it
    (vLLM's CPU build runs its linears through it, and it can be half the dot products' rate)."""
    if memory_bandwidth:
        return decode.Processor("CPU", "cpu", memory_bandwidth, "given")
    from bringup.adapters import membw

    n = threads or membw.usable_cores()
    threads_text = count(n, "thread")
    with busy(f"measuring memory bandwidth ({threads_text}; --memory-bandwidth skips this)"):
        if engine_python:
            try:
                measured = membw.cached_torch_linear_bandwidth(engine_python, n)
            except OSError as exc:
                raise UsageError(
                    str(exc), hint="--engine-python: the engine's python, with torch"
                ) from exc
            source = f"measured, {threads_text}, PyTorch's linear"
        else:
            measured = membw.cached_read_bandwidth(n)
            source = f"measured, {threads_text}"
    return decode.Processor(f"CPU ({threads_text})", "cpu", measured, source)


def parse_memory(flag: str, text: str) -> int:
    """A memory size given to ``flag``: it needs a unit (``24GiB``, ``24GB``, ``1000MiB``); a
    bare number is refused rather than read as bytes."""
    if _is_bare_number(text):
        raise UsageError(
            f"{flag} {text}: a size needs a unit",
            hint=f"e.g. {flag} {text.strip()}GiB (or {text.strip()}GB)",
        )
    return parse_size(text)


def _is_bare_number(text: str) -> bool:
    try:
        float(text.strip())
    except ValueError:
        return False
    return True


def parse_rate(text: str) -> float:
    """``"3.35TB/s"``, ``"20GB/s"``, ``"20 GB"`` → bytes per second; a bare number is refused
    (``3350`` is not 3,350 B/s)."""
    if _is_bare_number(text):
        raise UsageError(
            f"--memory-bandwidth {text}: a rate needs a unit",
            hint=f"e.g. --memory-bandwidth {text.strip()}GB/s",
        )
    value = text.strip()
    for suffix in ("/s", "ps", "/sec"):
        if value.lower().endswith(suffix):
            value = value[: -len(suffix)]
            break
    rate = parse_size(value)
    if rate <= 0:
        raise UsageError(f"--memory-bandwidth {text}: must be positive", hint="e.g. 20GB/s")
    return float(rate)
