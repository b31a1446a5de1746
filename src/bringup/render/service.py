"""Human and JSON output of ``--retry`` (on ``run`` and ``up``) and of ``bringup status``.

``format_*`` return plain strings (pure); the ``RetryReporter`` writes retry events as JSON
Lines on stdout with ``--json`` and as ``bringup:`` lines for people.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TextIO

from bringup.core.attempts import RetryEvent
from bringup.core.retry_policy import Change, Decision
from bringup.core.words import count
from bringup.render.json_out import write_line
from bringup.render.live import format_failure, format_probe
from bringup.units import format_bytes


def format_change(change: Change) -> str:
    """``--max-num-seqs 256`` / ``--enforce-eager`` / ``wait for the GPUs``."""
    if change.wait_for_gpus or change.flag is None:
        return "wait for the GPUs to be free"
    return change.flag + (f" {change.value}" if change.value is not None else "")


def format_retry(event: RetryEvent, retries: int) -> str:
    """``retry 1/2: attempt 2 with --max-num-seqs 256 (lower --max-num-seqs from 1024 ...)``."""
    return f"retry {event.attempt - 1}/{retries}: attempt {event.attempt} with {format_change(event.change)} ({event.change.reason})"


def format_stop(decision: Decision) -> str:
    """Why the last failure was not retried."""
    return f"not retried: {decision.reason}"


class RetryReporter:
    """Reports each retry (and why the loop stopped) to people and, with --json, as JSON Lines."""

    def __init__(self, stdout: TextIO, human: TextIO, *, as_json: bool, retries: int) -> None:
        self.stdout = stdout
        self.human = human
        self.as_json = as_json
        self.retries = retries

    def retry(self, event: RetryEvent) -> None:
        if self.as_json:
            write_line(event.to_json(), self.stdout)
        self._say(format_retry(event, self.retries))

    def stop(self, decision: Decision) -> None:
        self._say(format_stop(decision))

    def note(self, text: str) -> None:
        self._say(text)

    def _say(self, text: str) -> None:
        self.human.write(f"bringup: {text}\n")
        self.human.flush()


# -- bringup status ---------------------------------------------------------------------------------


def format_status(report: Mapping[str, Any]) -> list[str]:
    """The human ``bringup status`` lines from its JSON object."""
    if report.get("container"):
        return _format_container(report)
    if report.get("state") is None:
        return _format_direct(report)
    s = report["state"]
    lines = [f"{report['unit']}: {report['verdict'].upper()}: {report['why']}"]
    pid = f", main pid {s['main_pid']}" if s.get("main_pid") else ""
    restarts = f", {count(s['n_restarts'], 'restart')}" if s.get("n_restarts") else ""
    status = f", exit status {s['exec_main_status']}" if s.get("exec_main_status") else ""
    lines.append(
        f"  unit:    {s['active_state']}/{s['sub_state']} (result {s['result'] or '-'}{pid}{restarts}{status})"
    )
    return lines + _format_rest(report)


def _format_container(report: Mapping[str, Any]) -> list[str]:
    s = report["state"]
    lines = [f"container {report['container']}: {report['verdict'].upper()}: {report['why']}"]
    facts = [f"pid {s['pid']}"] if s.get("pid") else []
    if not s.get("running") or s.get("restarting"):
        facts.append(f"exit code {s['exit_code']}")
    if s.get("restart_count"):
        facts.append(f"{count(s['restart_count'], 'restart')}, policy {s['restart_policy']}")
    if s.get("oom_killed"):
        facts.append("OOMKilled")
    if s.get("health"):
        facts.append(f"health {s['health']}")
    lines.append(f"  state:   {s['status']} ({', '.join(facts) or '-'})")
    return lines + _format_rest(report)


def _format_direct(report: Mapping[str, Any]) -> list[str]:
    """``status --url`` / ``--pid``: a server no unit runs."""
    subject = f"pid {report['pid']}" if report.get("pid") else str(report.get("url"))
    lines = [f"{subject}: {report['verdict'].upper()}: {report['why']}"]
    proc = report.get("process")
    if proc:
        by = proc["started_by_bringup"]
        started = f"started by bringup run (pid {by})" if by else "not started by bringup run"
        lines.append(f"  process: {proc['status']}, {started}: {' '.join(proc['command'])}")
        lines.append(f"  log:     {proc['log'] or proc['log_note']}")
        lines += _format_rest(report)[:1]
        if report.get("failure"):
            lines += ["  " + line for line in format_failure(report["failure"])]
    if report.get("models"):
        lines.append(f"  models:  {', '.join(report['models'])}")
    probe = report.get("probe")
    if probe is not None:
        lines.append(f"  probe:   {format_probe(probe)} at {probe['url']}")
    metrics = report.get("metrics")
    if metrics:
        shown = [f"{k} {v:g}" for k, v in metrics.items() if v is not None]
        lines.append(f"  metrics: {', '.join(shown) or 'none of the load figures'}")
    elif probe is not None and probe.get("ok"):
        lines.append("  metrics: the server has no /metrics")
    return lines


def _format_rest(report: Mapping[str, Any]) -> list[str]:
    lines = [f"  phase:   {report['phase'] or 'no log in this run'}"]
    if report.get("ready_since"):
        lines.append(f"  ready since {report['ready_since']}")
    if report.get("failure"):
        lines += ["  " + line for line in format_failure(report["failure"])]
    for g in report.get("gpus") or []:
        lines.append(
            f"  GPU {g['index']}: {format_bytes(g['used_bytes'])} / {format_bytes(g['total_bytes'])} used"
        )
    if report.get("gpu_note"):
        lines.append(f"  GPUs:    {report['gpu_note']}")
    probe = report.get("probe")
    if probe is not None:
        lines.append(f"  model:   {format_probe(probe)} at {probe['url']}")
    return lines


def print_status(report: Mapping[str, Any], stream: TextIO) -> None:
    """Write ``format_status`` lines."""
    for line in format_status(report):
        stream.write(line + "\n")
    stream.flush()
