"""Process facts from /proc: cgroup layouts (recorded texts), inspection of real processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bringup.adapters import procinfo
from bringup.core.guard import Cgroup

HEX = "4f1c2b3a5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708"

V2_SYSTEM = "0::/system.slice/vllm-llama.service\n"
V1_SYSTEM = (
    "12:pids:/system.slice/vllm-llama.service\n"
    "11:memory:/system.slice/vllm-llama.service\n"
    "4:devices:/system.slice/vllm-llama.service\n"
    "1:name=systemd:/system.slice/vllm-llama.service\n"
)
HYBRID_ROOT = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/5fedf15a\n0::/\n"
USER_UNIT = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/llm-dev.service\n"
USER_SESSION = "0::/user.slice/user-1000.slice/session-3.scope\n"
USER_MANAGER = "0::/user.slice/user-1000.slice/user@1000.service/init.scope\n"
DOCKER_V2 = f"0::/system.slice/docker-{HEX}.scope\n"
DOCKER_V1 = f"12:pids:/docker/{HEX}\n3:cpu,cpuacct:/docker/{HEX}\n1:name=systemd:/docker/{HEX}\n"
DOCKER_NESTED_NS = "0::/\n"  # inside a container with its own cgroup namespace
PODMAN_ROOTLESS = (
    f"0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{HEX}.scope/container\n"
)
PODMAN_ROOT = f"0::/machine.slice/libpod-{HEX}.scope/container\n"
K8S_CONTAINERD = (
    "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b3c4d_5e6f_7081_92a3_b4c5d6e7f809.slice/"
    f"cri-containerd-{HEX}.scope\n"
)
K8S_CGROUPFS_V1 = f"11:memory:/kubepods/burstable/pod1a2b3c4d-5e6f-7081-92a3-b4c5d6e7f809/{HEX}\n"


@pytest.mark.parametrize(
    ("text", "unit", "container", "manager"),
    [
        (V2_SYSTEM, "vllm-llama.service", None, None),
        (V1_SYSTEM, "vllm-llama.service", None, None),
        (HYBRID_ROOT, None, None, None),
        (USER_UNIT, "llm-dev.service", None, "user@1000.service"),
        (USER_SESSION, "session-3.scope", None, None),
        (USER_MANAGER, "init.scope", None, "user@1000.service"),
        (DOCKER_V2, None, f"docker:{HEX[:12]}", None),
        (DOCKER_V1, None, f"docker:{HEX[:12]}", None),
        (DOCKER_NESTED_NS, None, None, None),
        (PODMAN_ROOTLESS, None, f"podman:{HEX[:12]}", "user@1000.service"),
        (PODMAN_ROOT, None, f"podman:{HEX[:12]}", None),
        (K8S_CONTAINERD, None, f"containerd:{HEX[:12]}", None),
        (K8S_CGROUPFS_V1, None, f"kubernetes:{HEX[:12]}", None),
    ],
    ids=[
        "v2",
        "v1",
        "hybrid-root",
        "user-unit",
        "session",
        "user-manager",
        "docker-v2",
        "docker-v1",
        "cgroupns",
        "podman-rootless",
        "podman",
        "k8s-containerd",
        "k8s-cgroupfs",
    ],
)
def test_parse_cgroup_layouts(
    text: str, unit: str | None, container: str | None, manager: str | None
) -> None:
    """Each recorded /proc/PID/cgroup layout yields its systemd unit or container."""
    cg = procinfo.parse_cgroup(text)
    assert cg is not None
    assert (cg.unit, cg.container, cg.user_manager) == (unit, container, manager)


def test_unit_path_is_the_units_own_cgroup() -> None:
    """The unit path stops at the unit, so its sub-cgroups count as the same unit."""
    cg = procinfo.parse_cgroup("0::/system.slice/vllm.service/.control\n")
    assert cg == Cgroup(
        path="/system.slice/vllm.service/.control",
        unit="vllm.service",
        unit_path="/system.slice/vllm.service",
    )


def test_unreadable_cgroup_text_is_none() -> None:
    """Text with no cgroup lines gives None rather than a guess."""
    assert procinfo.parse_cgroup("") is None
    assert procinfo.parse_cgroup("garbage\n") is None


def test_inspect_a_real_process() -> None:
    """Inspecting a live child gives its name, command line, parent chain and start time."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; print('up', flush=True); time.sleep(60)",
            "inspect-me",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "up\n"  # exec'd: /proc shows the new command line
    try:
        info = procinfo.inspect(proc.pid)
        assert info is not None
        assert info.cmdline[-1] == "inspect-me"
        assert info.name.startswith("python")
        assert info.ancestors[0][0] == os.getpid()
        assert info.started_at is not None
        assert info.cgroup == procinfo.read_cgroup(os.getpid())
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def test_inspect_and_terminate_a_gone_process() -> None:
    """A PID that does not exist is None to inspect and 'gone' to terminate."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert procinfo.inspect(proc.pid) is None
    assert procinfo.terminate(proc.pid, None, 0.1) == "gone"


def test_terminate_refuses_a_reused_pid() -> None:
    """When the start time differs from the inspected one, the process is not signalled."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        info = procinfo.inspect(proc.pid)
        assert info is not None
        assert info.started_at is not None
        assert procinfo.terminate(proc.pid, info.started_at - 100.0, 0.1) == "gone"
        assert proc.poll() is None
        assert procinfo.terminate(proc.pid, info.started_at, 5.0) == "SIGTERM"
        assert proc.wait(timeout=30) == -15
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
