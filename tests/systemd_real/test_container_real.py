"""`bringup watch --container` against a real dockerd (Debian's docker.io 20.10) running as a
Type=notify unit of the namespaced systemd 252 (real-parts.md §3), with a small imported image
that runs the engine twin. bringup reaches docker through the same command prefix."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tarfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from systemd_real.conftest import BRINGUP, bringup, free_port, readings

from builders.sshd import SshServer, cli, ssh_env
from builders.systemd_ns import SystemdNamespace

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "bringup-test-twin"


def _mounts(work: Path) -> list[str]:
    """The image holds only empty folders: the host's system, Python and this checkout are
    mounted read-only (the twin is bringup's own code), the work folder read-write."""
    paths = {
        "/usr",
        "/lib",
        "/lib64",
        "/bin",
        str(ROOT),
        sys.prefix,
        os.path.realpath(sys.base_prefix),
    }
    out: list[str] = []
    for p in sorted(paths):
        if os.path.exists(p):
            out += ["-v", f"{p}:{p}:ro"]
    return [*out, "-v", f"{work}:{work}"]


@pytest.fixture(scope="module")
def docker(systemd: SystemdNamespace, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """dockerd as a unit of the namespaced systemd, with the image imported; stopped after."""
    if shutil.which("dockerd") is None or shutil.which("docker") is None:
        if os.environ.get("BRINGUP_REQUIRE_REAL") == "1":
            pytest.fail("dockerd is required (BRINGUP_REQUIRE_REAL=1): apt-get install docker.io")
        pytest.skip("dockerd is not installed (apt-get install docker.io)")
    work = tmp_path_factory.mktemp("docker")
    name = f"bringup-dockerd-{uuid.uuid4().hex[:6]}"
    (systemd.etc / f"{name}.service").write_text(
        "[Service]\nType=notify\n"
        f"ExecStart=/usr/sbin/dockerd --storage-driver=vfs --bridge=none --iptables=false "
        f"--ip-masq=false --ip-forward=false --data-root={work}/data --exec-root=/run/docker-exec "
        "-H unix:///run/docker.sock\n"
    )
    systemd.systemctl("daemon-reload")
    systemd.start_unit(f"{name}.service")
    rootfs = work / "rootfs.tar"
    with tarfile.open(rootfs, "w") as tar:
        for folder in ("usr", "lib", "lib64", "bin", "tmp", "proc", "dev", "sys", "etc", "root"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
    systemd.run(["docker", "import", str(rootfs), IMAGE])
    try:
        yield work
    finally:
        systemd.run(["sh", "-c", "docker rm -f $(docker ps -aq) 2>/dev/null; true"], check=False)
        systemd.systemctl("stop", f"{name}.service", check=False)


def _run_twin(sd: SystemdNamespace, work: Path, scenario: str) -> tuple[str, int, Path]:
    name = f"i13-twin-{uuid.uuid4().hex[:6]}"
    port = free_port()
    (work / name).mkdir()
    gpus = readings(work / name)
    sd.run(
        ["docker", "run", "-d", "--name", name, "--network=host", *_mounts(work), IMAGE,
         BRINGUP, "twin", "vllm", "--scenario", scenario, "--port", str(port), "--host",
         "127.0.0.1", "--gpus-file", str(gpus), "--time-scale", "0.01"]
    )  # fmt: skip
    return name, port, gpus


def test_watch_container_to_ready(systemd: SystemdNamespace, docker: Path) -> None:
    """A container serving the twin: ready (exit 0) at the port of its command line."""
    name, port, gpus = _run_twin(systemd, docker, "ready")
    result = bringup(
        systemd, "watch", "--container", name, "--deadline", "90s", "--gpus-from", str(gpus)
    )
    assert result.code == 0, result.out[-2000:] + result.err
    assert f"127.0.0.1:{port}" in result.out
    systemd.run(["docker", "rm", "-f", name], check=False)


def test_watch_container_failure_is_the_root_cause(systemd: SystemdNamespace, docker: Path) -> None:
    """The sampler-warmup OOM inside a container: failed (exit 1), cuda_oom in warmup."""
    name, _, gpus = _run_twin(systemd, docker, "oom_warmup")
    result = bringup(
        systemd, "watch", "--container", name, "--deadline", "90s", "--gpus-from", str(gpus)
    )
    assert result.code == 1, result.out[-2000:] + result.err
    assert "FAILED: cuda_oom during warmup" in result.out
    state = systemd.run(["docker", "inspect", "-f", "{{.State.Status}}", name]).stdout.strip()
    assert state in ("running", "exited")  # watch never signals the container
    systemd.run(["docker", "rm", "-f", name], check=False)


def _status(sd: SystemdNamespace, name: str, gpus: Path, **env: str) -> tuple[int, dict[str, Any]]:
    result = bringup(
        sd, "status", "--container", name, "--json", "--gpus-from", str(gpus), environ=env
    )
    return result.code, json.loads(result.out)


def _inspect_state(sd: SystemdNamespace, name: str) -> dict[str, Any]:
    out = sd.run(["docker", "inspect", "--type", "container", name]).stdout
    return dict(json.loads(out)[0]["State"])


def test_status_container_ready_then_failed(systemd: SystemdNamespace, docker: Path) -> None:
    """`status --container` after the twin became ready (running, the model answers: exit 0),
    and of a container whose run died in the sampler warmup (exited: failed, exit 1, the root
    cause from the log of that run)."""
    name, port, gpus = _run_twin(systemd, docker, "ready")
    assert bringup(systemd, "watch", "--container", name, "--deadline", "90s").code == 0
    code, report = _status(systemd, name, gpus)
    assert (code, report["verdict"]) == (0, "ready"), report
    assert report["state"]["status"] == "running"
    assert report["state"]["pid"]
    assert report["url"] == f"http://127.0.0.1:{port}"
    assert report["probe"]["ok"] is True
    assert report["phase"] == "ready"
    assert report["ready_since"]
    assert report["error"] is None
    human = bringup(systemd, "status", "--container", name, "--gpus-from", str(gpus))
    assert human.out.startswith(f"container {name}: READY: running, and the model answered")
    systemd.run(["docker", "rm", "-f", name], check=False)

    name, _, gpus = _run_twin(systemd, docker, "oom_warmup")
    deadline = time.monotonic() + 90
    while _inspect_state(systemd, name)["Status"] != "exited" and time.monotonic() < deadline:
        time.sleep(0.3)
    code, report = _status(systemd, name, gpus)
    assert (code, report["verdict"]) == (1, "failed"), report
    assert report["state"]["status"] == "exited"
    assert report["state"]["exit_code"] != 0
    assert (report["failure"]["class"], report["failure"]["phase"]) == ("cuda_oom", "warmup")
    assert report["probe"] is None  # nothing runs to be asked
    systemd.run(["docker", "rm", "-f", name], check=False)


VERSION = "INFO 12-01 10:00:00 [api_server.py:1800] vLLM API server version 0.11.0"
OOM = (
    "(EngineCore_DP0 pid=43) ERROR 12-01 10:00:01 [core.py:700] RuntimeError: CUDA out of memory"
    " occurred when warming up sampler with 1024 dummy requests. Please try lowering"
    " `max_num_seqs` or `gpu_memory_utilization` when initializing the engine."
)
KV = (
    "(EngineCore_DP0 pid=43) ERROR 12-01 10:00:01 [core.py:700] ValueError: To serve at least one"
    " request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is"
    " larger than the available KV cache memory (4.00 GiB). Based on the available memory, the"
    " estimated maximum model length is 32768."
)
# each run counts itself (on stderr, as vLLM's logging writes: docker stamps the two streams
# apart, so lines microseconds apart on two streams may swap) in the container's own /tmp (kept across restarts): the first dies
# of the sampler-warmup OOM, every later one of too little KV cache
RUNS = (
    'n=$(($(cat /tmp/runs 2>/dev/null || echo 0) + 1)); echo $n > /tmp/runs; echo "$VERSION" >&2;'
    ' if [ $n = 1 ]; then echo "$OOM" >&2; else echo "$KV" >&2; fi; exit 1'
)


def test_status_container_restarting(systemd: SystemdNamespace, docker: Path) -> None:
    """A container docker keeps restarting (--restart=on-failure): while it waits to restart,
    the root cause of its LAST run (not the first run's, not a plain "starting")."""
    name = f"i13-restarts-{uuid.uuid4().hex[:6]}"
    gpus = readings(docker)
    systemd.run(
        ["docker", "run", "-d", "--restart=on-failure", "--name", name, "--network=none",
         "-e", f"VERSION={VERSION}", "-e", f"OOM={OOM}", "-e", f"KV={KV}", *_mounts(docker),
         IMAGE, "/bin/sh", "-c", RUNS]
    )  # fmt: skip
    seen: dict[str, Any] | None = None
    code = None
    deadline = time.monotonic() + 120
    while seen is None and time.monotonic() < deadline:
        # docker's back-off doubles at each restart, so the waits between runs grow: look in one
        state = _inspect_state(systemd, name)
        if not (state["Restarting"] and int(systemd.run(["docker", "inspect", "-f",
                "{{.RestartCount}}", name]).stdout) >= 1):  # fmt: skip
            time.sleep(0.05)
            continue
        code, report = _status(systemd, name, gpus)
        if report["state"]["restarting"]:
            seen = report
    systemd.run(["docker", "rm", "-f", name], check=False)
    assert seen is not None, "the container was never seen restarting"
    assert (code, seen["verdict"], seen["state"]["status"]) == (1, "failed", "restarting"), seen
    assert "docker is restarting it (policy on-failure" in seen["why"]
    assert seen["state"]["restart_count"] >= 1
    assert seen["state"]["exit_code"] == 1
    assert seen["failure"]["class"] == "kv_cache_insufficient", seen["failure"]


def test_status_container_json_when_docker_fails(systemd: SystemdNamespace, docker: Path) -> None:
    """--json always prints one object: no such container (exit 2), dockerd unreachable."""
    gpus = readings(docker)
    result = bringup(
        systemd, "status", "--container", "i13-none", "--json", "--gpus-from", str(gpus)
    )
    report = json.loads(result.out)
    assert result.code == 2
    assert report["verdict"] == "unknown"
    assert report["state"] is None
    assert "no container i13-none" in report["error"]
    assert "No such" in report["error"]
    result = bringup(
        systemd, "status", "--container", "x", "--json", "--gpus-from", str(gpus),
        environ={"DOCKER_HOST": f"unix://{docker}/no-dockerd.sock"},
    )  # fmt: skip
    report = json.loads(result.out)
    assert result.code != 0
    assert report["container"] == "x"
    assert "Cannot connect to the Docker daemon" in report["error"], report
    assert result.err.startswith("bringup: error:")


def _remote_status(
    host: tuple[SshServer, Path], name: str, gpus: Path, *more: str
) -> tuple[int, dict[str, Any], str]:
    """`bringup status --container NAME --host H --json` with no command prefix: docker is
    reached over ssh only (the sshd puts each session inside the namespaces of its dockerd)."""
    server, config = host
    code, out, err = cli(
        ["status", "--container", name, "--host", server.target_text, "--json",
         "--gpus-from", str(gpus), *more],
        ssh_env(config),
    )  # fmt: skip
    return code, json.loads(out), err


def test_status_container_over_ssh(
    systemd: SystemdNamespace, docker: Path, host: tuple[SshServer, Path]
) -> None:
    """`status --container --host` against the remote dockerd: a ready container (its model
    asked on the host), one that died in the sampler warmup (the root cause from the host's
    `docker logs`), and no such container (exit 2, one JSON object with `error`)."""
    name, port, gpus = _run_twin(systemd, docker, "ready")
    assert bringup(systemd, "watch", "--container", name, "--deadline", "90s").code == 0
    code, report, err = _remote_status(host, name, gpus)
    assert (code, report["verdict"]) == (0, "ready"), (report, err)
    assert report["container"] == name
    assert report["state"]["status"] == "running"
    assert report["url"].endswith(f":{port}") or report["url"].endswith(f":{port}/"), report
    assert report["probe"]["ok"] is True, report["probe"]
    assert report["phase"] == "ready"
    assert report["ready_since"]
    assert report["error"] is None
    server, config = host
    code, out, err = cli(  # as a user would: the GPUs asked on the host too
        ["status", "--container", name, "--host", server.target_text], ssh_env(config)
    )
    assert code == 0, out + err
    assert out.startswith(f"container {name}: READY: running, and the model answered"), out
    assert f"{server.target_text} has no nvidia-smi" in out  # this "host" has no GPUs
    systemd.run(["docker", "rm", "-f", name], check=False)

    name, _, gpus = _run_twin(systemd, docker, "oom_warmup")
    deadline = time.monotonic() + 90
    while _inspect_state(systemd, name)["Status"] != "exited" and time.monotonic() < deadline:
        time.sleep(0.3)
    code, report, err = _remote_status(host, name, gpus)
    assert (code, report["verdict"]) == (1, "failed"), (report, err)
    assert report["state"]["status"] == "exited"
    assert (report["failure"]["class"], report["failure"]["phase"]) == ("cuda_oom", "warmup")
    assert report["probe"] is None
    systemd.run(["docker", "rm", "-f", name], check=False)

    code, report, err = _remote_status(host, "i22-none", gpus)
    assert code == 2, (report, err)
    assert report["verdict"] == "unknown"
    assert "no container i22-none" in report["error"], report
    assert err.startswith("bringup: error:")
