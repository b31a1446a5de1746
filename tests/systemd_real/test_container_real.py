"""`bringup watch --container` against a real dockerd (Debian's docker.io 20.10) running as a
Type=notify unit of the namespaced systemd 252 (real-parts.md §3), with a small imported image
that runs the engine twin. bringup reaches docker through the same command prefix."""

from __future__ import annotations

import os
import shutil
import sys
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from systemd_real.conftest import BRINGUP, bringup, free_port, readings

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
