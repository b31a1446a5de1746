"""A failed real-vLLM start (the CPU build, the tiny model, a config error) gives a report that
pastes cleanly: ``run --markdown-file`` rendered by markdown-it-py with its sections, no
secret of the command line or the environment in it (vLLM echoes its arguments, the API key
among them), its timeline SVG drawn by headless Chromium, its metrics textfile written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from engine.real_engine import free_port
from report.md_check import check_report

from builders.vllm_env import serve_argv

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(600)]

API_KEY = "sk-vllmreport-0123456789abcdef"
HF_TOKEN = "hf_ReportTestTokenAbCdEfGhIjKlMnOpQr"
SECTIONS = ("Versions", "GPUs", "Command", "Plan", "Timeline", "Root cause", "Remedies")


def test_a_failed_real_vllm_start_reports_cleanly(
    vllm_models: dict[str, Path], vllm_env: dict[str, str], tmp_path: Path
) -> None:
    report, svg, metrics = (
        tmp_path / "report.md",
        tmp_path / "timeline.svg",
        tmp_path / "bringup.prom",
    )
    server = serve_argv(vllm_models["one"], free_port(), "--api-key", API_KEY, max_model_len=4096)
    argv = [
        sys.executable, "-m", "bringup", "run", "--engine", "vllm", "--grace", "30s",
        "--markdown-file", str(report), "--timeline", str(svg), "--metrics-textfile", str(metrics),
        "--", *server,
    ]  # fmt: skip
    env = {**vllm_env, "HF_TOKEN": HF_TOKEN, "NO_COLOR": "1"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=540, env=env)
    assert done.returncode == 1, done.stderr[-3000:]
    text = report.read_text()
    page = check_report(text, SECTIONS, (API_KEY, HF_TOKEN))
    assert page.headings()[0].startswith("bringup run: FAILED in")
    cause = next(f for f in page.fences() if "> " in f and "max_model_len" in f)
    assert "User-specified max_model_len (4096) is greater than the derived max_model_len" in cause
    assert "`--max-model-len" in text  # the remedy's flag
    assert "| vllm |" in text
    assert "| torch |" in text
    assert "--api-key <redacted>" in text
    log = page.fences()[-1]
    assert "'api_key': '<redacted>'" in log  # vLLM echoed its arguments; the key is out
    keep = os.environ.get("BRINGUP_REPORT_SAMPLE")  # the docs' sample: a real run's report
    if keep:
        shutil.copy(report, Path(keep) / "report-sample.md")
        shutil.copy(svg, Path(keep) / "report-sample.svg")
    root = ET.fromstring(svg.read_text())
    assert root.findall(".//{http://www.w3.org/2000/svg}line[@class='failure']")
    exported = metrics.read_text()
    assert 'bringup_failure{class="config_error"} 1.0' in exported
    # the CPU build is planned as one: the plan's figures beside what the log stated
    assert "DOES NOT FIT" in text or "FITS" in text
    assert 'bringup_predicted{quantity="time_to_ready_seconds"}' in exported
