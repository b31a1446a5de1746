"""Failure scenarios: the exact vLLM 0.33 lines, the exit codes, the HTTP and memory effects."""

from __future__ import annotations

import signal
import socket
import time
import urllib.error
import urllib.request

import psutil

from bringup.twin.memory import GPU_TOTAL_BYTES, MemoryPlan
from twin.helpers import free_port

SAMPLER = (
    "CUDA out of memory occurred when warming up sampler with 1024 dummy requests. Please try lowering "
    "`max_num_seqs` or `gpu_memory_utilization` when initializing the engine."
)


def health(port: int) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def test_oom_warmup_worker_dies_while_api_server_lives_on(start_twin) -> None:
    """A worker logs the sampler OOM; the API server is still alive then, and exits 1 after its traceback."""
    twin = start_twin("--scenario", "oom_warmup")
    twin.wait_for(f"RuntimeError: {SAMPLER}", stream="out")
    assert twin.proc.poll() is None
    assert twin.finish() == 1
    assert "[multiproc_executor.py:871] WorkerProc hit an exception." in twin.stdout
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate" in twin.stdout
    assert (
        f"RuntimeError: Worker failed with error '{SAMPLER}', please check the stack trace above for the root cause"
        in twin.stdout
    )
    err = twin.stderr
    assert err.index("Process EngineCore:\nTraceback (most recent call last):") < err.index(
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore': 1}"
    )
    assert "Graph capturing finished" in twin.stdout
    assert "init engine" not in twin.stdout
    assert twin.used_bytes() == [0, 0, 0, 0]


def test_oom_warmup_with_256_seqs_reaches_ready(start_twin) -> None:
    """The flags decide: --max-num-seqs 256 fits the sampler warmup, so the same scenario serves."""
    twin = start_twin("--scenario", "oom_warmup", "--max-num-seqs", "256")
    twin.wait_for("INFO:     Application startup complete.")
    assert health(twin.port) == 200
    assert "warming up sampler" not in twin.stdout
    twin.proc.send_signal(signal.SIGTERM)
    assert twin.finish() == 0


def test_kv_insufficient_names_the_estimate_from_the_flags(start_twin) -> None:
    """The KV error names the estimated maximum model length that the utilization allows."""
    twin = start_twin(
        "--scenario", "kv_insufficient", "--gpu-memory-utilization", "0.7", "--tp", "4"
    )
    assert twin.finish() == 1
    plan = MemoryPlan(GPU_TOTAL_BYTES, 4, 0.7, 1024, 8192, 196608)
    estimate, available = plan.estimated_max_model_len, plan.kv_bytes / 2**30
    assert 0 < estimate < 196608
    assert (
        "ValueError: To serve at least one request with the model's max seq len (196608), (11.62 GiB KV cache is needed, "
        f"which is larger than the available KV cache memory ({available:.2f} GiB). Based on the available memory, the estimated "
        f"maximum model length is {estimate}. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
        "when initializing the engine."
    ) in twin.stdout
    assert "[core.py:1080] EngineCore failed to start." in twin.stdout


def test_die_after_ready_503_then_exit_zero(start_twin) -> None:
    """After ready the EngineCore dies: MPClient line, /health 503 while the API lives, then exit status 0."""
    twin = start_twin("--scenario", "die_after_ready")
    twin.wait_for("INFO:     Application startup complete.")
    assert health(twin.port) == 200
    twin.wait_for(
        "[shutdown] MPClient: engine core exited unexpectedly; starting cleanup", stream="out"
    )
    assert health(twin.port) == 503
    assert twin.finish() == 0
    assert "INFO:     Finished server process" in twin.stderr
    assert twin.used_bytes() == [0, 0, 0, 0]


def test_port_in_use_against_a_real_listener(start_twin) -> None:
    """With the port taken by another listener, bind raises the real OSError [Errno 98]; exit 1, no children."""
    port = free_port()
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(1)
        twin = start_twin("--scenario", "port_in_use", port=port)
        assert twin.finish() == 1
    assert twin.stderr.rstrip().endswith("OSError: [Errno 98] Address already in use")
    assert "sock.bind(addr)" in twin.stderr
    assert "Initializing a V1 LLM engine" not in twin.stdout


def test_hang_nccl_goes_silent_with_flat_memory(start_twin) -> None:
    """After `vLLM is using nccl==` nothing more is printed and GPU memory stays flat; SIGTERM ends it."""
    twin = start_twin("--scenario", "hang_nccl")
    twin.wait_for("vLLM is using nccl==2.27.5", stream="out")
    time.sleep(1.0)
    before, lines = twin.used_bytes(), len(twin.out)
    time.sleep(1.0)
    assert twin.used_bytes() == before
    assert before[0] > 0
    assert len(twin.out) == lines
    assert twin.out[-1].rstrip().endswith("vLLM is using nccl==2.27.5")
    children = twin.descendants()
    twin.proc.send_signal(signal.SIGTERM)
    assert twin.finish() == 0
    assert psutil.wait_procs(children, timeout=10)[1] == []
    assert twin.used_bytes() == [0, 0, 0, 0]


def test_slow_load_keeps_making_progress(start_twin) -> None:
    """Weight shards keep coming, slowly, and GPU memory rises with them."""
    twin = start_twin("--scenario", "slow_load")
    twin.wait_for("Loading safetensors checkpoint shards:   2% Completed | 3/126", stream="err")
    first = twin.used_bytes()[0]
    twin.wait_for("Loading safetensors checkpoint shards:  10% Completed | 13/126", stream="err")
    assert twin.used_bytes()[0] > first
    assert "Model loading took" not in twin.stdout
    twin.proc.send_signal(signal.SIGTERM)
    assert twin.finish() == 0


def test_guard_wait_earlier_instance_then_clean_start(start_twin, tmp_path) -> None:
    """An earlier instance holds the GPUs (pid and command line in the readings file): the start fails, a later one serves."""
    twin = start_twin("--scenario", "guard_wait")
    twin.wait_for("non-default args:")
    holder = twin.readings()["gpus"][0]["processes"][0]
    holder_proc = psutil.Process(holder["pid"])
    assert holder["used_bytes"] > 85 * 2**30
    assert "twin" in holder_proc.cmdline()
    assert "vllm" in holder_proc.cmdline()
    assert twin.finish() == 1
    own_context = MemoryPlan(GPU_TOTAL_BYTES, 4, 0.92, 1024, 8192, 196608).context_bytes
    free_gib = (GPU_TOTAL_BYTES - holder["used_bytes"] - own_context) / 2**30
    assert (
        f"ValueError: Free memory on device cuda:0 ({free_gib:.2f}/95.00 GiB) on startup is less than desired "
        "GPU memory utilization (0.92, 87.40 GiB)."
    ) in twin.stdout
    holder_proc.wait(timeout=30)  # it lets go by itself (it is not ours to stop)
    assert twin.used_bytes() == [0, 0, 0, 0]
    again = start_twin("--scenario", "guard_wait", gpus_file=tmp_path / "gpus.json")
    again.wait_for("INFO:     Application startup complete.")
    again.proc.send_signal(signal.SIGTERM)
    assert again.finish() == 0
