"""Real vLLM 0.32 (CPU build) over its whole life under `bringup run`: served names and API keys,
chat, tensor parallel 2 with thread binding, processes killed or stopped, and `--retry`.

Each test follows one real vLLM; the recording of the run then goes to `bringup diagnose`,
which must give the verdict `run` gave live.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx
import psutil
import pytest

from engine.real_engine import free_port
from vllm_real.runner import (
    Run,
    assert_live_and_offline_agree,
    bringup_argv,
    bringup_run,
    bringup_run_live,
    cpushm_mapped,
    diagnose_recording,
    events_of,
    read_until,
    record,
    record_json,
    wait_for_children,
)

from builders.vllm_env import serve_argv

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(600)]


def _finish(
    proc: subprocess.Popen[str], log: Path, events: list[dict[str, Any]], timeout: float = 120
) -> Run:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as e:  # say what bringup had reported, not a byte repr
        said = e.output.decode() if isinstance(e.output, bytes) else str(e.output or "")
        raise AssertionError(
            f"bringup gave no verdict in {timeout:g}s; its events:\n{said[-4000:]}\n"
            f"its log:\n{log.read_text()[-3000:]}"
        ) from None
    return Run(proc.returncode, events + events_of(out), log.read_text())


def _bench(base: str, key: str) -> dict[str, Any]:
    """`bringup bench --json` against the live real server (small: 2 levels, 16 output tokens)."""
    argv = [*bringup_argv("bench", base, "--api-key", key, "--json")]
    argv += ["--concurrency", "1,2", "--requests", "4", "--input-tokens", "32"]
    argv += ["--output-tokens", "16", "--duration", "120s"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    report: dict[str, Any] = json.loads(p.stdout)
    return report


def _health_after_death(base: str) -> int | None:
    """The first non-200 /health answer after the engine was killed (None: it never changed)."""
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            status = httpx.get(f"{base}/health", timeout=5).status_code
        except httpx.HTTPError:
            return None  # the server went away before answering otherwise
        if status != 200:
            return status
        time.sleep(0.05)
    return None


def test_served_name_api_key_chat_then_engine_core_killed(
    vllm_models: dict[str, Path], vllm_env: dict[str, str], tmp_path: Path
) -> None:
    """--served-model-name and --api-key are read from the command line: the smoke request uses
    both. A chat request answers; `bringup bench` streams TTFT/TPOT and reads /metrics. Then EngineCore is SIGKILLed: a failure after ready, with vLLM's
    own exit status 0, and `diagnose` on the recording agrees."""
    port = free_port()
    argv = serve_argv(
        vllm_models["one"], port, "--served-model-name", "tiny-chat", "--api-key", "sekret-1"
    )
    log = tmp_path / "bringup.err"
    with bringup_run_live(argv, vllm_env, log=log) as proc:
        events = read_until(proc, "ready")
        assert events[-1]["event"] == "ready", log.read_text()[-3000:]
        smoke = [e for e in events if e["event"] == "probe" and e.get("probe") == "smoke"]
        assert smoke[-1]["ok"], smoke
        assert smoke[-1]["model"] == "tiny-chat"
        base = f"http://127.0.0.1:{port}"
        auth = {"Authorization": "Bearer sekret-1"}
        health = httpx.get(f"{base}/health", timeout=10)
        models = httpx.get(f"{base}/v1/models", headers=auth, timeout=10)
        assert health.status_code == 200
        assert models.json()["data"][0]["id"] == "tiny-chat"
        refused = httpx.get(f"{base}/v1/models", timeout=10)
        assert refused.status_code == 401  # the key is really required: bringup used it
        chat = httpx.post(
            f"{base}/v1/chat/completions",
            headers={"Authorization": "Bearer sekret-1"},
            json={
                "model": "tiny-chat",
                "messages": [{"role": "user", "content": "Hello"}],
                "max_tokens": 4,
            },
            timeout=30,
        )
        assert chat.status_code == 200, chat.text
        assert chat.json()["choices"][0]["message"]["role"] == "assistant"
        report = _bench(base, "sekret-1")
        assert report["model"] == "tiny-chat"
        assert report["failed"] == 0, report
        for level in report["levels"]:  # streamed from the real server: TTFT and TPOT
            assert level["completed"] == 4, level
            assert level["mean_ttft_ms"] > 0
            assert level["mean_tpot_ms"] > 0
        metrics = report["server_metrics"]  # vLLM's own /metrics, read before and after
        assert metrics is not None
        assert "kv_cache_usage_perc" in metrics["after"], metrics
        engines = wait_for_children(proc.pid, "EngineCore")
        assert engines, "no EngineCore process"
        engines[0].send_signal(signal.SIGKILL)
        after = _health_after_death(base)
        run = _finish(proc, log, events)
    record_json(
        "http_ready",
        {
            "how": "real vLLM 0.32 CPU: /health and /v1/models at ready, /health after EngineCore was SIGKILLed",
            "health": health.status_code,
            "models": models.json(),
            "health_after_death": after,
        },
    )
    assert after == 503, after  # real-parts.md: /health 503 once the engine is dead
    record("engine_core_killed_after_ready", run, "SIGKILL to EngineCore after ready")
    assert run.code == 1, run.tail()
    summary = run.summary
    assert summary["outcome"] == "failed"
    assert summary["time_to_ready_seconds"] is not None
    assert summary["failure"]["class"] == "engine_core_died", summary["failure"]
    assert "Process EngineCore" not in summary["failure"]["line"]
    assert summary["server_exit_status"] == 0, summary  # vLLM's own status after engine death
    _, verdict = diagnose_recording(run, tmp_path, "engine_killed")
    assert_live_and_offline_agree(run, verdict)  # offline: ready, then this failure after ready


def test_tp2_with_thread_binding_ready_then_worker_killed(
    vllm_models: dict[str, Path], vllm_env: dict[str, str], vllm_cpushm: bool, tmp_path: Path
) -> None:
    """-tp 2 with VLLM_CPU_OMP_THREADS_BIND='0|1' starts two workers and serves; a Worker
    SIGKILLed after ready is a failure after ready."""
    env = {**vllm_env, "VLLM_CPU_OMP_THREADS_BIND": "0|1"}
    argv = serve_argv(vllm_models["two"], free_port(), "-tp", "2")
    log = tmp_path / "bringup.err"
    with bringup_run_live(argv, env, log=log) as proc:
        events = read_until(proc, "ready")
        assert events[-1]["event"] == "ready", log.read_text()[-3000:]
        workers = wait_for_children(proc.pid, "Worker_TP1")
        assert workers, [c.cmdline() for c in psutil.Process(proc.pid).children(recursive=True)]
        ours = cpushm_mapped(proc.pid)
        workers[0].send_signal(signal.SIGKILL)
        run = _finish(proc, log, events)
    # none of this run's cpushm buffers is left (seen here: after a killed worker they were
    # already unlinked when bringup looked, shm_removed []; after a clean stop vLLM leaves
    # them and bringup removes them: tests/vllm_real/test_shm_vllm.py)
    assert bool(ours) == vllm_cpushm, (ours, vllm_cpushm)  # none without vLLM's shm kernels
    assert [name for name in ours if Path("/dev/shm", name).exists()] == []
    record(
        "tp2_bound_worker_killed_after_ready",
        run,
        "-tp 2, VLLM_CPU_OMP_THREADS_BIND=0|1; SIGKILL to Worker_TP1 after ready",
    )
    assert run.code == 1, run.tail()
    assert run.summary["time_to_ready_seconds"] is not None
    assert run.failure is not None
    assert run.failure["class"] in ("engine_core_died", "host_oom"), run.failure
    assert "WorkerProc failed to start" not in run.failure["line"]
    assert "Worker_TP0" in run.recording
    assert "Worker_TP1" in run.recording


def test_engine_core_killed_while_loading(
    vllm_models: dict[str, Path], vllm_env: dict[str, str], tmp_path: Path
) -> None:
    """EngineCore SIGKILLed before ready: failed before ready, live and offline alike."""
    log = tmp_path / "bringup.err"
    with bringup_run_live(serve_argv(vllm_models["one"], free_port()), vllm_env, log=log) as proc:
        engines = wait_for_children(proc.pid, "EngineCore")
        assert engines
        engines[0].send_signal(signal.SIGKILL)
        run = _finish(proc, log, [])
    record("engine_core_killed_while_loading", run, "SIGKILL to EngineCore as soon as it exists")
    assert run.code == 1, run.tail()
    assert run.summary["outcome"] == "failed"
    assert run.summary["time_to_ready_seconds"] is None
    assert run.failure is not None
    assert run.failure["class"] in ("engine_core_died", "host_oom"), run.failure
    code, verdict = diagnose_recording(run, tmp_path, "killed_loading")
    assert code == 1
    assert_live_and_offline_agree(run, verdict)


def test_engine_core_stopped_is_a_stall_naming_it(
    vllm_models: dict[str, Path], vllm_env: dict[str, str], tmp_path: Path
) -> None:
    """EngineCore frozen with SIGSTOP: --stall catches it and the message names the process.

    The stall window is 60 s: vLLM's imports print nothing for over 20 s at load 18, and a
    shorter window ended the start as stalled before EngineCore existed."""
    log = tmp_path / "bringup.err"
    argv = serve_argv(vllm_models["one"], free_port())
    with bringup_run_live(argv, vllm_env, "--stall", "60s", log=log) as proc:
        engines = wait_for_children(proc.pid, "EngineCore")
        assert engines, log.read_text()[-3000:]
        engines[0].send_signal(signal.SIGSTOP)
        stopped_pid = engines[0].pid
        # the stall comes 60 s after the last activity; under CI's load that activity (lines
        # written before the stop, read late) can come well after the stop
        run = _finish(proc, log, [], timeout=300)
    assert run.code == 4, run.tail()
    assert run.summary["outcome"] == "stalled"
    stall = [e for e in run.events if e["event"] == "failure"][-1]
    assert f"process {stopped_pid} (" in stall["summary"], stall
    assert "EngineCore" in stall["summary"]
    assert f"kill -CONT {stopped_pid}" in stall["remedy"][0]["text"]
    time.sleep(0.5)
    assert not psutil.pid_exists(stopped_pid) or psutil.Process(stopped_pid).status() == "zombie"


def test_retry_on_kv_cache_too_small_starts_again_with_the_estimated_length(
    vllm_models: dict[str, Path], vllm_env: dict[str, str], tmp_path: Path
) -> None:
    """`run --retry 1`: KV cache too small for 2048 tokens, then again with the --max-model-len
    vLLM estimated, and ready."""
    env = dict(vllm_env)
    env.pop("VLLM_CPU_KVCACHE_SPACE", None)
    argv = serve_argv(
        vllm_models["one"], free_port(), "--kv-cache-memory-bytes", "262144", max_model_len=2048
    )
    run = bringup_run(argv, env, "--retry", "1")
    assert run.code == 0, run.tail()
    assert run.summary["outcome"] == "ready", run.summary
    failures = [e for e in run.events if e["event"] == "failure"]
    assert failures
    assert failures[0]["class"] == "kv_cache_insufficient"
    retries = [e for e in run.events if e["event"] == "retry"]
    assert retries, [e["event"] for e in run.events]
    change = retries[0]["change"]
    assert (change["flag"], change["value"]) == ("--max-model-len", "128"), retries[0]
    attempts = run.summary["attempts"]
    assert len(attempts) == 2, attempts


def test_bad_flag_is_never_retried(
    vllm_models: dict[str, Path], vllm_env: dict[str, str], tmp_path: Path
) -> None:
    argv = serve_argv(vllm_models["one"], free_port(), "--dtype", "nonsense")
    run = bringup_run(argv, vllm_env, "--retry", "2")
    assert run.code == 1, run.tail()
    assert run.failure is not None
    assert run.failure["class"] == "config_error"
    assert not [e for e in run.events if e["event"] == "retry"]
    assert run.recording.count("invalid choice: 'nonsense'") == 1  # one attempt only
