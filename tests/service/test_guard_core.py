"""The guard's pure decisions: selection, verdict, and what counts as provably stale."""

from __future__ import annotations

import pytest

from bringup.adapters.procinfo import parse_cgroup
from bringup.core.gpu import GpuProcess, GpuReading
from bringup.core.guard import (
    ProcessInfo,
    Threshold,
    evaluate,
    find_stale,
    matches_cmdline,
    select_gpus,
)
from bringup.errors import UsageError

GiB = 1024**3
SERVICE = ("/opt/venv/bin/vllm", "serve", "meta-llama/Llama-3.1-8B", "--port", "8000")


def reading(index: int, used: int, pids: tuple[int, ...] = ()) -> GpuReading:
    procs = tuple(GpuProcess(p, "python3", used // max(1, len(pids))) for p in pids)
    return GpuReading(index, "H100", f"GPU-{index}abc", 80 * GiB, used, procs)


def proc(
    pid: int,
    cmdline: tuple[str, ...] = (),
    cgroup: str = "0::/user.slice/user-0.slice/session-1.scope\n",
    ancestors: tuple[tuple[int, tuple[str, ...]], ...] = (),
) -> ProcessInfo:
    return ProcessInfo(pid, "python3", cmdline, parse_cgroup(cgroup), 1000.0 + pid, ancestors)


GUARD_IN_UNIT = proc(
    500,
    ("/usr/bin/bringup", "guard"),
    "0::/system.slice/vllm-llama.service\n",
    ((1, ("/sbin/init",)),),
)
GUARD_IN_SHELL = proc(
    600, ("/usr/bin/bringup", "guard"), ancestors=((599, ("bash",)), (1, ("/sbin/init",)))
)
GUARD_IN_CONTAINER = proc(
    700, ("/usr/bin/bringup", "guard"), "0::/system.slice/docker-" + "ab" * 32 + ".scope\n"
)


@pytest.mark.parametrize(
    ("case", "holder", "own", "service", "reason"),
    [
        (
            "same unit",
            proc(42, ("python3", "-m", "x"), "0::/system.slice/vllm-llama.service\n"),
            GUARD_IN_UNIT,
            None,
            "in the guard's own systemd unit (vllm-llama.service)",
        ),
        (
            "other unit",
            proc(42, ("python3",), "0::/system.slice/other.service\n"),
            GUARD_IN_UNIT,
            None,
            None,
        ),
        ("same session scope is no proof", proc(42, ("python3",)), GUARD_IN_SHELL, None, None),
        (
            "same cmdline",
            proc(42, SERVICE),
            GUARD_IN_SHELL,
            SERVICE,
            "runs the service's command line",
        ),
        (
            "console script under python",
            proc(42, ("/usr/bin/python3", *SERVICE)),
            GUARD_IN_SHELL,
            SERVICE,
            "runs the service's command line",
        ),
        (
            "bare name matches path",
            proc(42, SERVICE),
            GUARD_IN_SHELL,
            ("vllm", *SERVICE[1:]),
            "runs the service's command line",
        ),
        (
            "different model",
            proc(42, (*SERVICE[:2], "other/model", "--port", "8000")),
            GUARD_IN_SHELL,
            SERVICE,
            None,
        ),
        (
            "worker child of the service",
            proc(43, ("VLLM::EngineCore",), ancestors=((42, SERVICE),)),
            GUARD_IN_SHELL,
            SERVICE,
            "child of PID 42, which runs the service's command line",
        ),
        (
            "wrapper is not the service",
            proc(42, ("/usr/bin/bringup", "run", "--", *SERVICE)),
            GUARD_IN_SHELL,
            SERVICE,
            None,
        ),
        (
            "same container",
            proc(42, ("python3",), "0::/system.slice/docker-" + "ab" * 32 + ".scope\n"),
            GUARD_IN_CONTAINER,
            None,
            "in the guard's own container (docker:abababababab)",
        ),
        ("no own identity, no service", proc(42, SERVICE), None, None, None),
    ],
)
def test_find_stale(
    case: str,
    holder: ProcessInfo,
    own: ProcessInfo | None,
    service: tuple[str, ...] | None,
    reason: str | None,
) -> None:
    """Only the same unit, container or command line proves a holder stale."""
    found = find_stale([holder], own, service)
    assert [s.reason for s in found] == ([reason] if reason else []), case


def test_guard_itself_and_its_ancestors_are_never_stale() -> None:
    """The guard, its parents and PID 1 are protected even when they match."""
    own = proc(
        500, SERVICE, "0::/system.slice/vllm-llama.service\n", ((400, SERVICE), (1, SERVICE))
    )
    holders = [proc(500, SERVICE), proc(400, SERVICE), proc(1, SERVICE), proc(42, SERVICE)]
    assert [s.pid for s in find_stale(holders, own, SERVICE)] == [42]


def test_user_manager_itself_is_not_a_service_to_share() -> None:
    """A guard in user@1000.service/init.scope proves nothing about other user units."""
    own = proc(500, cgroup="0::/user.slice/user-1000.slice/user@1000.service/init.scope\n")
    other = proc(
        42, cgroup="0::/user.slice/user-1000.slice/user@1000.service/app.slice/x.service\n"
    )
    assert find_stale([other], own, None) == []


@pytest.mark.parametrize(
    ("actual", "wanted", "expected"),
    [
        (("vllm", "serve", "m"), ("vllm", "serve", "m"), True),
        (("/usr/bin/python3.11", "-u", "/v/bin/vllm", "serve", "m"), ("vllm", "serve", "m"), True),
        (
            ("/usr/bin/python3", "/v/bin/vllm", "serve", "m", "--extra"),
            ("vllm", "serve", "m"),
            False,
        ),
        (("bash", "/v/bin/vllm", "serve", "m"), ("vllm", "serve", "m"), False),
        (
            ("/usr/bin/python3", "-m", "sglang.launch_server"),
            ("python3.11", "-m", "sglang.launch_server"),
            True,
        ),
        ((), ("vllm",), False),
        (("vllm",), (), False),
    ],
)
def test_matches_cmdline(actual: tuple[str, ...], wanted: tuple[str, ...], expected: bool) -> None:
    """Arguments must be equal; only an interpreter may precede the executable."""
    assert matches_cmdline(actual, wanted) is expected


def test_evaluate_names_holders_and_applies_the_threshold() -> None:
    """A GPU over the limit is not ok, and its holders carry unit and command line."""
    gpus = [reading(0, 70 * GiB, (42,)), reading(1, 100)]
    infos = {42: proc(42, SERVICE, "0::/system.slice/old.service\n")}
    states = evaluate(gpus, Threshold(max_used_bytes=GiB), infos)
    assert [s.ok for s in states] == [False, True]
    holder = states[0].holders[0]
    assert (holder.pid, holder.unit, holder.cmdline, holder.used_bytes) == (
        42,
        "old.service",
        SERVICE,
        70 * GiB,
    )


def test_select_gpus_by_cuda_index_and_uuid() -> None:
    """CUDA indices count within CUDA_VISIBLE_DEVICES; UUIDs name GPUs directly."""
    gpus = [reading(i, 0) for i in range(4)]
    assert [g.index for g in select_gpus(gpus, "3,1", "0")] == [3]
    assert [g.index for g in select_gpus(gpus, None, "GPU-2,0,2")] == [2, 0]
    assert [g.index for g in select_gpus(gpus, "1,2", None)] == [1, 2]
    with pytest.raises(UsageError, match="no GPU to guard"):
        select_gpus(gpus, "", None)
    with pytest.raises(UsageError, match="no visible GPU 'GPU-9'"):
        select_gpus(gpus, None, "GPU-9")
