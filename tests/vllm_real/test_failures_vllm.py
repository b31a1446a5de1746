"""Every failure real vLLM 0.32 (CPU build) produces here, through `bringup run` and `bringup diagnose`.

Each case breaks one thing (real-parts.md §1), runs the real CLI on real vLLM, and checks the
outcome, the class, the phase, the root-cause line (the line that states the cause, never a
wrapper such as ``WorkerProc failed to start.`` or ``Process EngineCore:``), remedies that fit
the CPU build, and the server's own exit status. Then `diagnose` on the recording of the same
run must give the same verdict.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from engine.real_engine import free_port
from vllm_real.runner import (
    Run,
    assert_live_and_offline_agree,
    bringup_run,
    diagnose_recording,
    record,
)

from builders.vllm_env import copy_model, serve_argv

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(600)]

GPU_WORDS = ("GPU", "nvidia-smi", "CUDA", "--tensor-parallel-size")


@dataclass(frozen=True)
class Case:
    """One real failure: how to make it, and the verdict bringup must give."""

    how: str
    failure_class: str
    phase: str
    line: str  # a piece of the root-cause line
    server_exit: int | None  # vLLM's own exit status (None: not checked)
    model: str = "one"
    extra: tuple[str, ...] = ()
    max_model_len: int | None = 512
    kv_cache_gib: int | None = 1
    env: dict[str, str] = field(default_factory=dict)
    remedy_env: str | None = None  # a remedy must set this variable
    remedy_flag: str | None = None  # a remedy must set this flag
    breaks: Callable[[Path], None] | None = None  # breaks the private copy of the model


def _drop_second_shard(model: Path) -> None:
    (model / "model-00002-of-00002.safetensors").unlink()


def _truncate(model: Path) -> None:
    shard = model / "model.safetensors"
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2])


def _unknown_architecture(model: Path) -> None:
    config = json.loads((model / "config.json").read_text())
    config["architectures"] = ["FooBarForCausalLM"]
    (model / "config.json").write_text(json.dumps(config))


CASES = {
    "context_too_long": Case(
        "--max-model-len 4096 on a model of 2048 positions",
        "config_error",
        "config",
        "User-specified max_model_len (4096) is greater than the derived max_model_len",
        1,
        max_model_len=4096,
        remedy_flag="--max-model-len",
    ),
    "kv_cache_too_small": Case(
        "--kv-cache-memory-bytes 262144 --max-model-len 2048 (VLLM_CPU_KVCACHE_SPACE unset)",
        "kv_cache_insufficient",
        "kv_cache_alloc",
        "To serve at least one request with the model's max seq len (2048)",
        1,
        extra=("--kv-cache-memory-bytes", "262144"),
        max_model_len=2048,
        kv_cache_gib=None,
        remedy_flag="--max-model-len",
        remedy_env="VLLM_CPU_KVCACHE_SPACE",
    ),
    "no_kv_memory": Case(
        "VLLM_CPU_KVCACHE_SPACE=0",
        "kv_cache_insufficient",
        "kv_cache_alloc",
        "No available memory for the cache blocks",
        1,
        kv_cache_gib=0,
        remedy_env="VLLM_CPU_KVCACHE_SPACE",
    ),
    "cpu_memory_utilization": Case(
        "--gpu-memory-utilization 0.99 (VLLM_CPU_KVCACHE_SPACE unset): more of the NUMA node's memory than is free",
        "gpu_memory_utilization",
        "distributed_init",
        "is less than desired CPU memory utilization",
        1,
        extra=("--gpu-memory-utilization", "0.99"),
        kv_cache_gib=None,  # vLLM checks free memory only when it sizes the KV cache itself
        remedy_flag="--gpu-memory-utilization",
    ),
    "shard_missing": Case(
        "one of the two shards named in the index deleted",
        "missing_or_corrupt_weights",
        "weights_loading",
        "FileNotFoundError: Weight files referenced in index but missing",
        1,
        model="two",
        breaks=_drop_second_shard,
    ),
    "shard_truncated": Case(
        "the safetensors file cut in half",
        "missing_or_corrupt_weights",
        "weights_loading",
        "incomplete metadata, file not fully covered",
        1,
        breaks=_truncate,
    ),
    "unknown_architecture": Case(
        'config.json "architectures": ["FooBarForCausalLM"]',
        "config_error",
        "config",
        "Model architectures ['FooBarForCausalLM'] are not supported",
        1,
        breaks=_unknown_architecture,
    ),
    "bad_flag": Case(
        "--dtype nonsense",
        "config_error",
        "start",
        "argument --dtype: invalid choice",
        2,
        extra=("--dtype", "nonsense"),
    ),
    "tp2_without_binding": Case(
        "-tp 2 with one NUMA node and VLLM_CPU_OMP_THREADS_BIND unset",
        "config_error",
        "distributed_init",
        "Not enough allowed NUMA nodes to bind threads of 2 local CPUWorkers",
        1,
        extra=("-tp", "2"),
        remedy_env="VLLM_CPU_OMP_THREADS_BIND",
    ),
}


@contextmanager
def _listener(port: int) -> Iterator[None]:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
        yield


def _check_remedies(run: Run, case: Case) -> None:
    failure = run.failure
    assert failure is not None
    remedies = failure["remedy"]
    text = " ".join(r["text"] for r in remedies)
    for word in GPU_WORDS:  # a CPU run gets no GPU advice
        assert word not in text, (word, remedies)
    if case.remedy_env:
        assert any((r["env"] or "").startswith(case.remedy_env + "=") for r in remedies), remedies
    if case.remedy_flag:
        assert any(r["flag"] == case.remedy_flag for r in remedies), remedies


def _check_exit(run: Run, case: Case) -> None:
    """vLLM's own exit status is reported, apart from bringup's signals. A failure before the
    engine starts exits at once (strict); one inside the engine tears down for a while, and on
    a busy machine may outlast --grace: then the summary must say bringup stopped it."""
    summary = run.summary
    if case.server_exit is None:
        return
    if case.phase in ("start", "config") or summary["stopped_by_bringup"] is None:
        assert summary["server_exit_status"] == case.server_exit, summary
        assert summary["stopped_by_bringup"] is None or summary["server_exit_signal"] is None
        return
    assert summary["stopped_by_bringup"]["signals"][0] == "SIGTERM", summary
    assert summary["server_exit_status"] in (case.server_exit, None), summary


def _exit_status(run: Run) -> int | None:
    ends = [e for e in run.events if e["event"] == "exit"]
    if ends:
        value: int | None = ends[-1].get("server_exit_status")
        return value
    return run.summary.get("server_exit_status")


@pytest.mark.parametrize("name", sorted(CASES))
def test_real_failure_live_and_offline(
    name: str, vllm_models: dict[str, Path], vllm_env: dict[str, str], tmp_path: Path
) -> None:
    case = CASES[name]
    model = vllm_models[case.model]
    if case.breaks is not None:
        model = copy_model(model, tmp_path / "model")
        case.breaks(model)
    env = dict(vllm_env)
    if case.kv_cache_gib is None:
        env.pop("VLLM_CPU_KVCACHE_SPACE", None)
    else:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(case.kv_cache_gib)
    env.update(case.env)
    argv = serve_argv(model, free_port(), *case.extra, max_model_len=case.max_model_len)
    run = bringup_run(argv, env)
    record(name, run, case.how, server_exit_status=_exit_status(run))
    assert run.code == 1, run.tail()
    assert run.summary["outcome"] == "failed"
    failure = run.failure
    assert failure is not None, run.tail()
    assert (failure["class"], failure["phase"]) == (case.failure_class, case.phase), failure
    assert case.line in failure["line"], failure["line"]
    _check_remedies(run, case)
    _check_exit(run, case)
    code, verdict = diagnose_recording(run, tmp_path, name)
    assert code == 1, verdict
    assert_live_and_offline_agree(run, verdict)


def test_port_taken(vllm_models: dict[str, Path], vllm_env: dict[str, str], tmp_path: Path) -> None:
    """Another listener on the port: vLLM exits 1 before the engine starts; port_in_use."""
    port = free_port()
    with _listener(port):
        run = bringup_run(serve_argv(vllm_models["one"], port), vllm_env)
    record("port_taken", run, "another listener on the port", server_exit_status=_exit_status(run))
    assert run.code == 1, run.tail()
    failure = run.failure
    assert failure is not None
    assert failure["class"] == "port_in_use", failure
    assert "Address already in use" in failure["line"]
    assert any(r["flag"] == "--port" for r in failure["remedy"]), failure["remedy"]
    assert run.summary["server_exit_status"] == 1, run.summary  # before the engine starts
    code, verdict = diagnose_recording(run, tmp_path, "port_taken")
    assert code == 1
    assert_live_and_offline_agree(run, verdict)
