"""Run `bringup run` / `bringup diagnose` as a user would, against real vLLM, and keep the recording.

``bringup_run`` runs the real CLI in a subprocess with the test's vLLM environment. bringup
echoes the server's own lines verbatim on stderr and prefixes its own with ``bringup:``, so the
server's output (the recording) is stderr without bringup's lines. ``diagnose_recording``
gives that recording to ``bringup diagnose --json``: live and offline must agree.

With ``BRINGUP_RECORD=1`` a test also writes its recording and the live verdict into
tests/fixtures/logs/vllm_cpu_real/ (the fixtures test_recorded_vllm.py checks with no vLLM).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "logs" / "vllm_cpu_real"
RUN_TIMEOUT_SECONDS = 420  # generous: a busy 2-core machine starts vLLM in minutes


@dataclass
class Run:
    """One finished `bringup run`."""

    code: int
    events: list[dict[str, Any]]
    stderr: str

    @property
    def summary(self) -> dict[str, Any]:
        assert self.events, f"no JSON events on stdout; stderr:\n{self.stderr[-3000:]}"
        assert self.events[-1]["event"] == "summary", f"no summary: {self.events[-3:]}"
        return self.events[-1]

    @property
    def failure(self) -> dict[str, Any] | None:
        failure: dict[str, Any] | None = self.summary["failure"]
        return failure

    @property
    def recording(self) -> str:
        """The server's own output, in the order bringup read it."""
        return "".join(
            line
            for line in self.stderr.splitlines(keepends=True)
            if not line.startswith("bringup:")
        )

    def probes(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == "probe" and e.get("probe") == kind]

    def tail(self) -> str:
        return self.stderr[-4000:]


def bringup_argv(*flags: str) -> list[str]:
    return [sys.executable, "-m", "bringup", *flags]


def run_flags(*extra: str) -> list[str]:
    # a failing vLLM may take a while to finish dying on a busy machine; bringup waits up to
    # --grace for its own exit status before SIGTERM
    return ["run", "--engine", "vllm", "--json", "--grace", "30s", *extra]


