"""Real vLLM (CPU build) over two nodes: network namespaces with a real sshd each, one model
with tensor parallel 2, started and followed by ``bringup run --nodes`` (real-parts.md §4).

One two-node setup (namespaces, sshd, the tiny model) is shared by the module; a vLLM pair
is started once for the healthy path, and each failure of §4 costs one start of node 0
(killed as soon as node 1's fault is known) beside a node 1 that misbehaves:
- `--retry 1` on a KV cache too small for the asked length: the changed command on both
  nodes, both started again; ready across both nodes with a real answer, `status --nodes`,
  then node 1 killed while idle: reported at once (vLLM itself keeps /health at 200 until
  the next request fails);
- node 1 with another -tp, or with a model path that does not exist there (past the
  pre-flight, as a node whose own `vllm` changes its command would be): it exits, and its
  own line names the cause;
- node 1 pointed at another head address: named at its rendezvous line (vLLM alone
  retries until the timeout while node 0 waits);
- node 1 that never starts vLLM: named after --join-timeout; node 0, which vLLM leaves
  waiting 30 minutes and deaf to SIGTERM, is SIGKILLed after the grace.
Each leaves no process in the namespaces and no /dev/shm object its servers held.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from nodes.conftest import require_netns

from builders.netns import Cluster, cluster
from builders.vllm_env import require_vllm, shared_folder, tiny_model, vllm_venv

pytestmark = [pytest.mark.ssh, pytest.mark.timeout(900)]
BRINGUP = Path(sys.executable).with_name("bringup")


@dataclass
class TwoNodes:
    cluster: Cluster
    work: Path
    model: Path

    def nodes_file(
        self, name: str, *, node1_bin: Path | None = None, kv_space: bool = True
    ) -> Path:
        venv = vllm_venv()
        env: dict[int, dict[str, str]] = {}
        for rank in (0, 1):
            home = self.work / name / f"node{rank}"
            dirs = {
                "TMPDIR": "tmp",
                "VLLM_RPC_BASE_PATH": "rpc",
                "HF_HOME": "hf",
                "XDG_CACHE_HOME": "cache",
                "VLLM_CACHE_ROOT": "vllm-cache",
            }
            for sub in dirs.values():
                (home / sub).mkdir(parents=True, exist_ok=True)
            path = f"{venv}/bin:/usr/bin:/bin"
            if rank == 1 and node1_bin is not None:
                path = f"{node1_bin}:{path}"
            env[rank] = {
                "PATH": path,
                "VLLM_CPU_OMP_THREADS_BIND": str(rank),  # the two nodes must not share a core
                **({"VLLM_CPU_KVCACHE_SPACE": "1"} if kv_space else {}),
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "VLLM_NO_USAGE_STATS": "1",
                "PYTHONUNBUFFERED": "1",
                **{k: str(home / v) for k, v in dirs.items()},
            }
        return self.cluster.nodes_file(self.work / f"{name}.nodes", env=env)

    def wrapped_vllm(self, name: str, *extra: str, body: str | None = None) -> Path:
        """A `vllm` for node 1 only that adds ``extra`` flags (a node whose command differs),
        or runs ``body`` (Python with ``argv``, the arguments, and ``real``, vLLM's path)."""
        folder = self.work / name / "bin"
        folder.mkdir(parents=True, exist_ok=True)
        venv = vllm_venv()
        code = body or f"argv = [*argv, *{list(extra)!r}]"
        script = folder / "vllm"
        script.write_text(
            f"#!{venv / 'bin' / 'python'}\nimport os, sys\n"
            f"argv, real = sys.argv[1:], {str(venv / 'bin' / 'vllm')!r}\n{code}\n"
            "os.execv(real, ['vllm', *argv])\n"
        )
        script.chmod(0o755)
        return folder

    def start(
        self, nodes_file: Path, *flags: str, serve: tuple[str, ...] = ("--max-model-len", "512")
    ) -> subprocess.Popen[str]:
        argv = [
            str(BRINGUP),
            "run",
            "--nodes",
            str(nodes_file),
            "--json",
            "--quiet",
            "--grace",
            "3s",
            *flags,
            "--",
            "vllm",
            "serve",
            str(self.model),
            "-tp",
            "2",
            "--host",
            "0.0.0.0",
            "--port",
            "8000",
            "--dtype",
            "float32",
            *serve,
            "--enforce-eager",
        ]
        return subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env()
        )

    def env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "NO_COLOR": "1",
            "BRINGUP_SSH_CONFIG": str(self.cluster.ssh_config),
            "BRINGUP_NODES_DIR": str(self.work / "runs"),
        }

    def status(self, nodes_file: Path) -> subprocess.CompletedProcess[str]:
        argv = [str(BRINGUP), "status", "--nodes", str(nodes_file), "--json"]
        return subprocess.run(argv, capture_output=True, text=True, env=self.env(), timeout=120)

    def assert_clean(self) -> None:
        deadline = time.monotonic() + 10
        while self.cluster.processes_left() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert self.cluster.processes_left() == {}
        assert self.cluster.shm_leftovers() == []


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoNodes]:
    require_netns()
    require_vllm()
    shared = shared_folder(tmp_path_factory)
    model = tiny_model(shared)
    work = tmp_path_factory.mktemp("i18-real")
    # one pair of vLLMs at a time on the machine, whichever pytest-xdist worker runs these
    with (shared / ".two-nodes.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with cluster(work / "cluster") as c:
            c.runs.append(work / "runs")
            yield TwoNodes(c, work, model)


def _events(proc: subprocess.Popen[str], until: str, timeout: float) -> list[dict[str, Any]]:
    """JSON events from bringup's stdout, up to and including the first ``until`` (or the end)."""
    assert proc.stdout is not None
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    for line in proc.stdout:
        event = json.loads(line)
        out.append(event)
        if event["event"] in (until, "summary") or time.monotonic() > deadline:
            break
    return out


def _finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err


def test_retry_then_ready_across_two_nodes_then_node_1_dies_while_idle(two: TwoNodes) -> None:
    # attempt 1: a KV cache too small for 2048 tokens (vLLM names the length that fits);
    # `--retry 1` changes the one command, so every node's, and starts both nodes again
    kv = ("--kv-cache-memory-bytes", "262144", "--max-model-len", "2048")
    proc = two.start(two.nodes_file("ready", kv_space=False), "--retry", "1", serve=kv)
    try:
        events = _events(proc, "ready", 600)
        kinds = [e["event"] for e in events]
        assert "ready" in kinds, (events[-3:], _finish(proc)[1][-3000:])
        preflight = next(e for e in events if e["event"] == "preflight")
        assert preflight["ok"] is True
        first = next(e for e in events if e["event"] == "failure")
        assert first["class"] == "kv_cache_insufficient", first
        (retry,) = [e for e in events if e["event"] == "retry"]
        assert retry["attempt"] == 2
        assert retry["change"]["flag"] == "--max-model-len"
        assert int(retry["change"]["value"]) < 2048
        for rank in (0, 1):  # both nodes ran again, each with the changed command
            (cmd,) = (two.work / "runs").glob(f"*-a2-rank{rank}/cmd")
            assert f"--max-model-len {retry['change']['value']}" in cmd.read_text()
        events = events[events.index(retry) :]
        joined = {e["rank"] for e in events if e["event"] == "joined"}
        assert joined == {0, 1}
        phases = {(e["rank"], e["phase"]) for e in events if e["event"] == "phase"}
        assert (1, "distributed_init") in phases
        assert (0, "api_server_starting") in phases
        assert all(
            "node" in e and "rank" in e for e in events if e["event"] not in ("preflight", "retry")
        )
        ready = events[-1]
        assert ready["rank"] == 0
        assert ready["url"].startswith(f"http://{two.cluster.nodes[0].address}:8000")
        answer = httpx2.post(
            f"http://{two.cluster.nodes[0].address}:8000/v1/completions",
            json={"model": str(two.model), "prompt": "Hello", "max_tokens": 4},
            timeout=120,
        )
        assert answer.status_code == 200
        assert answer.json()["choices"][0]["text"] is not None
        status = two.status(two.work / "ready.nodes")
        assert status.returncode == 0, status.stdout + status.stderr
        report = json.loads(status.stdout)
        assert [n["alive"] for n in report["nodes"]] == [True, True]
        assert report["api"]["ok"] is True
        (pid_file,) = (two.work / "runs").glob("*-a2-rank1/pid")
        os.killpg(int(pid_file.read_text()), signal.SIGKILL)  # node 1 crashes while idle
        rest = _events(proc, "summary", 60)
        failure = next(e for e in rest if e["event"] == "failure")
        assert failure["rank"] == 1
        assert "after the model was ready" in failure["summary"]
        code, _ = _finish(proc)
        assert code == 1
        summary = rest[-1]
        assert summary["outcome"] == "failed"
        assert summary["failure"]["rank"] == 1
        assert [a["attempt"] for a in summary["attempts"]] == [1, 2]
        after = json.loads(two.status(two.work / "ready.nodes").stdout)
        assert [n["alive"] for n in after["nodes"]] == [False, False]  # bringup stopped node 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        _finish(proc)
    two.assert_clean()


def _to_verdict(two: TwoNodes, nodes_file: Path, *flags: str) -> list[dict[str, Any]]:
    """Run to the end; the events, the last being the summary of a failed start (exit 1)."""
    proc = two.start(nodes_file, *flags)
    try:
        events = _events(proc, "summary", 600)
        code, err = _finish(proc)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    assert events[-1]["event"] == "summary", err[-3000:]
    assert code == 1
    return events


def test_node_1_with_another_tp_exits_and_is_named_by_its_own_line(two: TwoNodes) -> None:
    node1 = two.wrapped_vllm("tp1", "-tp", "1")
    events = _to_verdict(two, two.nodes_file("tp1", node1_bin=node1))
    summary = events[-1]
    failure = summary["failure"]
    assert failure["rank"] == 1
    assert failure["class"] == "config_error"
    assert "must evenly divide the total world size (1)" in failure["line"]
    assert "the nodes were not started with the same -tp/-pp/-dp" in failure["summary"]
    two.assert_clean()


def test_node_1_without_the_model_at_its_path_exits_and_is_named(two: TwoNodes) -> None:
    # past the pre-flight (which refuses a missing path): node 1's own `vllm` looks elsewhere
    missing = f"{two.model}-not-here"
    body = f"argv = [{missing!r} if a == {str(two.model)!r} else a for a in argv]"
    node1 = two.wrapped_vllm("missing", body=body)
    events = _to_verdict(two, two.nodes_file("missing", node1_bin=node1))
    failure = events[-1]["failure"]
    assert failure["rank"] == 1
    assert failure["class"] == "missing_or_corrupt_weights"
    assert "HFValidationError" in failure["line"]
    assert f"no model folder at {missing}" in failure["summary"]
    two.assert_clean()


def test_node_1_pointed_at_another_head_is_named_at_its_rendezvous(two: TwoNodes) -> None:
    wrong = two.cluster.host_address  # on the bridge, but no store listens there
    node1 = two.wrapped_vllm("wrongaddr", "--master-addr", wrong)
    events = _to_verdict(two, two.nodes_file("wrongaddr", node1_bin=node1))
    failure = events[-1]["failure"]
    assert failure["rank"] == 1, events[-1]
    head = two.cluster.nodes[0].address
    assert (
        f"connects to {wrong}:29501, but the head (node 0) listens at {head}:29501"
        in (failure["summary"])
    )
    assert f"tcp://{wrong}:29501" in failure["line"] or "TCP client failed" in failure["line"]
    two.assert_clean()


def test_node_1_that_never_starts_is_named_and_node_0_is_killed(two: TwoNodes) -> None:
    node1 = two.wrapped_vllm("never", body="real, argv = '/bin/sleep', ['600']")
    events = _to_verdict(two, two.nodes_file("never", node1_bin=node1), "--join-timeout", "15s")
    summary = events[-1]
    failure = summary["failure"]
    assert failure["rank"] == 1, summary
    assert "printed nothing 15 s after node 0 reached the rendezvous" in failure["summary"]
    node0 = summary["nodes"][0]
    assert node0["phase"] == "distributed_init"  # it waited at the rendezvous
    assert node0["exit_code"] == -9  # deaf to SIGTERM there: SIGKILL after the grace
    two.assert_clean()
