"""`bringup diagnose` through main() and as a real subprocess: output, JSON shape, exit codes."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.cli.main import Context, main

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
MINIMAX = LOGS / "vllm_0.33_minimax_sampler_oom.log"


def _run(argv: list[str], stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["diagnose", *argv],
        Context(stdout=out, stderr=err, stdin=io.StringIO(stdin), environ={"NO_COLOR": "1"}),
    )
    return code, out.getvalue(), err.getvalue()


def test_json_has_exactly_the_issue_fields() -> None:
    """--json prints one object with the issue's keys, "class" inside failure and remedy objects."""
    code, out, _ = _run(["--json", str(MINIMAX)])
    obj = json.loads(out)
    assert code == 1
    assert set(obj) == {
        "schema_version",
        "engine",
        "engine_version",
        "outcome",
        "phase",
        "failure",
        "timeline",
        "facts",
        "after_ready",
        "died_after_ready",
    }
    assert obj["died_after_ready"] is False
    assert set(obj["failure"]) == {
        "class",
        "phase",
        "line",
        "line_number",
        "summary",
        "remedy",
        "confidence",
        "candidates",
    }
    assert obj["failure"]["confidence"] == "certain"
    assert obj["failure"]["candidates"][0]["class"] == "cuda_oom"
    assert obj["failure"]["class"] == "cuda_oom"
    assert obj["failure"]["line_number"] == 85
    assert {
        "text": obj["failure"]["remedy"][0]["text"],
        "flag": "--max-num-seqs",
        "value": "256",
        "env": None,
    } == obj["failure"]["remedy"][0]
    assert set(obj["timeline"][0]) == {"phase", "line_number", "timestamp"}
    assert obj["facts"]["weights_gib_per_gpu"] == 57.5


def test_human_output_has_timeline_and_diagnosis() -> None:
    """Plain output names the class, the root-cause line number and the remedy flag."""
    code, out, _ = _run([str(MINIMAX)])
    assert code == 1
    assert "timeline:" in out
    assert "class     cuda_oom (in warmup)" in out
    assert "line 85:" in out
    assert "--max-num-seqs 256" in out
    assert "\x1b[" not in out


_DIED_AFTER_READY = "\n".join(
    [
        "(APIServer pid=10) INFO 05-01 10:00:00 [api_server.py:1] vLLM API server version 0.11.0",
        "(EngineCore_DP0 pid=20) INFO 05-01 10:00:01 [gpu_model_runner.py:2] Starting to load model m...",
        "(APIServer pid=10) INFO 05-01 10:00:05 [api_server.py:9] Starting vLLM API server 0 on http://0.0.0.0:8000",
        "(APIServer pid=10) INFO:     Application startup complete.",
        (
            "(EngineCore_DP0 pid=20) ERROR 05-01 11:00:00 [core.py:7] torch.OutOfMemoryError: "
            "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB"
        ),
        "",
    ]
)


def test_a_server_that_died_after_a_good_start_is_said_plainly() -> None:
    """Ready, then dead: the headline and the diagnosis say the server died after a good start
    (not a startup failure), with its class, line and remedy; JSON keeps outcome ready and
    failure null (the startup succeeded) with died_after_ready true; exit 0, as documented."""
    code, out, _ = _run(["-"], stdin=_DIED_AFTER_READY)
    assert code == 0
    assert (
        out.splitlines()[0] == "stdin: vllm 0.11.0, ready, then the server died after a good start"
    )
    assert "the startup succeeded, then the server died after a good start" in out
    assert "class     cuda_oom (after ready)" in out
    assert "line 5:" in out
    code, out, _ = _run(["--json", "-"], stdin=_DIED_AFTER_READY)
    obj = json.loads(out)
    assert code == 0
    assert (obj["outcome"], obj["failure"], obj["died_after_ready"]) == ("ready", None, True)
    assert obj["after_ready"]["class"] == "cuda_oom"


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("vllm_0.33_ok_tp1.log", 0),
        ("vllm_0.11_nccl_hang.log", 1),
        ("vllm_0.33_incomplete_mid_load.log", 3),
        ("tgi_port_in_use.log", 1),
    ],
)
def test_exit_codes_follow_outcome(name: str, code: int) -> None:
    """Exit 0 ready, 1 failed or hung, 3 incomplete."""
    assert _run([str(LOGS / name)])[0] == code


def test_engine_flag_and_stdin() -> None:
    """- reads stdin, and --engine forces the pack."""
    text = (LOGS / "sglang_0.5_ok.log").read_text()
    code, out, _ = _run(["--engine", "sglang", "--json", "-"], stdin=text)
    assert code == 0
    assert json.loads(out)["engine"] == "sglang"


def test_unreadable_input_is_one_line_exit_2(tmp_path: Path) -> None:
    """A missing file, a directory, an unreadable file or a bad flag: one line on stderr, exit 2."""
    locked = tmp_path / "locked.log"
    locked.write_text("x")
    locked.chmod(0)
    cases = [[str(tmp_path / "nope.log")], [str(tmp_path)], ["--engine", "mystery", str(MINIMAX)]]
    if os.geteuid() != 0:
        cases.append([str(locked)])
    for argv in cases:
        code, out, err = _run(argv)
        assert code == 2
        assert out == ""
        assert err.count("\n") == 1
        assert err.startswith("bringup: error:")
        assert "Traceback" not in err


def test_real_subprocess() -> None:
    """`python -m bringup diagnose` runs as a real process and exits 1 on the MiniMax log."""
    proc = subprocess.run(
        [sys.executable, "-m", "bringup", "diagnose", "--json", str(MINIMAX)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["failure"]["summary"].startswith("The GPU ran out of memory")
