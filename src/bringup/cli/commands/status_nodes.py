"""``bringup status --nodes FILE``: every node of a multi-node start, asked at once over ssh.

For each node, the newest run folder that ``bringup run --nodes`` left for its rank: the
server's process group alive or not, its exit status, its last log line, and the GPUs'
memory (``nvidia-smi``, when there is one); then whether rank 0's API answers /health.

Exit codes: 0 every node alive and rank 0 answers, 1 a node is dead or cannot be asked, or
rank 0 does not answer, 3 no run found on any node, 2 usage.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import shlex

from bringup.adapters import files
from bringup.adapters.http_probe import HttpProber, api_key_from
from bringup.adapters.node_process import RUN_ROOT, RUN_ROOT_VARIABLE
from bringup.adapters.ssh import SshRunner, target_from
from bringup.cli.main import Context
from bringup.core import engine_args
from bringup.core.nodes import Node, NodeStatus, nodes_exit_code, parse_node_status, parse_nodes
from bringup.core.probes import ProbeKind
from bringup.errors import BringupError
from bringup.render.json_out import write_line

# $1 the runs root, $2 the rank: the newest run folder of that rank, and what it says now
_SCRIPT = r"""d=$(ls -d "$1"/*-rank"$2" 2>/dev/null | sort | tail -n 1)
[ -n "$d" ] || exit 0
echo "dir $d"
p=$(cat "$d/pid" 2>/dev/null)
echo "pid $p"
if [ -n "$p" ] && kill -0 "-$p" 2>/dev/null; then echo "state alive"; else echo "state dead"; fi
[ -f "$d/exit" ] && echo "exit $(cat "$d/exit")"
echo "cmd $(cat "$d/cmd" 2>/dev/null)"
echo "last $(grep -v '^[[:space:]]*$' "$d/log" 2>/dev/null | tail -n 1)"
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv,noheader,nounits 2>/dev/null | sed 's/^/gpu /'
exit 0"""


def nodes_status(args: argparse.Namespace, ctx: Context) -> int:
    """Ask every node of the nodes file; print the table (or JSON); the exit code."""
    text = files.read_text(args.nodes, limit=1 << 20, what="nodes file")
    nodes = parse_nodes(text, source=files.shown(args.nodes))
    root = ctx.environ.get(RUN_ROOT_VARIABLE) or RUN_ROOT
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        statuses = list(
            pool.map(
                lambda n: _ask(n, root, ctx, getattr(args, "accept_new_host_key", False)), nodes
            )
        )
    url, api_ok, api_error = _api(nodes[0], statuses[0], args, ctx)
    code = nodes_exit_code(statuses, api_ok)
    if args.json:
        obj = {
            "nodes": [s.to_json() for s in statuses],
            "api": {"url": url, "ok": api_ok, "error": api_error},
        }
        write_line(obj, ctx.stdout)
        return code
    out = ctx.stdout
    for s in statuses:
        head = f"node {s.rank} ({s.node})"
        if s.error:
            out.write(f"{head}: cannot be asked: {s.error}\n")
            continue
        if not s.found:
            out.write(f"{head}: no run of bringup run --nodes found\n")
            continue
        state = (
            "alive"
            if s.alive
            else "DEAD" + (f" (exit {s.exit_code})" if s.exit_code is not None else "")
        )
        out.write(f"{head}: {state}, pid {s.pid}\n")
        if s.last_line:
            out.write(f"  last line: {s.last_line}\n")
        for index, name, used, total in s.gpus:
            out.write(f"  GPU {index} {name}: {used / 2**30:.1f}/{total / 2**30:.1f} GiB\n")
    if url:
        answer = "answers /health" if api_ok else f"does not answer ({api_error})"
        out.write(f"rank 0 API {url}: {answer}\n")
    return code


def _ask(node: Node, root: str, ctx: Context, accept_new: bool = False) -> NodeStatus:
    target = target_from(node.address, accept_new_host_key=accept_new, environ=ctx.environ)
    try:
        result = SshRunner(target).run(
            ["sh", "-c", _SCRIPT, "sh", root, str(node.rank)], timeout_seconds=30
        )
    except BringupError as exc:
        return NodeStatus(node.rank, node.address, found=False, error=exc.message)
    return parse_node_status(node, result.stdout)


def _api(
    node0: Node, status: NodeStatus, args: argparse.Namespace, ctx: Context
) -> tuple[str | None, bool | None, str | None]:
    if not status.found or status.command is None:
        return None, None, None
    argv = shlex.split(status.command)
    port = engine_args.get_flag(argv, "--port") or "8000"
    host = node0.env_value("VLLM_HOST_IP") or node0.host
    url = args.url or f"http://{host}:{port}"
    prober = HttpProber(url, api_key=api_key_from(args.api_key, ctx.environ))
    try:
        obs = prober.probe(ProbeKind.HEALTH)
    finally:
        prober.close()
    return url, obs.ok, None if obs.ok else (obs.error or f"HTTP {obs.status}")
