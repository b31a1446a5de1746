"""Real vLLM (CPU build, the tiny model) as a unit written by `bringup unit`, run by a real
systemd 252: `bringup up` exits 0 once the model answered at the port of the command inside
the unit, and `bringup status` says ready."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from systemd_real.conftest import bringup, free_port, install_twin, unique

from builders.systemd_ns import SystemdNamespace
from builders.vllm_env import (
    remove_environ,
    require_vllm,
    serve_argv,
    shared_folder,
    tiny_model,
    vllm_environ,
)

KEYS = (
    "HF_HOME", "XDG_CACHE_HOME", "VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
    "TMPDIR", "VLLM_RPC_BASE_PATH", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "VLLM_NO_USAGE_STATS",
    "VLLM_DO_NOT_TRACK", "VLLM_CPU_KVCACHE_SPACE", "PYTHONUNBUFFERED",
)  # fmt: skip


@pytest.mark.vllm
@pytest.mark.timeout(600)  # real vLLM to ready through systemd: minutes on a busy 2-core machine
def test_up_real_vllm_unit_to_ready(
    systemd: SystemdNamespace, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    require_vllm()
    model = tiny_model(shared_folder(tmp_path_factory), 1)
    env = vllm_environ(tmp_path / "vllm")
    gpus = tmp_path / "no-gpus.json"
    gpus.write_text(json.dumps({"gpus": []}))  # a CPU machine: the guard has nothing to wait for
    name = unique("i13-vllm")
    unit = f"{name}.service"
    port = free_port()
    flags = [f for key in KEYS if key in env for f in ("--env", f"{key}={env[key]}")]
    try:
        install_twin(systemd, name, serve_argv(model, port), gpus, *flags)
        result = bringup(systemd, "up", name, "--deadline", "300s", "--gpus-from", str(gpus))
        assert result.code == 0, result.out[-3000:] + result.err + systemd.journal(unit)[-3000:]
        assert f"answered at http://127.0.0.1:{port}" in result.out
        assert result.out.count("bringup: timeline:") == 1
        status = bringup(systemd, "status", name, "--json", "--gpus-from", str(gpus))
        assert json.loads(status.out)["verdict"] == "ready", status.out
        state = systemd.show(unit, "ActiveState", "StatusText")
        assert state["ActiveState"] == "active"
        assert state["StatusText"].startswith("ready in ")
        systemd.systemctl("stop", unit)
        assert systemd.show(unit, "ActiveState", "Result") == {
            "ActiveState": "inactive",
            "Result": "success",
        }
    finally:
        systemd.systemctl("stop", unit, check=False)
        remove_environ(tmp_path / "vllm")
