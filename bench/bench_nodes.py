"""Multi-node: time to a verdict with bringup, against what vLLM alone does, in one run.

Two network namespaces with a real sshd each (tests/builders/netns.py), real vLLM CPU on
both (tensor parallel 2 over the two nodes, the tiny model of tests/builders/tiny_hf.py):
- the pre-flight over both nodes (ssh, facts, master port test);
- start to ready over both nodes, interleaved with a bare launch of the same two commands
  (what a user does by hand: each node's vLLM started at once, then completions polled on
  node 0 until one answers); bringup's overhead is the difference of launch-to-answer;
- each failure of real-parts.md §4 through ``bringup run --nodes``: the verdict (when the
  failure event arrived, after launch) and, where node 1 exits, how long after its exit;
- what vLLM alone does in the same cases, observed for a bounded time: node 1's exit where
  it exits, and node 0 left waiting (alive, /health refused) and its answer to SIGTERM.
Writes bench/results/nodes.md with the load before and after. Needs root, sshd and the vLLM
venv (scripts/install-vllm.sh); run it as
``/work/locks/with-vllm-slot --both /work/locks/measure .venv/bin/python bench/bench_nodes.py``
on a shared machine. Nothing here asserts.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx2

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from bringup.core import packs  # noqa: E402
from bringup.core.nodes import parse_nodes, plan_cluster  # noqa: E402
from bringup.core.vocab import Engine  # noqa: E402
from nodes.test_real_two_nodes import TwoNodes  # noqa: E402

from builders.netns import Cluster, cluster, unavailable_reason  # noqa: E402
from builders.vllm_env import tiny_model, vllm_problem  # noqa: E402

OUT = HERE / "results" / "nodes.md"
ROUNDS = 3  # interleaved bare / bringup starts to ready
OBSERVE_SECONDS = 45.0  # vLLM alone: how long node 0 is watched waiting past its rendezvous
SERVE = ["-tp", "2", "--host", "0.0.0.0", "--port", "8000", "--dtype", "float32"]
SERVE += ["--max-model-len", "512", "--enforce-eager"]


@dataclass
class Timed:
    """A bringup run: its JSON events, each with the wall seconds after launch it arrived."""

    events: list[tuple[float, dict[str, object]]] = field(default_factory=list)
    wall: float = 0.0
    code: int | None = None

    def first(self, kind: str) -> tuple[float, dict[str, object]] | None:
        return next(((t, e) for t, e in self.events if e["event"] == kind), None)


def _bringup(two: TwoNodes, nodes_file: Path, *flags: str, until: str = "summary") -> Timed:
    """Launch ``bringup run --nodes``; every event stamped on arrival; stop it at ``until``."""
    started = time.monotonic()
    proc = two.start(nodes_file, *flags)
    out = Timed()
    assert proc.stdout is not None
    for line in proc.stdout:
        event = json.loads(line)
        out.events.append((time.monotonic() - started, event))
        if event["event"] in (until, "summary"):
            break
    if until != "summary":
        proc.send_signal(signal.SIGTERM)  # stop after the figure: not part of it
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=120)
    if proc.returncode is None:
        proc.kill()
        proc.communicate()
    out.wall = time.monotonic() - started
    out.code = proc.returncode
    return out


def _exit_after(two: TwoNodes, rank: int, launched_wall: float) -> float | None:
    """When node ``rank``'s server of the newest run exited, in seconds after the launch."""
    folders = sorted((two.work / "runs").glob(f"*-rank{rank}"))  # named by time
    exit_file = folders[-1] / "exit" if folders else None
    if exit_file is None or not exit_file.exists():
        return None
    return exit_file.stat().st_mtime - launched_wall


# -- vLLM alone ---------------------------------------------------------------------------


