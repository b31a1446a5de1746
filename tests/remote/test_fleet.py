"""status --hosts FILE: one row per service across several real ssh hosts, one of them unreachable."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from bringup.core import fleet
from bringup.errors import InputError

from builders.sshd import SshServer, cli, require_sshd, running_sshd, ssh_env

BANNER = "(APIServer pid=1) INFO 11-30 09:47:00 [api_server.py:1] vLLM API server version 0.33.0"
LOADING = "(EngineCore pid=2) INFO 11-30 09:47:01 [core.py:139] Starting to load model m..."
OOM = (
    "(EngineCore pid=2) ERROR 11-30 09:47:02 [core.py:700] torch.OutOfMemoryError: CUDA out of memory "
    "occurred when warming up sampler with 1024 dummy requests."
)

SYSTEMCTL = """
import sys, os
args = [a for a in sys.argv[1:] if a != "--user"]
path = os.path.join(HERE, "states", args[1])
if args[0] == "show" and os.path.exists(path):
    print(open(path).read(), end="")
elif args[0] == "show":
    print("LoadState=not-found\\nActiveState=inactive\\nSubState=dead")
else:
    sys.exit(1)
"""
JOURNALCTL = """
import sys, os
unit = sys.argv[sys.argv.index("-u") + 1]
path = os.path.join(HERE, "journals", unit)
if os.path.exists(path):
    print(open(path).read(), end="")
