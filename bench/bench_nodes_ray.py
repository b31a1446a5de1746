"""Multi-node with Ray as the runtime: bringup against vLLM alone, and against the MP runtime,
in one run (interleaved rounds).

Two network namespaces with a real sshd each (tests/builders/netns.py), real Ray 2.60 and real
vLLM 0.32 CPU (scripts/install-ray.sh), the tiny model, tensor parallel 2. vLLM's CPU build
cannot run on Ray: its platform has no Ray device. So no model answers through Ray here, and
what is measured is what can be:
- the verdict a user gets for `vllm serve ... --distributed-executor-backend ray` on the CPU
  build. With bringup, the pre-flight refuses it (`bringup run --nodes`, wall time to exit).
  With vLLM alone, `ray start --head` on node 0 and `ray start --address` on node 1 by hand,
  then `vllm serve` on node 0, until vLLM exits with its own line;
- past the pre-flight (the follower in process, as the CLI runs it): launch to the Ray cluster
  up (both nodes joined), to vLLM's first phase on node 0, and to the verdict naming node 0;
- a Ray node that dies (node 1's raylet SIGKILLed once the cluster is up): how long bringup
  takes to name it after the kill. With Ray alone, node 1's `ray start --block` exits and
  nothing tells node 0's user;
- the MP runtime in the same rounds: `bringup run --nodes` launch to vLLM's first phase on
  node 0 and to the first answer;
- the peak RSS of the Ray processes per node, and of Ray and vLLM together.
vLLM's placement-group wait cannot be reached on the CPU build: its device check comes first.
Its length, 1800 s (PG_WAIT_TIMEOUT in vllm/v1/executor/ray_utils.py), is read from the code,
not measured. Writes the Ray section at the top of bench/results/nodes.md and leaves the MP
section below it. Needs root, sshd and the Ray venv. Run it as
``/work/locks/with-vllm-slot --both /work/locks/measure .venv/bin/python bench/bench_nodes_ray.py``.
Nothing here asserts.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from bringup.core.live import ClusterEvent  # noqa: E402
from nodes.test_real_ray_two_nodes import RAY_ARGS, SERVE, RayNodes  # noqa: E402
from nodes.test_real_two_nodes import TwoNodes  # noqa: E402

from builders.netns import cluster, unavailable_reason  # noqa: E402
from builders.ray_env import ray_problem, ray_venv  # noqa: E402
from builders.vllm_env import tiny_model, vllm_problem  # noqa: E402

OUT = HERE / "results" / "nodes.md"
ROUNDS = 2
BEGIN, END = "<!-- ray: bench/bench_nodes_ray.py -->", "<!-- /ray -->"
BRINGUP = Path(sys.executable).with_name("bringup")


def _env(ray: RayNodes) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "NO_COLOR": "1",
        "BRINGUP_SSH_CONFIG": str(ray.cluster.ssh_config),
        "BRINGUP_NODES_DIR": str(ray.work / "runs"),
    }


def _preflight_refusal(ray: RayNodes) -> tuple[float, str]:
    argv = [str(BRINGUP), "run", "--nodes", str(ray.nodes_file("pre")), "--json"]
    argv += [f"--ray-arg={a}" for a in RAY_ARGS]
    argv += ["--", "vllm", "serve", str(ray.model), *SERVE]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env=_env(ray), timeout=120)
    wall = time.monotonic() - started
    problems = json.loads(done.stdout.splitlines()[0])["problems"]
    return wall, f"exit {done.returncode}, {problems[0]['check']}: {problems[0]['message'][:60]}..."


def _bare(ray: RayNodes, i: int) -> dict[str, float | str | None]:
    """By hand: ray start on both nodes (head first, until it says it is up), then vllm serve on
    node 0 until it exits; every process killed afterwards (they are all in our namespaces)."""
    plan = ray.plan(f"bare{i}")
    nodes = ray.cluster.nodes
    logs = ray.work / f"bare{i}"
    logs.mkdir(parents=True, exist_ok=True)
    env = [dict(n.env) for n in plan.nodes]
    procs: list[subprocess.Popen[bytes]] = []

    def launch(rank: int, argv: tuple[str, ...], name: str, extra: dict[str, str]) -> Path:
        log = logs / name
        with log.open("wb") as sink:
            words = ["env", *(f"{k}={v}" for k, v in {**env[rank], **extra}.items()), *argv]
            procs.append(
                subprocess.Popen(
                    nodes[rank].exec_argv(["setsid", *words]), stdout=sink, stderr=subprocess.STDOUT
                )
            )
        return log

    def wait_for(log: Path, text: str, limit: float = 120.0) -> None:
        deadline = time.monotonic() + limit
        while text not in log.read_text(errors="replace") and time.monotonic() < deadline:
            time.sleep(0.1)

    started = time.monotonic()
    out: dict[str, float | str | None] = {}
    try:
        unbuffered = {"PYTHONUNBUFFERED": "1"}
        head = launch(0, plan.commands[0], "ray0.log", unbuffered)
        wait_for(head, "Ray runtime started.")
        worker = launch(1, plan.commands[1], "ray1.log", unbuffered)
        wait_for(worker, "Ray runtime started.")
        out["cluster"] = time.monotonic() - started
        launch(0, plan.serve_command, "vllm.log", dict(plan.serve_env))
        serve = procs[-1]
        try:
            serve.wait(300)
        except subprocess.TimeoutExpired:
            out["vllm_exit"] = None
        else:
            out["vllm_exit"] = time.monotonic() - started
            out["code"] = serve.returncode
        text = (logs / "vllm.log").read_text(errors="replace")
        out["line"] = next(
            (ln for ln in text.splitlines() if "does not support ray" in ln), "no such line"
        )
    finally:
        for node in nodes:
            for pid in node.pids():
                with contextlib.suppress(OSError):
                    if Path(f"/proc/{pid}/comm").read_text().strip() != "sshd":
                        os.kill(pid, signal.SIGKILL)
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(10)
        for temp in plan.ray_temp_dirs:
            subprocess.run(["rm", "-rf", temp], check=False)
    return out


def _followed(ray: RayNodes, i: int, *, kill: bool) -> dict[str, float | None]:
    plan = ray.plan(f"{'kill' if kill else 'cpu'}{i}")
    started = time.monotonic()
    marks: dict[str, float | None] = {"killed": None}

    def hook(event: ClusterEvent) -> None:
        now = time.monotonic() - started
        if event.event == "joined" and event.fields.get("rank") == 1:
            marks["cluster"] = now
            if kill:
                for pid in ray.cluster.nodes[1].pids():
                    with contextlib.suppress(OSError):
                        if Path(f"/proc/{pid}/comm").read_text().strip() == "raylet":
                            os.kill(pid, signal.SIGKILL)
                            marks["killed"] = time.monotonic() - started
        if event.event == "phase" and event.fields.get("rank") == 0 and "vllm" not in marks:
            marks["vllm"] = now
        if event.event == "failure" and "verdict" not in marks:
            marks["verdict"] = now
            marks["rank"] = float(event.fields["rank"])

    result, _ = ray.follow(plan, on_event=hook)
    marks["end"] = time.monotonic() - started
    marks["exit"] = float(result.exit_code)
    return marks


def _mp(two: TwoNodes, i: int) -> dict[str, float | None]:
    started = time.monotonic()
    proc = two.start(two.nodes_file(f"mp{i}"))
    marks: dict[str, float | None] = {}
    assert proc.stdout is not None
    for line in proc.stdout:
        event = json.loads(line)
        now = time.monotonic() - started
        if event["event"] == "phase" and event.get("rank") == 0 and "vllm" not in marks:
            marks["vllm"] = now
        if event["event"] in ("ready", "summary"):
            marks["ready" if event["event"] == "ready" else "failed"] = now
            break
    proc.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=120)
    if proc.returncode is None:
        proc.kill()
        proc.communicate()
    return marks


def _med(values: list[float | None]) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return "none"
    each = ", ".join(f"{v:.1f}" for v in values if v is not None)
    return f"{statistics.median(got):.1f} s ({each})"


def main() -> int:
    why = unavailable_reason() or vllm_problem() or ray_problem()
    if why:
        print(f"bench_nodes_ray: skipped: {why}")
        return 0
    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="i18-bench-ray-"))
    (work / "shared").mkdir()
    model = tiny_model(work / "shared")
    refusals, bares, followed, kills, mps = [], [], [], [], []
    with cluster(work / "cluster") as c:
        c.runs.append(work / "runs")
        ray = RayNodes(c, work, model, Path(tempfile.mkdtemp(prefix="i18-rpc-", dir="/tmp")))
        two = TwoNodes(c, work, model)
        for i in range(ROUNDS):  # interleaved
            mps.append(_mp(two, i))
            refusals.append(_preflight_refusal(ray))
            bares.append(_bare(ray, i))
            followed.append(_followed(ray, i, kill=False))
            kills.append(_followed(ray, i, kill=True))
            print(f"round {i}: {mps[-1]} {refusals[-1]} {bares[-1]} {followed[-1]} {kills[-1]}")
    shutil.rmtree(ray.rpc_root, ignore_errors=True)
    load_after = os.getloadavg()
    rss = ray.rss
    mib = {k: v / 2**20 for k, v in rss.items()}
    per_node_ray = [mib.get(f"peak node{r} ray", 0.0) for r in (0, 1)]
    named = [
        (k["verdict"] - k["killed"]) if k.get("verdict") and k.get("killed") else None
        for k in kills
    ]
    summary = [
        (
            "time to a verdict: the CPU build with the Ray backend",
            f"{_med([w for w, _ in refusals])}: refused by the pre-flight, nothing started",
            f"{_med([b.get('vllm_exit') for b in bares])} (ray start on both nodes by hand, then vllm serve until it exits 1 with `current platform cpu does not support ray.`)",
        ),  # type: ignore[misc]
        (
            "past the pre-flight: launch to vLLM's own line named on node 0",
            _med([f.get("verdict") for f in followed]),
            f"{_med([b.get('vllm_exit') for b in bares])} to vLLM's exit",
        ),  # type: ignore[misc]
        (
            "a Ray node dies (node 1's raylet SIGKILLed): named after the kill",
            _med(named),
            "node 1's `ray start --block` exits; node 0 says nothing until a request fails",
        ),
        (
            "launch to the Ray cluster up (both nodes joined)",
            _med([f.get("cluster") for f in followed]),
            f"{_med([b.get('cluster') for b in bares])} by hand (`ray start` on both, head first)",
        ),  # type: ignore[misc]
        (
            "launch to vLLM's first phase on node 0: Ray (past the pre-flight: the cluster first) vs MP (`run --nodes`: the pre-flight first)",
            f"Ray {_med([f.get('vllm') for f in followed])}",
            f"MP {_med([m.get('vllm') for m in mps])}",
        ),
        (
            "launch to first answer: Ray vs MP (same rounds)",
            "Ray: none (vLLM's CPU build cannot serve through Ray)",
            f"MP {_med([m.get('ready') for m in mps])}",
        ),
        (
            "peak RSS of the Ray processes (no engine workers: vLLM stops before placing any)",
            f"node 0 (head) {per_node_ray[0]:.0f} MiB, node 1 {per_node_ray[1]:.0f} MiB",
            f"with vLLM at its failure: {mib.get('peak total', 0.0):.0f} MiB over both nodes",
        ),
        (
            "a placement group the cluster cannot hold",
            "refused by the pre-flight before launch (GPU count vs TP x PP); at vLLM's first `Waiting for creating a placement group` line if it still happens",
            "vLLM waits 1800 s (PG_WAIT_TIMEOUT, from its code; not reachable on the CPU build)",
        ),
    ]
    lines = [
        "# Multi-node (`bringup run --nodes`)",
        "",
        BEGIN,
        f"## Ray as the runtime (Ray 2.60, vLLM 0.32 CPU; {ROUNDS} interleaved rounds, load {load_before[0]:.1f} before / {load_after[0]:.1f} after)",
        "",
        "| what | bringup | vLLM alone / the other runtime |",
        "|---|---|---|",
        *(f"| {a} | {b} | {c_} |" for a, b, c_ in summary),
        "",
        "Two network namespaces, a real sshd each, tensor parallel 2, the tiny model, `--enforce-eager`,",
        f"`ray start` with `{' '.join(RAY_ARGS)}`; run under `/work/locks/measure` (nice -15) on the 2-core machine,",
        "other work sharing it. vLLM's CPU build has no Ray device, so no answer comes through Ray here; the",
        "placement-group wait is vLLM's code, not a measurement. Peak RSS per process name:",
        "",
        "| process | peak RSS |",
        "|---|---|",
        *(f"| {k} | {v:.0f} MiB |" for k, v in sorted(mib.items()) if not k.startswith("peak")),
        "",
        f"Ray venv: {ray_venv()}.",
        END,
        "",
    ]
    old = OUT.read_text() if OUT.exists() else ""
    if END in old:  # this script's section of an earlier run: replaced
        old = old.split(END, 1)[1].lstrip("\n")
    old = old.replace(
        "# Multi-node (`bringup run --nodes`)\n", "## The MP runtime (`--nnodes`)\n", 1
    )
    OUT.write_text("\n".join(lines) + old)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
