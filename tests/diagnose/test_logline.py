"""Reading messy lines: transport wrappers, ANSI, process prefixes and headers are peeled."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bringup.core import logline


@pytest.mark.parametrize(
    ("raw", "process", "level", "message"),
    [
        (
            "(EngineCore pid=4242) INFO 11-30 09:47:00 [core.py:139] Initializing",
            "EngineCore",
            "INFO",
            "Initializing",
        ),
        (
            "\x1b[1;36m(Worker_TP1 pid=77)\x1b[0;0m ERROR 10-25 13:12:42 [multiproc_executor.py:671] boom",
            "Worker_TP1",
            "ERROR",
            "boom",
        ),
        (
            "(APIServer pid=132135) (DPEngineCoreActor pid=143282) ERROR 11-30 09:47:00 [core.py:1] x",
            "DPEngineCoreActor",
            "ERROR",
            "x",
        ),
        (
            "(RayWorkerWrapper pid=5, ip=10.0.0.2) INFO 07-22 07:59:47 worker.py:215] ready",
            "RayWorkerWrapper",
            "INFO",
            "ready",
        ),
        ("vllm-1  | INFO 05-16 13:12:16 [core.py:58] hello", None, "INFO", "hello"),
        (
            "Nov 30 09:47:00 gpu-node vllm[123]: INFO:     Application startup complete.",
            None,
            "INFO",
            "Application startup complete.",
        ),
        (
            "> > (EngineCore_DP0 pid=9) WARNING 10-25 13:12:16 [x.py:1] careful\r",
            "EngineCore_DP0",
            "WARNING",
            "careful",
        ),
        (
            "[2025-05-02 16:13:42 TP0] Load weight begin. avail mem=78.31 GB",
            "TP0",
            None,
            "Load weight begin. avail mem=78.31 GB",
        ),
        (
            "2024-06-21T10:00:00.123456Z  INFO text_generation_launcher: Starting shard rank=0",
            None,
            "INFO",
            "text_generation_launcher: Starting shard rank=0",
        ),
    ],
)
def test_parse_peels_wrappers_and_headers(
    raw: str, process: str | None, level: str | None, message: str
) -> None:
    """Each wrapper and header style is removed, and the last process prefix names the emitter."""
    line = logline.parse(raw, 7)
    assert (line.number, line.process, line.level, line.message) == (7, process, level, message)


def test_journal_json_with_byte_array_message() -> None:
    """A journalctl -o json record whose MESSAGE is a byte array (ANSI inside) is decoded."""
    text = (
        "\x1b[31m(EngineCore pid=1) ERROR 11-30 09:47:00 [core.py:948] EngineCore failed to start."
    )
    raw = json.dumps({"MESSAGE": list(text.encode()), "_PID": "1"})
    line = logline.parse(raw, 1)
    assert line.process == "EngineCore"
    assert line.message == "EngineCore failed to start."


def test_vllm_json_formatter_record() -> None:
    """vLLM 0.33's JSON formatter records give message, level, time and process name."""
    raw = json.dumps(
        {
            "asctime": "2026-11-30 09:47:00,118",
            "levelname": "ERROR",
            "processName": "EngineCore_DP0",
            "process": 4,
            "message": "No available memory for the cache blocks.",
        }
    )
    line = logline.parse(raw, 3)
    assert (line.message, line.level, line.process, line.timestamp) == (
        "No available memory for the cache blocks.",
        "ERROR",
        "EngineCore_DP0",
        "2026-11-30 09:47:00,118",
    )


def test_tqdm_redraws_keep_last_state() -> None:
    """Carriage-return redraws keep only the latest progress state."""
    line = logline.parse("Loading: 1/4\rLoading: 2/4\rLoading: 3/4\r", 1)
    assert line.message == "Loading: 3/4"


def test_buffer_helpers_agree_on_lines() -> None:
    """candidates/last_line number lines exactly as iter_lines does, partial last line included."""
    data = b"alpha\nbeta ERROR one\n\ngamma\nERROR partial"
    lines = list(logline.iter_lines(data))
    assert len(lines) == 5
    assert list(logline.candidates(data, ("ERROR",))) == [
        (2, "beta ERROR one"),
        (5, "ERROR partial"),
    ]
    assert logline.last_line(data) == (5, "ERROR partial")
    assert logline.last_line(b"\n\n  \n") is None
    assert logline.last_line(b"a\nlast\n" + b" \n" * 5000) == (2, "last")


_TOKENS = ("rror", "ERROR", "Error", ".py", "Killed", "WARN")


def _reference(data: bytes, tokens: tuple[str, ...]) -> list[tuple[int, str]]:
    """The screen's meaning, one line at a time: every line holding any token."""
    lines = list(logline.iter_lines(data))
    return [(i, line) for i, line in enumerate(lines, start=1) if any(t in line for t in tokens)]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from([*_TOKENS, "x", " ", "rro", "ERR", ".p", "é", "\r"]), max_size=6),
        max_size=40,
    ),
    st.booleans(),
)
def test_candidates_are_every_line_holding_a_token(parts: list[list[str]], newline: bool) -> None:
    """The one-pass automaton gives exactly the lines a line-by-line `in` test gives:
    overlapping tokens, several on one line, a partial last line, non-ASCII text."""
    data = "\n".join("".join(p) for p in parts).encode() + (b"\n" if newline else b"")
    assert list(logline.candidates(data, _TOKENS)) == _reference(data, _TOKENS)


def test_candidates_across_search_windows() -> None:
    """A buffer many search windows long: lines at the windows' edges, a line of thousands of
    tokens, and a token split by nothing but the window's end are all found once."""
    noise = b"NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P\n" * 20_000  # ~ 0.9 MB
    data = noise + b"a Killed b\n" + b".py" * 100_000 + b"\n" + noise[:262_141] + b"ERROR\n"
    data += noise + b"last WARN"
    assert list(logline.candidates(data, _TOKENS)) == _reference(data, _TOKENS)
    assert logline.find_first(data, ("WARN", "Killed")) == (len(noise) + 2, "a Killed b")
    assert logline.find_first(data, ("absent",)) is None
    assert logline.has_any(data, ("last WARN",))
    assert not logline.has_any(noise, _TOKENS)


def test_screen_tokens_are_one_line() -> None:
    """A token with a newline could match across lines: refused when the screen is built."""
    with pytest.raises(ValueError, match="one line"):
        list(logline.candidates(b"a\nb", ("a\nb",)))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*_TOKENS, "x", " ", "rro", "ERR", ".p", "é", "\r"]), max_size=8))
def test_line_screen_is_an_in_test(parts: list[str]) -> None:
    """The live path's per-line screen says what one `in` test per token says."""
    line = "".join(parts)
    found = bool(logline.line_finder(_TOKENS).find_matches_as_indexes(line))
    assert found == any(t in line for t in _TOKENS)
