"""Real Ray 2.60 and real vLLM 0.32 (CPU build) over two nodes: network namespaces with a real
sshd each, the Ray venv layered over the vLLM venv (scripts/install-ray.sh).

What vLLM's CPU build allows here, and nothing faked beyond it: its CPU platform has no Ray
device key (vllm/platforms/interface.py, ``ray_device_key = ""``), so ``vllm serve
--distributed-executor-backend ray`` joins the cluster and then stops with "current platform
cpu does not support ray." No model is served through Ray on this machine. So:
- ``bringup run --nodes`` refuses the CPU build with the Ray backend in its pre-flight, in
  seconds, starting nothing;
- past the pre-flight (the follower called in process, as the CLI calls it after the checks):
  the real Ray cluster forms (``ray start --head`` on node 0, ``ray start --address`` on node
  1, each in the node wrapper), vLLM starts on node 0 only, joins it, and its own line is
  named on node 0; everything is stopped, nothing left: processes, /dev/shm objects, each
  node's Ray --temp-dir;
- a Ray node that dies (node 1's raylet SIGKILLed once the cluster is up) is named at once,
  by Ray's own line, and the rest stopped.
The Ray processes' memory is sampled in the namespaces and printed (pytest -s shows it).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bringup.adapters.clock import SystemClock
from bringup.adapters.http_probe import HttpProber
from bringup.adapters.ssh import target_from
from bringup.cli.commands.run_nodes import server_factory
from bringup.core import packs
from bringup.core.live import ClusterEvent, NodesResult
from bringup.core.nodes import ClusterPlan, parse_nodes, plan_cluster
from bringup.core.vocab import Engine
from bringup.follow.nodes import NodesConfig, follow_nodes
from nodes.conftest import require_netns
from nodes.test_cluster_machine import Recorder

from builders.netns import Cluster, cluster
from builders.ray_env import ray_venv, require_ray
from builders.vllm_env import require_vllm, shared_folder, tiny_model

pytestmark = [pytest.mark.ssh, pytest.mark.timeout(600)]
BRINGUP = Path(sys.executable).with_name("bringup")
SPEC = packs.get(Engine.VLLM).multinode
SERVE = ["-tp", "2", "--distributed-executor-backend", "ray", "--host", "0.0.0.0", "--port", "8000"]
SERVE += ["--dtype", "float32", "--max-model-len", "512", "--enforce-eager"]
# small Ray nodes: one CPU each, the smallest object store Ray takes
RAY_ARGS = ["--num-cpus", "1", "--object-store-memory", str(80 * 2**20)]


@dataclass
class RayNodes:
    cluster: Cluster
    work: Path
    model: Path
    rpc_root: Path  # short socket folders (sockaddr_un's 107 bytes), removed at the end
    rss: dict[str, int] = field(default_factory=dict)  # the peak RSS seen, by process name

    def nodes_file(self, name: str) -> Path:
        env: dict[int, dict[str, str]] = {}
        for rank in (0, 1):
            home = self.work / name / f"node{rank}"
            dirs = {"TMPDIR": "tmp", "HF_HOME": "hf", "XDG_CACHE_HOME": "cache"}
            dirs["VLLM_CACHE_ROOT"] = "vllm-cache"
            for sub in dirs.values():
                (home / sub).mkdir(parents=True, exist_ok=True)
            rpc = self.rpc_root / f"{name}{rank}"
            rpc.mkdir(exist_ok=True)
            env[rank] = {
                "PATH": f"{ray_venv()}/bin:/usr/bin:/bin",
                "VLLM_CPU_OMP_THREADS_BIND": str(rank),
                "VLLM_CPU_KVCACHE_SPACE": "1",
                "VLLM_RPC_BASE_PATH": str(rpc),
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "VLLM_NO_USAGE_STATS": "1",
                "RAY_USAGE_STATS_ENABLED": "0",
                "PYTHONUNBUFFERED": "1",
                **{k: str(home / v) for k, v in dirs.items()},
            }
        return self.cluster.nodes_file(self.work / f"{name}.nodes", env=env)

    def plan(self, name: str) -> ClusterPlan:
        assert SPEC is not None
        nodes = parse_nodes(self.nodes_file(name).read_text())
        argv = ["vllm", "serve", str(self.model), *SERVE]
        return plan_cluster(
            argv, nodes, SPEC, ray_args=RAY_ARGS, ray_tag=f"i18{os.getpid() % 4096:x}{name[:3]}"
        )

    def follow(self, plan: ClusterPlan, *, on_event=None) -> tuple[NodesResult, Recorder]:  # type: ignore[no-untyped-def]
        assert SPEC is not None
        environ = {"BRINGUP_SSH_CONFIG": str(self.cluster.ssh_config)}

        def target_for(node):  # type: ignore[no-untyped-def]
            return target_from(node.address, accept_new_host_key=False, environ=environ)

        recorder = Recorder()
        factory = server_factory(
            plan,
            target_for,
            root=str(self.work / "runs"),
            run_id=f"r{time.time_ns()}",
            grace_seconds=5.0,
        )
        stop_sampling = threading.Event()
        sampler = threading.Thread(target=self._sample, args=(stop_sampling,), daemon=True)
        sampler.start()
        try:
            result = follow_nodes(
                NodesConfig(plan, SPEC, engine=Engine.VLLM, grace_seconds=5.0, join_seconds=90.0),
                recorder,
                server_for=factory,
                prober=HttpProber(plan.rank0_url),
                clock=SystemClock(),
                on_event=on_event,
            )
        finally:
            stop_sampling.set()
            sampler.join()
        return result, recorder

    def _sample(self, stop: threading.Event) -> None:
        """Every 0.5 s: the RSS of each node's Ray processes and of vLLM's, summed; the peaks."""
        tools = {
            "sshd",
            "sh",
            "bash",
            "tee",
            "sleep",
            "ps",
            "grep",
            "sed",
            "sort",
            "ls",
            "rm",
            "cp",
        }
        while not stop.wait(0.5):
            sums: dict[str, int] = {}
            for node in self.cluster.nodes:
                for pid in node.pids():
                    with contextlib.suppress(OSError, ValueError, IndexError):
                        name = Path(f"/proc/{pid}/comm").read_text().strip()
                        if name in tools:
                            continue
                        rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * 4096
                        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                        # Ray's daemons and workers run Ray's code (or are its binaries); the
                        # rest is vLLM's (its EngineCore starts as `python -c ...spawn_main`)
                        is_ray = b"/ray/" in cmdline or name.startswith(("ray", "gcs_server"))
                        what = "ray" if is_ray else "vllm"
                        for key in (f"node{node.rank} {what}", what, "total"):
                            sums[key] = sums.get(key, 0) + rss
                        if name == "python":  # which of Ray's Python daemons: its script
                            argv = cmdline.split(b"\0")
                            script = next((a for a in argv[1:] if a.endswith(b".py")), b"")
                            name = f"python {Path(script.decode()).name}" if script else name
                            name += "" if is_ray or script else " (vLLM's EngineCore, starting)"
                        name_key = f"node{node.rank} {name}"
                        self.rss[name_key] = max(self.rss.get(name_key, 0), rss)
            for key, value in sums.items():
                self.rss[f"peak {key}"] = max(self.rss.get(f"peak {key}", 0), value)

    def assert_clean(self, plan: ClusterPlan) -> None:
        deadline = time.monotonic() + 15
        while self.cluster.processes_left() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert self.cluster.processes_left() == {}
        assert self.cluster.shm_leftovers() == []
        for temp in plan.ray_temp_dirs:  # each node's Ray --temp-dir: this run's, removed
            assert not Path(temp).exists(), temp


@pytest.fixture(scope="module")
def ray_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayNodes]:
    require_netns()
    require_vllm()
    require_ray()
    shared = shared_folder(tmp_path_factory)
    model = tiny_model(shared)
    work = tmp_path_factory.mktemp("i18-ray")
    with (shared / ".two-nodes.lock").open("w") as lock:  # one two-node module at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        rpc_root = Path(tempfile.mkdtemp(prefix="i18-rpc-", dir="/tmp"))
        try:
            with cluster(work / "cluster") as c:
                c.runs.append(work / "runs")
                nodes = RayNodes(c, work, model, rpc_root)
                yield nodes
                shown = {k: f"{v / 2**20:.0f} MiB" for k, v in sorted(nodes.rss.items())}
                print(f"\nRay + vLLM peak RSS in the namespaces: {json.dumps(shown)}")
        finally:
            shutil.rmtree(rpc_root, ignore_errors=True)


def test_run_nodes_refuses_the_cpu_build_with_ray_in_its_preflight(ray_nodes: RayNodes) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "NO_COLOR": "1",
        "BRINGUP_SSH_CONFIG": str(ray_nodes.cluster.ssh_config),
        "BRINGUP_NODES_DIR": str(ray_nodes.work / "runs"),
    }
    argv = [str(BRINGUP), "run", "--nodes", str(ray_nodes.nodes_file("pre")), "--json"]
    argv += [f"--ray-arg={a}" for a in RAY_ARGS]
    argv += ["--", "vllm", "serve", str(ray_nodes.model), *SERVE]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1, done.stderr
    (event,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert event["event"] == "preflight"
    assert event["ok"] is False
    ((problem),) = event["problems"]
    assert (problem["rank"], problem["check"]) == (0, "placement")
    assert "current platform cpu does not support ray." in problem["message"]
    assert "ray 2.60.0 (Python 3.11.7)" in done.stderr  # each node's facts line
    assert "nothing was started" in done.stderr
    assert ray_nodes.cluster.processes_left() == {}


def test_past_the_preflight_ray_forms_and_vllm_names_its_own_refusal(ray_nodes: RayNodes) -> None:
    plan = ray_nodes.plan("cpu")
    result, r = ray_nodes.follow(plan)
    joined = [(e.fields["rank"], e.fields.get("runtime")) for e in r.events if e.event == "joined"]
    assert joined == [(0, "ray"), (1, "ray")], r.events
    failure = result.summary["failure"]
    assert failure is not None, result.summary
    assert failure["rank"] == 0, failure
    assert "current platform cpu does not support ray." in failure["line"]
    assert result.exit_code == 1
    assert any("starting `vllm serve` on node 0" in note for note in r.notes), r.notes
    nodes = result.summary["nodes"]
    assert [n["ray_joined_t"] is not None for n in nodes] == [True, True]
    ray_nodes.assert_clean(plan)
    # Ray's logs of each node are kept in its run folder
    assert list((ray_nodes.work / "runs").glob("*-rank1/ray-logs/raylet.out"))


def test_a_ray_node_that_dies_is_named_at_once(ray_nodes: RayNodes) -> None:
    plan = ray_nodes.plan("die")
    killed: list[float] = []

    def kill_node1_raylet(event: ClusterEvent) -> None:
        if event.event == "joined" and event.fields.get("rank") == 1 and not killed:
            for pid in ray_nodes.cluster.nodes[1].pids():
                with contextlib.suppress(OSError):
                    if Path(f"/proc/{pid}/comm").read_text().strip() == "raylet":
                        os.kill(pid, signal.SIGKILL)
                        killed.append(time.monotonic())

    result, _ = ray_nodes.follow(plan, on_event=kill_node1_raylet)
    assert killed
    failure = result.summary["failure"]
    assert failure is not None
    assert failure["rank"] == 1, failure
    assert "Ray runtime exited with status 1 (raylet exited with code -9)" in failure["summary"]
    assert "raylet [exit code=-9]" in failure["line"]
    ray_nodes.assert_clean(plan)
