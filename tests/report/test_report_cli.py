"""The reports of the commands: ``diagnose --markdown`` on every fixture log, ``bringup report
RUN_DIR`` on a run folder as ``run --nodes`` leaves it, ``run --markdown`` of a real child
process (the scripted fake server), each rendered and checked for sections and secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from report.md_check import check_report
from run.helpers import cli, fake, free_port, processes_running

REPO = Path(__file__).resolve().parents[2]
LOGS = sorted((REPO / "tests" / "fixtures" / "logs").rglob("*.log"))
SECRET = "sk-proj-abcdefABCDEF0123456789"
HF_SECRET = "hf_zyxwvutsrqponmlkjihgfedcba987654"


@pytest.mark.parametrize("log", LOGS, ids=[p.name for p in LOGS])
def test_diagnose_markdown_of_every_fixture(log: Path) -> None:
    """Every log bringup knows gives a report that renders with its log folded in, and the
    same exit code as the plain diagnose."""
    code, out, err = cli(["diagnose", "--markdown", str(log)])
    plain, _, _ = cli(["diagnose", str(log)])
    assert code == plain, err
    assert err  # the usual output went to stderr
    page = check_report(out, ())
    assert page.headings()[0].startswith("bringup diagnose")
    if "\n" in log.read_text(errors="replace").strip():
        assert "<details>" in out


def test_diagnose_markdown_file_keeps_the_usual_output(tmp_path: Path) -> None:
    log = REPO / "tests/fixtures/logs/vllm_0.11_ansi_profile_oom.log"
    target = tmp_path / "report.md"
    code, out, _ = cli(["diagnose", "--markdown-file", str(target), str(log)])
    assert code == 1
    assert "diagnosis:" in out
    page = check_report(target.read_text(), ("Versions", "Timeline", "Root cause", "Remedies"))
    assert any("torch.OutOfMemoryError" in f for f in page.fences())
    assert "`--max-num-batched-tokens 16384`" in target.read_text()


def test_markdown_with_json_on_stdout_is_one_line() -> None:
    code, _, err = cli(["diagnose", "--markdown", "--json", str(LOGS[0])])
    assert code == 2
    assert err.count("\n") == 1
    assert "--markdown" in err


def _run_folder(tmp_path: Path, log: Path) -> Path:
    """A rank's run folder as the node wrapper writes it (cmd, log, exit, pid)."""
    folder = tmp_path / "20261202-004109-ab12-rank0"
    folder.mkdir()
    (folder / "cmd").write_text(
        f"env HF_TOKEN={HF_SECRET} vllm serve Qwen/Qwen3-32B -tp 2 --api-key {SECRET} --host 10.1.2.3\n"
    )
    text = log.read_text()
    (folder / "log").write_text(text + f"INFO echoed args: {{'api_key': '{SECRET}'}}\n")
    (folder / "exit").write_text("1\n")
    (folder / "pid").write_text("4242\n")
    return folder


def test_report_of_a_run_folder(tmp_path: Path) -> None:
    folder = _run_folder(tmp_path, REPO / "tests/fixtures/logs/vllm_0.11_ansi_profile_oom.log")
    code, out, err = cli(["report", str(folder)])
    assert code == 1, err
    page = check_report(out, ("Command", "Timeline", "Root cause", "Remedies"), (SECRET, HF_SECRET))
    command = next(f for f in page.fences() if "vllm serve" in f)
    assert "--api-key <redacted>" in command
    assert "HF_TOKEN=<redacted>" in command
    assert "server exit status 1" in out
    assert "10.1.2.3" in out
    _, hidden, _ = cli(["report", "--redact-hosts", str(folder)])
    check_report(hidden, ("Command",), (SECRET, HF_SECRET, "10.1.2.3"))


def test_report_html_embeds_the_timeline(tmp_path: Path) -> None:
    folder = _run_folder(tmp_path, REPO / "tests/fixtures/logs/vllm_0.11_ansi_profile_oom.log")
    target = tmp_path / "report.html"
    svg = tmp_path / "timeline.svg"
    code, _, err = cli(["report", "--html", "-o", str(target), "--timeline", str(svg), str(folder)])
    assert code == 1, err
    page = target.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert "<svg" in page
    assert "<table>" in page
    assert SECRET not in page
    assert HF_SECRET not in page
    assert svg.read_text().startswith("<svg")


def test_report_of_a_folder_that_is_not_a_run_folder(tmp_path: Path) -> None:
    code, out, err = cli(["report", str(tmp_path)])
    assert code == 2
    assert not out
    assert err.count("\n") == 1
    assert "no log" in err


def test_run_markdown_of_a_failed_start(tmp_path: Path) -> None:
    """``run --markdown``: the report on stdout, the live output on stderr, secrets out."""
    port = free_port()
    argv = fake("config", port, "--teardown", "0.2", "--api-key", SECRET)
    code, out, err = cli(
        ["run", "--markdown", "--timeline", str(tmp_path / "t.svg"), "--grace", "2s", "--", *argv],
        {"HF_TOKEN": HF_SECRET},
    )
    assert code == 1, err
    assert "FAILED" in err  # the usual output
    page = check_report(
        out, ("Versions", "Command", "Plan", "Timeline", "Root cause"), (SECRET, HF_SECRET)
    )
    assert any("max_model_len" in f for f in page.fences())
    assert "Python (bringup's)" in out
    assert (tmp_path / "t.svg").read_text().count('class="phase"') >= 2
    assert processes_running(port) == []


def test_plan_markdown_has_the_per_gpu_lines_and_verdict() -> None:
    code, out, err = cli(["plan", "--markdown", "--gpu", "H100", "-tp", "2", "Qwen3-32B"])
    assert code == 0, err
    assert "verdict" in err  # the usual output, on stderr
    page = check_report(out, ("Versions", "Plan"))
    assert page.headings()[0] == "bringup plan Qwen3-32B: FITS"
    assert "| KV cache |" in out
    assert "**verdict**: FITS" in out


def test_watch_markdown_of_a_log(tmp_path: Path) -> None:
    """``watch --log --markdown``: the report of a startup bringup did not start."""
    log = tmp_path / "server.log"
    log.write_text((REPO / "tests/fixtures/logs/vllm_0.11_ansi_profile_oom.log").read_text())
    code, out, err = cli(
        ["watch", "--log", str(log), "--from-start", "--markdown", "--stall", "20s"]
    )
    assert code == 1, err
    page = check_report(out, ("Versions", "Timeline", "Root cause", "Remedies"))
    assert page.headings()[0].startswith("bringup watch")
    assert any("torch.OutOfMemoryError" in f for f in page.fences())
