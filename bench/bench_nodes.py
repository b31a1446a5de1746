"""Multi-node: time to a verdict with bringup, against what vLLM alone does.

Two network namespaces with a real sshd each (tests/builders/netns.py), real vLLM CPU on
both (tensor parallel 2 over the two nodes, the tiny model of tests/builders/tiny_hf.py):
- the pre-flight over both nodes (ssh, facts, master port test), passing and refusing
  other weights at the same path;
- a two-node start to ready through ``bringup run --nodes``, and bringup's own part of it
  (pre-flight and launch before the engines print their first line);
- node 1 with another ``-tp``: bringup's verdict, where vLLM alone leaves node 0 waiting for
  ``--distributed-timeout-seconds`` (torch's 30 minutes when none is given; real-parts.md §4:
  with 40 s it exits at about 75 s).
Writes bench/results/nodes.md. Needs root, sshd and the vLLM venv (scripts/install-vllm.sh);
run it under ``/work/locks/with-vllm-slot --both`` on a shared machine. Nothing here asserts.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from nodes.test_real_two_nodes import TwoNodes  # noqa: E402

from builders.netns import cluster, unavailable_reason  # noqa: E402
from builders.vllm_env import tiny_model, vllm_problem  # noqa: E402

OUT = HERE / "results" / "nodes.md"


def _run(two: TwoNodes, nodes_file: Path, *flags: str) -> tuple[float, list[dict[str, object]]]:
    started = time.monotonic()
    proc = two.start(nodes_file, *flags)
    out, _ = proc.communicate(timeout=900)
    return time.monotonic() - started, [json.loads(line) for line in out.splitlines()]


def main() -> int:
    why = unavailable_reason() or vllm_problem()
    if why:
        print(f"bench_nodes: skipped: {why}")
        return 0
    work = Path(tempfile.mkdtemp(prefix="i18-bench-"))
    (work / "shared").mkdir()
    model = tiny_model(work / "shared")
    rows = []
    with cluster(work / "cluster") as c:
        c.runs.append(work / "runs")
        two = TwoNodes(c, work, model)
        ready_file = two.nodes_file("ready")
        t, events = _run(two, ready_file, "--preflight")
        pre = next(e for e in events if e["event"] == "preflight")
        rows.append(
            (
                "pre-flight, 2 nodes, passing",
                f"{pre['seconds']:.2f} s",
                "(nothing: vLLM checks none of it)",
            )
        )
        t, events = _run(two, ready_file, "--exit-when-ready")
        summary = events[-1]
        pre = next(e for e in events if e["event"] == "preflight")
        ttr = summary["time_to_ready_seconds"]
        rows.append(("start to ready over 2 nodes (smoke answered)", f"{ttr:.1f} s", "-"))
        rows.append(("bringup's pre-flight before that start", f"{pre['seconds']:.2f} s", "-"))
        rows.append(
            ("whole `bringup run --nodes --exit-when-ready` (incl. stopping)", f"{t:.1f} s", "-")
        )
        node1 = two.wrapped_vllm("tp1", "-tp", "1")
        t, events = _run(two, two.nodes_file("tp1", node1_bin=node1))
        failure = next((e for e in events if e["event"] == "failure"), None)
        verdict = (
            f"{failure['t']:.1f} s (node {failure['rank']} named)" if failure else "no verdict"
        )
        rows.append(
            (
                "node 1 with another -tp: verdict",
                verdict,
                "node 0 waits 600 s (bringup's default timeout) / 1800 s (torch's) and ignores SIGTERM",
            )
        )
        rows.append(("node 1 with another -tp: whole run incl. stopping both", f"{t:.1f} s", "-"))
    load = os.getloadavg()[0]
    lines = [
        "# Multi-node (`bringup run --nodes`)",
        "",
        f"Two network namespaces, real sshd each, real vLLM 0.32 CPU, tensor parallel 2, tiny model; load average {load:.1f} on this 2-core machine during the run (other work shared it).",
        "vLLM-alone figures are its configured timeouts (real-parts.md §4), not measured in this run.",
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
