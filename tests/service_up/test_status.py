"""`bringup status` through the command-runner seam, with recorded systemctl and journalctl outputs."""

from __future__ import annotations

import io
import json

from bringup.adapters.commands import CommandResult, RecordedRunner
from bringup.cli.commands import status
from bringup.cli.main import Context, command_parser
from bringup.core import service

UNIT = "vllm-m2.service"
INV = "7c1f2b9a0d4e4f7e9b1a2c3d4e5f6a7b"
SHOW_FAILED = f"""LoadState=loaded
ActiveState=failed
SubState=failed
MainPID=0
NRestarts=1
Result=exit-code
ExecMainStatus=1
ExecMainCode=1
InvocationID={INV}
ActiveEnterTimestamp=
ExecStart={{ path=/usr/local/bin/bringup ; argv[]=/usr/local/bin/bringup run --notify -- /opt/vllm/bin/vllm serve /models/M2 --port 8011 ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }}
Environment=CUDA_VISIBLE_DEVICES=0,1
"""
CAT = "# /etc/systemd/system/vllm-m2.service\n[Service]\nExecStart=/usr/local/bin/bringup run --notify -- /opt/vllm/bin/vllm serve /models/M2 --port 8011\n"
MESSAGES = [
    "(APIServer pid=4242) INFO 11-30 10:00:00 [api_server.py:1800] vLLM API server version 0.11.0",
    "(EngineCore_DP0 pid=4300) INFO 11-30 10:01:10 [gpu_model_runner.py:2000] Graph capturing finished in 5 secs, took 0.50 GiB",
    (
        "(EngineCore_DP0 pid=4300) ERROR 11-30 10:01:11 [core.py:700] RuntimeError: CUDA out of memory occurred when warming up sampler "
        "with 1024 dummy requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine."
    ),
]


def journal(messages: list[str]) -> str:
    return (
        "\n".join(
            json.dumps(
                {
                    "__CURSOR": f"s=abc;i={i}",
                    "MESSAGE": m,
                    "_PID": "4242",
                    "__REALTIME_TIMESTAMP": str(1764496800000000 + i),
                    "_SYSTEMD_INVOCATION_ID": INV,
                }
            )
            for i, m in enumerate(messages)
        )
        + "\n"
    )


def recorded(show: str, messages: list[str]) -> RecordedRunner:
    props = "--property=" + ",".join(service.SHOW_PROPERTIES)
    return RecordedRunner(
        {
            ("systemctl", "show", UNIT, props): CommandResult.ok(stdout=show),
            ("systemctl", "cat", UNIT): CommandResult.ok(stdout=CAT),
            (
                "journalctl",
                "-u",
                UNIT,
                f"_SYSTEMD_INVOCATION_ID={INV}",
                "-o",
                "json",
                "--no-pager",
            ): CommandResult.ok(stdout=journal(messages)),
        }
    )


def call(runner: RecordedRunner, *flags: str) -> tuple[int, str]:
    args = command_parser("status").parse_args(
        ["vllm-m2", "--gpus-from", "/nonexistent/readings.json", *flags]
    )
    args.passthrough = None
    out = io.StringIO()
    code = status.run(
        args,
        Context(stdout=out, stderr=io.StringIO(), stdin=io.StringIO(), environ={"NO_COLOR": "1"}),
        runner=runner,
    )
    return code, out.getvalue()


def test_failed_unit_reports_the_root_cause_of_the_current_invocation():
    """A failed unit: exit 1, the sampler OOM from this invocation's journal, the state from systemctl show."""
    runner = recorded(SHOW_FAILED, MESSAGES)
    code, out = call(runner, "--json")
    report = json.loads(out)
    assert code == 1
    assert report["verdict"] == "failed"
    assert report["failure"]["class"] == "cuda_oom"
    assert report["failure"]["phase"] == "warmup"
    assert report["state"]["n_restarts"] == 1
    assert report["url"] == "http://127.0.0.1:8011"
    assert report["probe"] is None  # not active: the model is not asked
    assert (
        "journalctl",
        "-u",
        UNIT,
        f"_SYSTEMD_INVOCATION_ID={INV}",
        "-o",
        "json",
        "--no-pager",
    ) in runner.calls


def test_activating_unit_is_starting_with_exit_3():
    """An activating unit with no failure in its journal is still starting: exit 3, phase reached shown."""
    show = SHOW_FAILED.replace("ActiveState=failed", "ActiveState=activating").replace(
        "SubState=failed", "SubState=start"
    )
    code, out = call(recorded(show, MESSAGES[:2]))
    assert code == 3
    assert out.startswith(f"{UNIT}: STARTING")
    assert "phase:   warmup" in out


def test_json_when_systemctl_fails_is_json_with_an_error_field():
    """`status --json` prints one JSON object even when systemctl cannot be asked: the
    reason in `error`, verdict unknown, exit 2 (and the one error line on stderr)."""
    props = "--property=" + ",".join(service.SHOW_PROPERTIES)
    runner = RecordedRunner(
        {
            ("systemctl", "show", UNIT, props): CommandResult(
                ("systemctl",), 1, "", "Failed to connect to bus: No such file or directory\n"
            )
        }
    )
    args = command_parser("status").parse_args(["vllm-m2", "--json"])
    args.passthrough = None
    out, err = io.StringIO(), io.StringIO()
    code = status.run(
        args, Context(stdout=out, stderr=err, environ={"NO_COLOR": "1"}), runner=runner
    )
    report = json.loads(out.getvalue())
    assert code == 2
    assert report["unit"] == UNIT
    assert report["verdict"] == "unknown"
    assert "Failed to connect to bus" in report["error"]
    assert set(report) >= {"state", "phase", "failure", "probe", "gpus"}
    assert err.getvalue().startswith("bringup: error: no systemd to ask here: Failed to connect")
    assert "`systemctl show" not in err.getvalue()


def test_json_of_a_look_has_no_error():
    """A successful look carries `error: null`, so scripts can test one field."""
    _, out = call(recorded(SHOW_FAILED, MESSAGES), "--json")
    assert json.loads(out)["error"] is None


def test_a_failed_unit_that_restart_would_restart_names_the_start_limit():
    """systemd 252 says Result=exit-code when the start limit stops the restarts: with
    Restart=on-failure that can only be the limit, and status says so plainly."""
    state = service.UnitState.from_show(
        service.parse_show(
            "LoadState=loaded\nActiveState=failed\nSubState=failed\nResult=exit-code\n"
            "Restart=on-failure\nStartLimitBurst=5\nStartLimitIntervalUSec=30min\n"
        )
    )
    verdict, why = service.derive(service.Look(state, None, None))
    assert verdict is service.Verdict.FAILED
    assert "its start limit (5 starts within 30min) was hit" in why
    no_restart = service.UnitState.from_show(
        service.parse_show("LoadState=loaded\nActiveState=failed\nResult=exit-code\nRestart=no\n")
    )
    assert "start limit" not in service.derive(service.Look(no_restart, None, None))[1]


def test_one_restart_is_said_as_one():
    """The human status says "1 restart", not "1 restart(s)" (counts from core.words)."""
    code, out = call(recorded(SHOW_FAILED, MESSAGES))
    assert code == 1
    assert (
        "  unit:    failed/failed (result exit-code, 1 restart, exit status 1)" in out.splitlines()
    )
    assert "(s)" not in out
