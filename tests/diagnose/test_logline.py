"""Reading messy lines: transport wrappers, ANSI, process prefixes and headers are peeled."""

from __future__ import annotations

import json

import pytest

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
    """candidates/last_line/count_lines number lines exactly as iter_lines does, partial last line included."""
    data = b"alpha\nbeta ERROR one\n\ngamma\nERROR partial"
    lines = logline.iter_lines(data)
    assert logline.count_lines(data) == len(lines) == 5
    assert logline.candidates(data, ("ERROR",)) == [(2, "beta ERROR one"), (5, "ERROR partial")]
    assert logline.last_line(data) == (5, "ERROR partial")
    assert logline.last_line(b"\n\n  \n") is None
    assert logline.last_line(b"a\nlast\n" + b" \n" * 5000) == (2, "last")