def events_of(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def bringup_run(
    server: Sequence[str],
    env: Mapping[str, str],
    *flags: str,
    exit_when_ready: bool = True,
    timeout: float = RUN_TIMEOUT_SECONDS,
) -> Run:
    """`bringup run --json [flags] -- SERVER`; returns its exit code, JSON events and stderr."""
    more = ["--exit-when-ready"] if exit_when_ready else []
    argv = bringup_argv(*run_flags(*more, *flags), "--", *server)
    with subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(env),
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # SIGTERM, as a user's Ctrl-C: bringup stops the server it started (never SIGKILL
            # bringup first, which would leave vLLM running)
            proc.terminate()
            out, err = proc.communicate(timeout=120)
            raise AssertionError(
                f"bringup run took more than {timeout:g}s; stderr:\n{err[-3000:]}"
            ) from None
    return Run(proc.returncode, events_of(out), err)


@contextmanager
def bringup_run_live(
    server: Sequence[str], env: Mapping[str, str], *flags: str, log: Path
) -> Iterator[subprocess.Popen[str]]:
    """`bringup run --json` in the background (stdout piped, stderr to ``log``); killed at the end."""
    argv = bringup_argv(*run_flags(*flags), "--", *server)
    with log.open("w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True, env=dict(env))
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def read_until(proc: subprocess.Popen[str], *kinds: str) -> list[dict[str, Any]]:
    """Read JSON events until one of ``kinds`` (or the summary, or the end)."""
    events: list[dict[str, Any]] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("{"):
            events.append(json.loads(line))
            if events[-1]["event"] in (*kinds, "summary"):
                break
    return events


def diagnose(path: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    """`bringup diagnose --json PATH`: (exit code, the verdict)."""
    p = subprocess.run(
        bringup_argv("diagnose", "--json", *flags, str(path)),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert p.stdout.strip(), p.stderr
    return p.returncode, json.loads(p.stdout)


def diagnose_recording(run: Run, folder: Path, name: str) -> tuple[int, dict[str, Any]]:
    path = folder / f"{name}.log"
    path.write_text(run.recording)
    return diagnose(path)


def assert_live_and_offline_agree(run: Run, verdict: dict[str, Any]) -> None:
    """`diagnose` on the recording gives the verdict `run` gave live: outcome, class, phase, line."""
    live = run.failure
    offline = verdict["failure"]
    want_outcome = run.summary["outcome"]
    if live is not None and run.summary.get("time_to_ready_seconds") is not None:
        # it served, then died: offline that is the startup's success and a failure after ready
        assert verdict["outcome"] == "ready", verdict
        after = verdict["after_ready"]
        assert after is not None, f"diagnose saw no failure after ready; live: {live}"
        assert (after["class"], after["line"]) == (live["class"], live["line"]), (after, live)
        return
    assert verdict["outcome"] == want_outcome, (verdict["outcome"], want_outcome, offline)
    if live is None:
        assert offline is None, offline
        return
    assert offline is not None, f"diagnose found no failure; live: {live}"
    assert (offline["class"], offline["phase"]) == (live["class"], live["phase"]), (offline, live)
    assert offline["line"] == live["line"]


def record(name: str, run: Run, how: str, **extra: Any) -> None:
    """With BRINGUP_RECORD=1: keep the recording and the live verdict as fixtures."""
    if os.environ.get("BRINGUP_RECORD") != "1":
        return
    FIXTURES.mkdir(parents=True, exist_ok=True)
    (FIXTURES / f"{name}.log").write_text(run.recording)
    failure = run.failure
    case = {
        "log": f"{name}.log",
        "how": how,
        "outcome": run.summary["outcome"],
        "class": failure["class"] if failure else None,
        "phase": failure["phase"] if failure else None,
        "root_cause_line": failure["line"] if failure else None,
        "remedy_env": sorted({r["env"].split("=")[0] for r in failure["remedy"] if r.get("env")})
        if failure
        else [],
        "remedy_flags": sorted({r["flag"] for r in failure["remedy"] if r.get("flag")})
        if failure
        else [],
        "server_exit_status": run.summary.get("server_exit_status"),
        "stopped_by_bringup": run.summary.get("stopped_by_bringup"),
        **extra,
    }
    (FIXTURES / f"{name}.json").write_text(json.dumps(case, indent=2, sort_keys=True) + "\n")


def record_json(name: str, data: dict[str, Any]) -> None:
    """With BRINGUP_RECORD=1: keep ``data`` (what real vLLM answered) as a fixture."""
    if os.environ.get("BRINGUP_RECORD") != "1":
        return
    FIXTURES.mkdir(parents=True, exist_ok=True)
    (FIXTURES / f"{name}.json").write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def vllm_children(root_pid: int, title: str) -> list[psutil.Process]:
    """Descendants of ``root_pid`` whose process title or name contains ``title`` (EngineCore, Worker)."""
    found = []
    try:
        kids = psutil.Process(root_pid).children(recursive=True)
    except psutil.Error:
        return []
    for c in kids:
        try:
            if title in c.name() or title in " ".join(c.cmdline()):
                found.append(c)
        except psutil.Error:
            continue
    return found


def wait_for_children(root_pid: int, title: str, timeout: float = 300.0) -> list[psutil.Process]:
    """The descendants named ``title`` once there are any; [] after ``timeout`` or as soon as
    ``root_pid`` has ended (its children will never come)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = vllm_children(root_pid, title)
        if found:
            return found
        try:
            if psutil.Process(root_pid).status() == psutil.STATUS_ZOMBIE:
                return []
        except psutil.NoSuchProcess:
            return []
        time.sleep(0.2)
    return []


def cpushm_mapped(root_pid: int) -> set[str]:
    """The ``*-cpushm_*`` objects under /dev/shm that ``root_pid``'s descendants map now (the
    -tp workers of vLLM's CPU build): this run's names, read by the test itself."""
    names = set()
    try:
        kids = psutil.Process(root_pid).children(recursive=True)
    except psutil.Error:
        return names
    for p in kids:
        try:
            with open(f"/proc/{p.pid}/maps") as f:
                for line in f:
                    path = line.split(maxsplit=5)[-1].strip()
                    if path.startswith("/dev/shm/") and "-cpushm_" in path:
                        names.add(path.removeprefix("/dev/shm/"))
        except OSError:
            continue
    return names
