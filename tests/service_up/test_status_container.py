"""`bringup status --container` through the command-runner seam, with `docker inspect` and
`docker logs` outputs shaped as Docker Engine 20.10 writes them (the real dockerd runs in
tests/systemd_real/test_container_real.py)."""

from __future__ import annotations

import io
import json
import socket
from typing import Any

from bringup.adapters.commands import CommandResult, RecordedRunner
from bringup.cli.commands import status
from bringup.cli.main import Context, command_parser
from bringup.core import container

STARTED = "2026-12-01T12:00:00.5Z"  # inspect trims trailing zeros; logs pad to nine digits


def inspect(state: dict[str, Any], port: int, **extra: Any) -> dict[str, Any]:
    return {
        "State": {"Status": "running", "Running": True, "Restarting": False, "OOMKilled": False,
                  "Pid": 4242, "ExitCode": 0, "Error": "", "StartedAt": STARTED,
                  "FinishedAt": "2026-12-01T11:59:59.4Z", **state},
        "RestartCount": 0,
        "HostConfig": {"RestartPolicy": {"Name": "no"}},
        "Config": {"Entrypoint": ["vllm"], "Cmd": ["serve", "/models/m", "--port", str(port)],
                   "Env": ["PATH=/usr/bin"]},
        "NetworkSettings": {"Ports": {}},
        **extra,
    }  # fmt: skip


LOG_OUT = (
    "2026-12-01T11:59:59.300000000Z INFO 12-01 11:59:59 [api_server.py:1800] vLLM API server version 0.11.0\n"
    "2026-12-01T12:00:00.600000000Z INFO 12-01 12:00:00 [api_server.py:1800] vLLM API server version 0.11.0\n"
)
LOG_ERR = (
    "2026-12-01T11:59:59.350000000Z (EngineCore_DP0 pid=43) ERROR 12-01 11:59:59 [core.py:700] "
    "RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests.\n"
)


def call(
    data: dict[str, Any], out: str = LOG_OUT, err: str = LOG_ERR
) -> tuple[int, dict[str, Any]]:
    runner = RecordedRunner(
        {
            ("docker", "inspect", "--type", "container", "m"): CommandResult.ok(
                stdout=json.dumps([data])
            ),
        },
        fallback=lambda argv, _input: CommandResult(tuple(argv), 0, out, err),
    )
    args = command_parser("status").parse_args(
        ["--container", "m", "--json", "--gpus-from", "/nonexistent"]
    )
    args.passthrough = None
    stdout = io.StringIO()
    code = status.run(
        args, Context(stdout=stdout, stderr=io.StringIO(), environ={"NO_COLOR": "1"}), runner=runner
    )
    logs = [c for c in runner.calls if c[:2] == ("docker", "logs")]
    assert logs, runner.calls
    return code, {**json.loads(stdout.getvalue()), "since": logs[-1][4]}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_running_but_not_answering_while_loading_is_starting():
    """Running, the model refuses, the log of this run is mid-startup: starting (exit 3), and
    the previous run's OOM (logged before StartedAt) is not this run's failure."""
    port = closed_port()
    code, report = call(inspect({}, port))
    assert (code, report["verdict"]) == (3, "starting"), report
    assert report["failure"] is None
    assert report["probe"]["ok"] is False
    assert report["url"] == f"http://127.0.0.1:{port}"
    assert report["since"] == "1796126399.400000000"  # the previous run's FinishedAt


def test_a_stopped_run_begins_a_restart_delay_before_its_started_at():
    """StartedAt is set once the process runs: a line it wrote at once is stamped before it."""
    err = "2026-12-01T12:00:00.499000000Z (EngineCore_DP0 pid=43) ERROR 12-01 12:00:00 [core.py:700] RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests.\n"
    code, report = call(
        inspect(
            {
                "Status": "exited",
                "Running": False,
                "ExitCode": 1,
                "FinishedAt": "2026-12-01T12:00:01Z",
            },
            1,
        ),
        out="2026-12-01T12:00:00.498000000Z INFO 12-01 12:00:00 [api_server.py:1800] vLLM API server version 0.11.0\n",
        err=err,
    )
    assert (code, report["verdict"], report["failure"]["class"]) == (1, "failed", "cuda_oom")
    assert report["since"] == "1796126400.400000000"


def test_exited_killed_for_memory_is_failed():
    code, report = call(
        inspect(
            {"Status": "exited", "Running": False, "Pid": 0, "ExitCode": 137, "OOMKilled": True}, 1
        )
    )
    assert (code, report["verdict"]) == (1, "failed")
    assert "OOMKilled" in report["why"]
    assert report["probe"] is None
    assert report["state"]["exit_code"] == 137
    assert report["state"]["pid"] is None


def test_published_port_is_asked_on_the_host():
    ports = {"Ports": {"8000/tcp": [{"HostIp": "0.0.0.0", "HostPort": "18000"}]}}
    data = inspect({}, 8000, NetworkSettings=ports)
    assert container.host_url("http://127.0.0.1:8000", data) == "http://127.0.0.1:18000"
    assert container.host_url("http://127.0.0.1:9000", data) == "http://127.0.0.1:9000"


def test_run_lines_merge_streams_by_time_from_the_start_of_this_run():
    lines = container.run_lines(
        "2026-12-01T12:00:01.000000000Z b\n2026-12-01T12:00:00.100000000Z old\n",
        "2026-12-01T12:00:00.900000000Z a\n",
        container.instant("2026-12-01T12:00:00.5Z") or (0, 0),
    )
    assert [m for _, m in lines] == ["a", "b"]
