"""Fuzzing the reader: no bytes and no text make it raise."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bringup.core.analyzer import LogAnalyzer, diagnose_bytes
from bringup.core.vocab import Engine

_SEEDS = [
    b"(EngineCore pid=1) ERROR 11-30 09:47:00 [core.py:1] ",
    b"\x1b[1;36m",
    b"\r",
    b"\n",
    b'{"MESSAGE":[',
    b"Traceback (most recent call last):\n",
    b'  File "x.py", line 1, in load_model\n',
    b"vLLM",
    b"torch.OutOfMemoryError: CUDA out of memory",
    b"> ",
    b"vllm-1  | ",
    b"\xff\xfe",
    b"| 3/4 [",
    b"exit code: -9",
]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.one_of(st.binary(max_size=64), st.sampled_from(_SEEDS)), max_size=30),
    st.sampled_from([None, *Engine]),
)
def test_diagnose_bytes_never_raises(chunks: list[bytes], engine: Engine | None) -> None:
    """Any byte soup (invalid UTF-8, half JSON, partial lines) gives a Diagnosis."""
    d = diagnose_bytes(b"".join(chunks), engine)
    assert d.outcome.value in {"ready", "failed", "hung", "incomplete"}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=80), max_size=20), st.one_of(st.none(), st.integers(-20, 300)))
def test_feed_never_raises(lines: list[str], exit_code: int | None) -> None:
    """Any text fed line by line, then any exit code, gives a Diagnosis."""
    analyzer = LogAnalyzer()
    for line in lines:
        analyzer.feed(line)
    analyzer.diagnosis()
    assert analyzer.finish(exit_code).phase is not None


def test_megabyte_line_and_nul_bytes() -> None:
    """A line of several megabytes and NUL bytes are read without error."""
    data = (
        b"(EngineCore pid=1) ERROR 11-30 09:47:00 [core.py:1] "
        + b"x" * 3_000_000
        + b"\n\x00\x00ERROR\x00\n"
    )
    assert diagnose_bytes(data).engine == "vllm"