"""


def _host(base: Path, units: dict[str, tuple[str, list[str]]], gpu_used_mib: int) -> Path:
    """Fake systemctl/journalctl/nvidia-smi for one host: unit -> (ActiveState/SubState, journal lines)."""
    bin_dir = base / "bin"
    for d in (bin_dir, base / "states", base / "journals"):
        d.mkdir(parents=True)
    head = f"HERE = {str(base)!r}\n"
    for name, body in (
        ("systemctl", SYSTEMCTL),
        ("journalctl", JOURNALCTL),
        ("nvidia-smi", f"print('0, NVIDIA H100 80GB HBM3, {gpu_used_mib}, 81559')\n"),
    ):
        (bin_dir / name).write_text(f"#!{sys.executable}\n{head}{body}")
        (bin_dir / name).chmod(0o755)
    for unit, (state, lines) in units.items():
        active, sub = state.split("/")
        (base / "states" / unit).write_text(
            f"LoadState=loaded\nActiveState={active}\nSubState={sub}\nMainPID=0\nNRestarts=0\nResult=success\n"
            "ExecMainStatus=1\nExecMainCode=1\nInvocationID=inv1\n"
            "ExecStart={ path=/usr/bin/vllm ; argv[]=/usr/bin/vllm serve m --port 1 ; }\nEnvironment=\n"
        )
        (base / "journals" / unit).write_text(
            "".join(
                json.dumps(
                    {
                        "MESSAGE": m,
                        "__REALTIME_TIMESTAMP": str(1764495000000000 + i),
                        "_SYSTEMD_INVOCATION_ID": "inv1",
                    }
                )
                + "\n"
                for i, m in enumerate(lines)
            )
        )
    return bin_dir


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[SshServer], Path]]:
    """Two real sshd hosts with fake systemd and nvidia-smi, and one ssh_config reaching both."""
    require_sshd()
    base = tmp_path_factory.mktemp("fleet")
    a = _host(
        base / "a",
        {
            "vllm-llama.service": ("failed/failed", [BANNER, LOADING, OOM]),
            "vllm-qwen.service": ("activating/start", [BANNER, LOADING]),
        },
        71680,
    )
    b = _host(base / "b", {"vllm-mistral.service": ("activating/start", [BANNER])}, 4)
    with ExitStack() as stack:
        servers = [
            stack.enter_context(running_sshd(base / f"sshd-{n}", extra_path=p))
            for n, p in (("a", a), ("b", b))
        ]
        known = base / "known_hosts"
        known.write_text("".join(s.known_hosts.read_text() for s in servers))
        config = base / "config"
        config.write_text(
            "Host *\n"
            + "".join(f"  IdentityFile {s.client_key}\n" for s in servers)
            + f"  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n  GlobalKnownHostsFile /dev/null\n"
        )
        yield servers, config


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _inventory(path: Path, servers: list[SshServer]) -> Path:
    dead = f"nobody@127.0.0.1:{_closed_port()}"
    path.write_text(
        f'[[host]]\naddress = "{servers[0].target_text}"\nunits = ["vllm-llama", "vllm-qwen"]\n\n'
        f'[[host]]\naddress = "{servers[1].target_text}"\nunits = ["vllm-mistral"]\n\n'
        f'[[host]]\naddress = "{dead}"\nunits = ["vllm-big"]\n'
    )
    return path


def test_fleet_json_has_one_row_per_service(
    hosts: tuple[list[SshServer], Path], tmp_path: Path
) -> None:
    """--json: every unit of every host, with state, phase, GPUs and last failure; the dead host carries its error."""
    servers, config = hosts
    code, out, _ = cli(
        ["status", "--hosts", str(_inventory(tmp_path / "fleet.toml", servers)), "--json"],
        ssh_env(config),
    )
    rows = json.loads(out)
    assert code == 1
    assert [(r["host"], r["unit"]) for r in rows] == [
        (servers[0].target_text, "vllm-llama.service"),
        (servers[0].target_text, "vllm-qwen.service"),
        (servers[1].target_text, "vllm-mistral.service"),
        (rows[3]["host"], "vllm-big.service"),
    ]
    llama, qwen, mistral, big = rows
    assert set(llama) == {
        "schema_version",
        "host",
        "unit",
        "state",
        "verdict",
        "phase",
        "ready_since",
        "gpus",
        "last_failure",
        "error",
    }
    assert (llama["state"], llama["verdict"], llama["error"]) == ("failed/failed", "failed", None)
    assert llama["last_failure"].startswith("cuda_oom")
    assert llama["gpus"][0]["used_bytes"] == 71680 * 2**20
    assert (qwen["verdict"], qwen["phase"]) == ("starting", "weights_loading")
    assert mistral["gpus"][0]["used_bytes"] == 4 * 2**20
    assert big["state"] is None
    assert "cannot connect" in big["error"]


def test_fleet_table(hosts: tuple[list[SshServer], Path], tmp_path: Path) -> None:
    """The table has a header and one line per service, the unreachable host included."""
    servers, config = hosts
    code, out, _ = cli(
        ["status", "--hosts", str(_inventory(tmp_path / "fleet.toml", servers))], ssh_env(config)
    )
    lines = out.splitlines()
    assert code == 1
    assert lines[0].split()[:3] == ["HOST", "UNIT", "STATE"]
    assert len(lines) == 5
    assert "cuda_oom" in lines[1]
    assert "unreachable" in lines[4]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({}, "no [[host]]"),
        ({"host": [{"units": ["a"]}]}, "address"),
        ({"host": [{"address": "gpu1", "units": []}]}, "units"),
    ],
)
def test_bad_inventory(data: dict[str, object], problem: str) -> None:
    """An inventory without hosts, addresses or units is refused, saying what is missing."""
    with pytest.raises(InputError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        fleet.parse_inventory(data)


def test_status_of_one_remote_unit(hosts: tuple[list[SshServer], Path]) -> None:
    """status NAME --host: systemctl, journalctl and nvidia-smi run on the host; exit 1 for a failed unit."""
    servers, config = hosts
    code, out, _ = cli(
        ["status", "vllm-llama", "--host", servers[0].target_text, "--json"], ssh_env(config)
    )
    report = json.loads(out)
    assert code == 1
    assert report["verdict"] == "failed"
    assert report["failure"]["class"] == "cuda_oom"
    assert report["gpus"][0]["used_bytes"] == 71680 * 2**20