class Bare:
    """Each node's vLLM started directly in its namespace (no bringup), killed afterwards."""

    def __init__(self, c: Cluster, nodes_file: Path, ranks: Sequence[int], log_dir: Path) -> None:
        spec = packs.get(Engine.VLLM).multinode
        assert spec is not None
        nodes = parse_nodes(nodes_file.read_text())
        model = os.environ["I18_BENCH_MODEL"]
        plan = plan_cluster(["vllm", "serve", model, *SERVE], nodes, spec)
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.logs: dict[int, Path] = {}
        log_dir.mkdir(parents=True, exist_ok=True)
        for rank in ranks:
            node = nodes[rank]
            env = {"HOME": "/root", **dict(node.env)}
            log = log_dir / f"node{rank}.log"
            self.logs[rank] = log
            with log.open("wb") as sink:
                self.procs[rank] = subprocess.Popen(
                    c.nodes[rank].exec_argv(["env", "-i", *(f"{k}={v}" for k, v in env.items())])
                    + list(plan.commands[rank]),
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
        self.url = plan.rank0_url
        self.model = model
        self.shm: set[str] = set()
        self._sampling = True
        threading.Thread(target=self._sample, daemon=True).start()

    def _session_shm(self) -> set[str]:
        sessions = {p.pid for p in self.procs.values()}
        names: set[str] = set()
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            with contextlib.suppress(OSError):
                if os.getsid(int(pid)) not in sessions:
                    continue
                for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
                    if "/dev/shm/" in line:
                        names.add(line.rsplit("/dev/shm/", 1)[1].split(" ")[0])
        return names

    def _sample(self) -> None:
        while self._sampling:
            self.shm |= self._session_shm()
            time.sleep(2)

    def text(self, rank: int) -> str:
        return self.logs[rank].read_text(errors="replace")

    def answered(self) -> bool:
        with contextlib.suppress(httpx2.HTTPError, OSError):
            r = httpx2.post(
                f"{self.url}/v1/completions",
                json={"model": self.model, "prompt": "Hello", "max_tokens": 1},
                timeout=30,
            )
            return r.status_code == 200
        return False

    def health(self) -> str:
        try:
            return str(httpx2.get(f"{self.url}/health", timeout=2).status_code)
        except (httpx2.HTTPError, OSError) as exc:
            return "refused" if "refused" in str(exc).lower() else type(exc).__name__

    def sigterm_answer(self, rank: int, wait: float = 10.0) -> str:
        proc = self.procs[rank]
        if proc.poll() is not None:
            return f"had exited ({proc.returncode})"
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            return f"still running {wait:g} s after SIGTERM"
        return f"exited {proc.returncode} after SIGTERM"

    def kill(self) -> None:
        self.shm |= self._session_shm()
        self._sampling = False
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        time.sleep(0.5)
        held = self._held()
        for name in self.shm:
            if name not in held:
                with contextlib.suppress(OSError):
                    os.unlink(f"/dev/shm/{name}")

    @staticmethod
    def _held() -> set[str]:
        held: set[str] = set()
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                with contextlib.suppress(OSError):
                    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
                        if "/dev/shm/" in line:
                            held.add(line.rsplit("/dev/shm/", 1)[1].split(" ")[0])
        return held


def _bare_ready(c: Cluster, nodes_file: Path, log_dir: Path) -> float:
    started = time.monotonic()
    bare = Bare(c, nodes_file, (0, 1), log_dir)
    try:
        while not bare.answered():
            if any(p.poll() is not None for p in bare.procs.values()):
                raise RuntimeError(f"bare launch ended early: {bare.text(0)[-2000:]}")
            if time.monotonic() - started > 900:
                raise RuntimeError("bare launch: no answer in 900 s")
            time.sleep(0.25)
        return time.monotonic() - started
    finally:
        bare.kill()


def _bare_waiting(c: Cluster, nodes_file: Path, log_dir: Path) -> dict[str, str]:
    """node 0 with node 1 pointed elsewhere (its wrapper): watched past node 0's rendezvous."""
    started = time.monotonic()
    bare = Bare(c, nodes_file, (0, 1), log_dir)
    try:
        while "distributed_init_method=" not in bare.text(0):
            if bare.procs[0].poll() is not None or time.monotonic() - started > 900:
                break
            time.sleep(0.5)
        at = time.monotonic() - started
        time.sleep(OBSERVE_SECONDS)
        seen = {
            "rendezvous_s": f"{at:.1f}",
            "watched_s": f"{time.monotonic() - started:.1f}",
            "node0": "alive"
            if bare.procs[0].poll() is None
            else f"exited {bare.procs[0].returncode}",
            "node1": "alive"
            if bare.procs[1].poll() is None
            else f"exited {bare.procs[1].returncode}",
            "health": bare.health(),
        }
        seen["node0_sigterm"] = bare.sigterm_answer(0)
        return seen
    finally:
        bare.kill()


def _bare_exit(c: Cluster, nodes_file: Path, log_dir: Path) -> tuple[float, int | None]:
    """node 1 alone (another -tp, or no model at its path): when it exits, and how."""
    started = time.monotonic()
    bare = Bare(c, nodes_file, (1,), log_dir)
    try:
        code = bare.procs[1].wait(600)
        return time.monotonic() - started, code
    finally:
        bare.kill()


# -- the run -------------------------------------------------------------------------------


def main() -> int:
    why = unavailable_reason() or vllm_problem()
    if why:
        print(f"bench_nodes: skipped: {why}")
        return 0
    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="i18-bench-"))
    (work / "shared").mkdir()
    model = tiny_model(work / "shared")
    os.environ["I18_BENCH_MODEL"] = str(model)
    rows: list[tuple[str, str, str]] = []
    with cluster(work / "cluster") as c:
        c.runs.append(work / "runs")
        two = TwoNodes(c, work, model)
        ready_file = two.nodes_file("ready")
        pre = _bringup(two, ready_file, "--preflight")
        first = pre.first("preflight")
        assert first is not None
        rows.append(
            (
                "pre-flight over 2 nodes (passing)",
                f"{first[1]['seconds']:.2f} s",
                "nothing: vLLM checks none of it",
            )
        )
        bare_ready, ours_ready, ours_ttr = [], [], []
        for i in range(ROUNDS):  # interleaved, bare first
            bare_ready.append(_bare_ready(c, ready_file, work / f"bare-ready{i}"))
            run = _bringup(two, ready_file, until="ready")
            ready = run.first("ready")
            if ready is None:
                raise RuntimeError(f"bringup did not reach ready: {run.events[-2:]}")
            ours_ready.append(ready[0])
            ours_ttr.append(float(ready[1]["t"]))  # type: ignore[arg-type]
        b, o = statistics.median(bare_ready), statistics.median(ours_ready)
        rows.append(
            (
                f"launch to first answer over 2 nodes (median of {ROUNDS}, interleaved)",
                f"{o:.1f} s (" + ", ".join(f"{x:.1f}" for x in ours_ready) + ")",
                f"{b:.1f} s (" + ", ".join(f"{x:.1f}" for x in bare_ready) + ") bare launch",
            )
        )
        rows.append(
            (
                "bringup's overhead (pre-flight, ssh, following; median difference)",
                f"{o - b:+.1f} s ({(o - b) / b:+.0%})",
                "-",
            )
        )
        rows.append(
            (
                "start of the servers to ready (bringup's time_to_ready, median)",
                f"{statistics.median(ours_ttr):.1f} s",
                "-",
            )
        )
        before = [a - t for a, t in zip(ours_ready, ours_ttr, strict=True)]
        rows.append(
            (
                "bringup's own time before the servers start (plan, pre-flight over ssh; median)",
                f"{statistics.median(before):.1f} s ("
                + ", ".join(f"{x:.1f}" for x in before)
                + ")",
                "-",
            )
        )

        elsewhere = c.host_address  # on the bridge, but no store listens there
        not_here = str(model) + "-not-here"
        cases: dict[str, tuple[str, str]] = {  # name: (what, node 1's `vllm` changes argv so)
            "tp1": ("node 1 with another -tp", "argv = [*argv, '-tp', '1']"),
            "missing": (
                "node 1 with no model at its path",
                f"argv = [{not_here!r} if a == {str(model)!r} else a for a in argv]",
            ),
            "wrongaddr": (
                "node 1 with a wrong --master-addr",
                f"argv = [*argv, '--master-addr', {elsewhere!r}]",
            ),
            "never": ("node 1 never started", "real, argv = '/bin/sleep', ['600']"),
        }
        files = {
            name: two.nodes_file(name, node1_bin=two.wrapped_vllm(name, body=body))
            for name, (_, body) in cases.items()
        }
        for name, (label, _) in cases.items():
            launched = time.time()
            run = _bringup(two, files[name])
            failure = run.first("failure")
            exited = _exit_after(two, 1, launched) if name in ("tp1", "missing") else None
            if failure is None:
                verdict = f"no verdict (exit {run.code})"
            else:
                t, f = failure
                verdict = f"{t:.1f} s after launch, node {f['rank']} named"
                if exited is not None:
                    verdict += f"; node 1 exited at {exited:.1f} s: named {t - exited:+.1f} s from its exit"
            alone = {
                "tp1": "node 1 exits (see below); node 0 waits (see below)",
                "missing": "node 1 exits (see below); node 0 waits (see below)",
                "wrongaddr": "node 1 retries, node 0 waits (see below)",
                "never": "node 0 waits (see below)",
            }[name]
            rows.append((f"{label}: verdict", verdict, alone))
            rows.append((f"{label}: whole run incl. stopping both", f"{run.wall:.1f} s", "-"))
        for name in ("tp1", "missing"):
            seconds, code = _bare_exit(c, files[name], work / f"bare-{name}")
            rows.append(
                (f"vLLM alone, {cases[name][0]}: node 1", "-", f"exits {code} at {seconds:.1f} s")
            )
        seen = _bare_waiting(c, files["wrongaddr"], work / "bare-wait")
        rows.append(
            (
                "vLLM alone, node 1 pointed elsewhere / not joining: node 0 (bounded observation)",
                "-",
                (
                    f"at its rendezvous at {seen['rendezvous_s']} s, watched to {seen['watched_s']} s: "
                    f"node 0 {seen['node0']}, node 1 {seen['node1']}, /health {seen['health']}; "
                    f"node 0 {seen['node0_sigterm']}; its own limit is the timeout "
                    "(--distributed-timeout-seconds, torch's 1800 s when none is given)"
                ),
            )
        )
    load_after = os.getloadavg()
    lines = [
        "# Multi-node (`bringup run --nodes`)",
        "",
        "Two network namespaces, real sshd each, real vLLM 0.32 CPU, tensor parallel 2, tiny model, `--enforce-eager`;",
        f"load average {load_before[0]:.1f} before and {load_after[0]:.1f} after the run on this 2-core machine (other work shared it),",
        "run under `/work/locks/measure` (nice -15). bringup's figures and vLLM alone's come from the same run, the starts to",
        "ready interleaved. vLLM alone has no verdict: where a node hangs, it was watched for a bounded time",
        f"({OBSERVE_SECONDS:g} s past node 0's rendezvous) and then sent SIGTERM.",
        "",
        "| what | bringup | vLLM alone |",
        "|---|---|---|",
        *(f"| {a} | {b} | {c} |" for a, b, c in rows),
        "",
    ]
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
