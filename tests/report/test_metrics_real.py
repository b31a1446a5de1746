"""The metrics against the real thing: Debian's Prometheus scrapes ``run --metrics-port`` and
node_exporter's textfile collector reads ``--metrics-textfile``; PromQL over Prometheus's HTTP
API returns the values bringup exported (both ways). Started on loopback on free ports."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from run.helpers import fake, free_port, processes_running

from builders.prometheus import get, node_exporter, prometheus, require, wait_http, wait_value

pytestmark = pytest.mark.timeout(300)


def _exported(url: str, name: str) -> float:
    for line in get(url).splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in {url}")


def test_prometheus_scrapes_bringup_and_node_exporter_reads_its_textfile(tmp_path: Path) -> None:
    require("prometheus")
    require("prometheus-node-exporter")
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    metrics_port, server_port = free_port(), free_port()
    argv = [
        sys.executable, "-m", "bringup", "run",
        "--metrics-port", str(metrics_port),
        "--metrics-textfile", str(textfiles / "bringup.prom"),
        "--", *fake("ready", server_port),
    ]  # fmt: skip
    with (tmp_path / "bringup.log").open("w") as log:
        run = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
        )
    try:
        url = f"http://127.0.0.1:{metrics_port}/metrics"
        wait_http(url)
        with (
            node_exporter(textfiles, tmp_path) as node,
            prometheus({"bringup": f"127.0.0.1:{metrics_port}", "node": node}, tmp_path) as base,
        ):
            assert wait_value(base, 'bringup_ready{job="bringup"}', 1) == 1
            ttr = _exported(url, "bringup_time_to_ready_seconds")
            assert ttr > 0
            assert wait_value(base, 'bringup_time_to_ready_seconds{job="bringup"}') == ttr
            # node_exporter serves the textfile's values as they were written
            assert wait_value(base, 'bringup_ready{job="node"}', 1) == 1
            assert wait_value(base, 'bringup_time_to_ready_seconds{job="node"}') == ttr
            assert wait_value(base, 'bringup_attempts_total{job="node"}') == 1
            assert wait_value(base, 'bringup_startup_phase{job="bringup",phase="ready"}', 1) == 1
            loading = wait_value(
                base, 'bringup_phase_seconds{job="bringup",phase="weights_loading"}'
            )
            assert loading == _exported(url, 'bringup_phase_seconds{phase="weights_loading"}')
            # node_exporter saw no error reading the file
            errors = wait_value(base, 'node_textfile_scrape_error{job="node"}')
            assert errors == 0
    finally:
        run.send_signal(signal.SIGTERM)
        code = run.wait(timeout=60)
    assert code == 0, (tmp_path / "bringup.log").read_text()[-2000:]
    assert processes_running(server_port) == []


def test_a_failed_start_is_a_metric_in_prometheus(tmp_path: Path) -> None:
    """A failed start, read back through node_exporter: bringup_failure{class} = 1."""
    require("prometheus")
    require("prometheus-node-exporter")
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    port = free_port()
    argv = [
        sys.executable, "-m", "bringup", "run", "--grace", "2s",
        "--metrics-textfile", str(textfiles / "bringup.prom"),
        "--", *fake("config", port, "--teardown", "0.2"),
    ]  # fmt: skip
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=120,
        env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 1, done.stderr[-2000:]
    rules = docs_rules()
    with (
        node_exporter(textfiles, tmp_path) as node,
        prometheus({"node": node}, tmp_path, rules) as base,
    ):
        assert wait_value(base, 'bringup_failure{class="config_error"}', 1) == 1
        assert wait_value(base, "bringup_ready") == 0
        # the example alerting rule of docs/cli/metrics.md fires on it
        firing = 'ALERTS{alertname="BringupStartFailed",alertstate="firing",class="config_error"}'
        assert wait_value(base, firing, 1) == 1


def docs_rules() -> str:
    """The alerting rules of docs/cli/metrics.md (the yaml block that holds ``groups:``)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "cli" / "metrics.md").read_text()
    blocks = text.split("```yaml\n")[1:]
    return next(b.split("```")[0] for b in blocks if b.startswith("groups:"))


def test_the_docs_alerting_rules_pass_promtool(tmp_path: Path) -> None:
    promtool = require("promtool")
    rules = tmp_path / "rules.yml"
    rules.write_text(docs_rules())
    done = subprocess.run(
        [promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 2 rules found" in done.stdout
