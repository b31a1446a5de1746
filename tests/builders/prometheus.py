"""Real Prometheus and node_exporter (Debian's packages), started by a test on loopback on
free ports, with a scrape config the test writes; each is stopped at the end of the test.

Without them the test skips with one line; under ``BRINGUP_REQUIRE_REAL=1`` (CI) it fails.
``scripts/install-real.sh`` installs them (apt, with no service started on the host).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

INSTALL_HINT = "scripts/install-real.sh installs prometheus and prometheus-node-exporter (apt)"


def require(name: str) -> str:
    """The executable's path; skip (one line) without it, fail under BRINGUP_REQUIRE_REAL=1."""
    found = shutil.which(name) or (
        f"/usr/bin/{name}" if os.path.exists(f"/usr/bin/{name}") else None
    )
    if found is not None:
        return found
    if os.environ.get("BRINGUP_REQUIRE_REAL") == "1":
        pytest.fail(
            f"BRINGUP_REQUIRE_REAL=1 but {name} is not installed; {INSTALL_HINT}", pytrace=False
        )
    pytest.skip(f"{name} absent; {INSTALL_HINT}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return str(r.read().decode())


def wait_http(url: str, seconds: float = 60.0) -> None:
    end = time.monotonic() + seconds
    while True:
        try:
            get(url)
            return
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)


@contextmanager
def started(argv: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def node_exporter(textfile_dir: Path, folder: Path) -> Iterator[str]:
    """node_exporter with only its textfile collector, reading ``textfile_dir``; its address."""
    exe = require("prometheus-node-exporter")
    port = free_port()
    argv = [
        exe,
        f"--web.listen-address=127.0.0.1:{port}",
        "--collector.disable-defaults",
        "--collector.textfile",
        f"--collector.textfile.directory={textfile_dir}",
    ]
    with started(argv, folder / "node_exporter.log"):
        wait_http(f"http://127.0.0.1:{port}/metrics")
        yield f"127.0.0.1:{port}"


@contextmanager
def prometheus(targets: dict[str, str], folder: Path, rules: str | None = None) -> Iterator[str]:
    """Prometheus scraping each ``job -> host:port`` every second (and evaluating ``rules``,
    a rule file's text, every second); its base URL."""
    exe = require("prometheus")
    port = free_port()
    jobs = "\n".join(
        f"  - job_name: {job}\n    static_configs:\n      - targets: ['{target}']"
        for job, target in targets.items()
    )
    config = folder / "prometheus.yml"
    rule_files = ""
    if rules is not None:
        (folder / "rules.yml").write_text(rules)
        rule_files = f"rule_files:\n  - {folder / 'rules.yml'}\n"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"{rule_files}scrape_configs:\n{jobs}\n"
    )
    argv = [
        exe,
        f"--config.file={config}",
        f"--storage.tsdb.path={folder / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    with started(argv, folder / "prometheus.log"):
        base = f"http://127.0.0.1:{port}"
        wait_http(f"{base}/-/ready")
        yield base


def query(base: str, promql: str) -> list[dict[str, Any]]:
    """The result vector of an instant PromQL query over the HTTP API."""
    body = json.loads(get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})))
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def wait_value(base: str, promql: str, want: float | None = None, seconds: float = 90.0) -> float:
    """Query until the vector has a sample (equal to ``want`` when given); its value."""
    end = time.monotonic() + seconds
    last: list[dict[str, Any]] = []
    while time.monotonic() < end:
        last = query(base, promql)
        if last and (want is None or float(last[0]["value"][1]) == want):
            return float(last[0]["value"][1])
        time.sleep(0.5)
    raise AssertionError(
        f"{promql}: no sample{'' if want is None else f' = {want}'} in {seconds:g}s: {last}"
    )
