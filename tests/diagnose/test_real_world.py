"""What real pasted logs do that documentation-written ones do not (issue 14).

Every line here is written for the test in the engines' formats; none is copied from a
real log. Each test names the rule it checks.
"""

from __future__ import annotations

import pytest

from bringup.core import logline
from bringup.core.analyzer import LogAnalyzer, diagnose_bytes
from bringup.core.diagnosis import Diagnosis
from bringup.core.vocab import FailureClass, Outcome, Phase

ESC = "\x1b"


def _diag(*lines: str) -> Diagnosis:
    return diagnose_bytes(("\n".join(lines) + "\n").encode())


# -- fragments: the engine is not known, the cause still is ------------------------------


def test_fragment_without_banner_is_classified_by_engine_agnostic_signatures() -> None:
    """A few pasted lines with no banner still give the class and the line."""
    d = _diag(
        '  File "/opt/app/server.py", line 12, in main',
        "    sock.bind(addr)",
        "OSError: [Errno 98] Address already in use",
    )
    assert d.outcome is Outcome.FAILED
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.PORT_IN_USE
    assert d.failure.line == "OSError: [Errno 98] Address already in use"


def test_fragment_oom_and_nccl_without_engine() -> None:
    """PyTorch's OOM and an NCCL error are recognised with no engine line at all."""
    oom = _diag("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0")
    assert oom.failure is not None
    assert oom.failure.failure_class is FailureClass.CUDA_OOM
    nccl = _diag("RuntimeError: NCCL error: unhandled system error, NCCL version 2.21.5")
    assert nccl.failure is not None
    assert nccl.failure.failure_class is FailureClass.NCCL_ERROR


def test_a_line_only_one_engine_prints_names_the_engine() -> None:
    """vLLM's own KV message, alone, is classified and names vLLM."""
    d = _diag(
        "ValueError: The model's max seq len (65536) is larger than the maximum number of tokens "
        "that can be stored in KV cache (20000). Try increasing `gpu_memory_utilization` or "
        "decreasing `max_model_len` when initializing the engine."
    )
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.KV_CACHE_INSUFFICIENT
    assert d.engine == "vllm"


def test_traceback_frames_give_a_fragment_its_phase_and_the_header_agrees() -> None:
    """Frames of the weight loader put a bare exception in weights_loading; the header says so too."""
    d = _diag(
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/site-packages/vllm/worker/worker.py", line 40, in load_model',
        "    self.model_runner.load_model()",
        "AttributeError: 'FooConfig' object has no attribute 'hidden_size'",
    )
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.CONFIG_ERROR
    assert d.failure.phase is Phase.WEIGHTS_LOADING
    assert d.phase is Phase.WEIGHTS_LOADING


# -- prefixes, wrappers and damage ----------------------------------------------------------


def test_damaged_ansi_forms_are_removed() -> None:
    """ESC lost, ESC as U+FFFD, ESC as rsyslog's #033: all give the same bare message."""
    body = "{on}(VllmWorker rank=1 pid=77){off} ERROR 05-01 10:00:00 [worker.py:10] boom"
    for esc in (ESC, "", "\ufffd", "#033"):
        line = body.format(on=f"{esc}[1;36m", off=f"{esc}[0;0m")
        ll = logline.parse(line, 1)
        assert ll.message == "boom", line
        assert ll.process == "VllmWorker rank=1"


def test_wrappers_are_peeled() -> None:
    """syslog, docker -t timestamps, a re-logging app, Python's default format, a lost "(", Ray's suffix."""
    cases = {
        "Mar  9 08:01:02 gpu7 llm[4242]: INFO 03-09 08:01:02 [loader.py:5] hello": "hello",
        '2025-03-09T08:01:02.123456789Z   File "/x.py", line 3, in f': '  File "/x.py", line 3, in f',
        "2025-03-09 08:01:02,123 - INFO - vLLM: INFO 03-09 08:01:02 [loader.py:5] hello": "hello",
        "2025-03-09 08:01:02,123 - vllm.engine - WARNING - careful": "careful",
        "INFO:wrapper-app:    plain text": "plain text",
        "EngineCore_0 pid=12) ERROR 03-09 08:01:02 [core.py:9] lost paren": "lost paren",
        "(EngineCore_0 pid=9) (RayWorkerWrapper pid=4, ip=10.0.0.2) INFO 03-09 08:01:02 [x.py:1] hi "
        "[repeated 3x across cluster]": "hi",
        "[rank0]: RuntimeError: HIP error: invalid device function": "RuntimeError: HIP error: invalid device function",
    }
    for raw, message in cases.items():
        assert logline.parse(raw, 1).message == message, raw


def test_ollama_logfmt_record_gives_message_and_fields() -> None:
    """msg="..." is unquoted; the other fields follow it."""
    ll = logline.parse(
        'time=2025-02-01T10:00:00.000Z level=ERROR source=sched.go:10 msg="load failed" error="boom \\"x\\""',
        1,
    )
    assert ll.level == "ERROR"
    assert ll.message == 'load failed error="boom \\"x\\""'


def test_nul_hole_ends_the_log_an_older_process_wrote_after_it() -> None:
    """The tail after a run of NUL bytes is another process's: it cannot make the failure ready."""
    head = (
        "INFO 05-01 10:00:00 [api_server.py:1] vLLM API server version 0.9.0\n"
        "RuntimeError: Failed to infer device type\n"
    )
    tail = "INFO:     Application startup complete.\nINFO:     Uvicorn running on http://0.0.0.0:8000\n"
    data = (head + "\x00" * 500 + tail).encode()
    d = diagnose_bytes(data)
    assert d.outcome is Outcome.FAILED
    analyzer = LogAnalyzer()
    for line in data.decode().split("\n"):
        analyzer.feed(line)
    assert analyzer.finish(whole_log=True).outcome is Outcome.FAILED


# -- where the cause is, and what lies ------------------------------------------------------

_V1_HEAD = (
    "(APIServer pid=10) INFO 05-01 10:00:00 [api_server.py:1] vLLM API server version 0.11.0",
    "(EngineCore_DP0 pid=20) INFO 05-01 10:00:01 [gpu_model_runner.py:2] Starting to load model m...",
)


def test_unknown_exception_is_the_cause_and_the_final_wrapper_is_not() -> None:
    """The exception line in the traceback, not 'Engine core initialization failed', is the cause."""
    d = _diag(
        *_V1_HEAD,
        "(EngineCore_DP0 pid=20) ERROR 05-01 10:00:02 [core.py:7] EngineCore failed to start.",
        "(EngineCore_DP0 pid=20) ERROR 05-01 10:00:02 [core.py:7] Traceback (most recent call last):",
        "(EngineCore_DP0 pid=20) ERROR 05-01 10:00:02 [core.py:7] ImportError: libfoo.so: undefined symbol: bar",
        "ImportError: libfoo.so: undefined symbol: bar",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    )
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.ENGINE_CORE_DIED
    assert d.failure.line_number == 5
    assert "ImportError" in d.failure.summary


def test_traceback_logged_as_warning_is_not_a_cause() -> None:
    """An optional module's import traceback at WARNING level is noise; the later error is the cause."""
    d = _diag(
        *_V1_HEAD,
        "(EngineCore_DP0 pid=20) WARNING 05-01 10:00:02 [import_utils.py:4] Module x failed to import",
        "(EngineCore_DP0 pid=20) WARNING 05-01 10:00:02 [import_utils.py:4] Traceback (most recent call last):",
        "(EngineCore_DP0 pid=20) WARNING 05-01 10:00:02 [import_utils.py:4] AssertionError",
        "(EngineCore_DP0 pid=20) ERROR 05-01 10:00:09 [core.py:7] RuntimeError: Could not find the compiler",
    )
    assert d.failure is not None
    assert d.failure.line_number == 6


def test_failure_after_ready_is_not_a_startup_failure() -> None:
    """A crash after 'Application startup complete.' is the server's runtime failure."""
    d = _diag(
        *_V1_HEAD,
        "(APIServer pid=10) INFO 05-01 10:00:05 [api_server.py:9] Starting vLLM API server 0 on http://0.0.0.0:8000",
        "(APIServer pid=10) INFO:     Application startup complete.",
        "(EngineCore_DP0 pid=20) ERROR 05-01 11:00:00 [core.py:7] RuntimeError: CUDA error: an illegal memory access",
    )
    assert d.outcome is Outcome.READY
    assert d.failure is None
    assert d.after_ready is not None
    assert d.after_ready.line_number == 5


def test_one_requests_exception_after_ready_raises_no_live_failure() -> None:
    """Serving, a handler's traceback (socketserver's "Exception occurred during processing of
    request", a client that hung up) is kept under after_ready, but a live follower gets no
    failure event from it: a dead server shows by its exit or its health check."""
    from bringup.core.diagnosis import FailureEvent

    lines = [
        *_V1_HEAD,
        "(APIServer pid=10) INFO 05-01 10:00:05 [api_server.py:9] Starting vLLM API server 0 on http://0.0.0.0:8000",
        "(APIServer pid=10) INFO:     Application startup complete.",
        "Exception occurred during processing of request from ('127.0.0.1', 50412)",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.11/socketserver.py", line 755, in __init__',
        "    self.handle()",
        "ConnectionResetError: [Errno 104] Connection reset by peer",
        (
            "(EngineCore_DP0 pid=20) ERROR 05-01 11:00:00 [core.py:7] torch.OutOfMemoryError: "
            "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB"
        ),
    ]
    analyzer = LogAnalyzer()
    failures: list[tuple[int, FailureEvent]] = []
    for number, line in enumerate(lines, start=1):
        failures += [(number, e) for e in analyzer.feed(line) if isinstance(e, FailureEvent)]
    d = analyzer.finish(whole_log=True)
    assert d.outcome is Outcome.READY
    assert d.after_ready is not None
    assert [n for n, _ in failures] == [len(lines)]  # only the known signature, not the reset
    assert d.after_ready.failure_class is FailureClass.CUDA_OOM  # it explains more than the reset


def test_bind_error_after_startup_complete_is_a_startup_failure() -> None:
    """uvicorn prints 'Application startup complete.' before it binds: the bind error wins."""
    d = _diag(
        "INFO 05-01 10:00:00 api_server.py:1] vLLM API server version 0.6.2",
        "INFO 05-01 10:00:05 api_server.py:9] Starting vLLM API server on http://0.0.0.0:8000",
        "INFO:     Application startup complete.",
        "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use",
    )
    assert d.outcome is Outcome.FAILED
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.PORT_IN_USE
    assert d.phase is Phase.API_SERVER_STARTING
    assert d.failure.phase is Phase.API_SERVER_STARTING


def test_another_servers_bind_error_is_not_ours() -> None:
    """A bind error on a port other than the one the engine serves belongs to another server."""
    d = _diag(
        "INFO 05-01 10:00:00 [api_server.py:1] vLLM API server version 0.9.1",
        "INFO 05-01 10:00:00 [cli_args.py:2] non-default args: {'port': 8000}",
        "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8080): address already in use",
        "INFO 05-01 10:00:09 [api_server.py:9] Starting vLLM API server 0 on http://0.0.0.0:8000",
        "INFO:     Application startup complete.",
    )
    assert d.outcome is Outcome.READY
    assert d.failure is None


# -- no invented causes ---------------------------------------------------------------------


def test_exit_without_a_cause_names_no_line() -> None:
    """`sh -c 'echo hello; exit 3'`: the verdict does not call 'hello' the root cause."""
    analyzer = LogAnalyzer()
    analyzer.feed("hello")
    d = analyzer.finish(3)
    assert d.failure is not None
    assert (d.failure.line, d.failure.line_number) == ("", 0)
    assert "hello" not in d.failure.summary


def test_traceback_source_lines_are_code_not_output() -> None:
    """`raise ValueError("No available memory ...")` under a frame is code; the exception line is the cause."""
    d = _diag(
        "ERROR 04-01 10:00:00 [core.py:3] EngineCore failed to start.",
        "ERROR 04-01 10:00:00 [core.py:3] Traceback (most recent call last):",
        'ERROR 04-01 10:00:00 [core.py:3]   File "/v/vllm/v1/engine/core.py", line 9, in _initialize_kv_caches',
        'ERROR 04-01 10:00:00 [core.py:3]     raise ValueError("No available memory for the cache blocks. "',
        "ERROR 04-01 10:00:00 [core.py:3] ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.",
    )
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.KV_CACHE_INSUFFICIENT
    assert d.failure.line_number == 5


def test_chained_exception_raised_last_is_the_cause() -> None:
    """'During handling of the above exception': the later exception of the same kind stopped it."""
    d = _diag(
        '2024-06-01T10:00:00.000001Z  INFO text_generation_launcher: Args { model_id: "m" }',
        "2024-06-01T10:00:01.000001Z ERROR download: text_generation_launcher: Download encountered an error: ",
        "huggingface_hub.utils._errors.EntryNotFoundError: No .safetensors weights found for model m",
        "During handling of the above exception, another exception occurred:",
        "huggingface_hub.utils._errors.EntryNotFoundError: No .bin weights found for model m",
    )
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.MISSING_OR_CORRUPT_WEIGHTS
    assert d.failure.line_number == 5


def test_shell_prompt_lines_are_the_users_command() -> None:
    """A pasted prompt with --trust-remote-code in the command is not a failure line."""
    d = _diag(
        "root@gpu-3:~/work# vllm serve some/model --trust-remote-code --tensor-parallel-size 16",
        "ERROR 02-01 10:00:00 engine.py:9] ValueError: Ray does not allocate any GPUs on the driver node.",
    )
    assert d.engine == "vllm"
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.CONFIG_ERROR
    assert d.failure.line_number == 2


def test_log_ending_at_a_step_known_to_hang_is_a_hang_without_a_cause_line() -> None:
    """Nothing after the P2P probe: hung in distributed_init, and no line is called the cause."""
    d = _diag(
        "INFO 07-01 08:00:00 api_server.py:1] vLLM API server version 0.5.3",
        "INFO 07-01 08:00:01 pynccl.py:63] vLLM is using nccl==2.20.5",
        "INFO 07-01 08:00:02 custom_all_reduce_utils.py:2] generating GPU P2P access cache in /tmp/p2p.json",
    )
    assert d.outcome is Outcome.HUNG
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.NCCL_ERROR
    assert (d.failure.line, d.failure.line_number) == ("", 0)
    analyzer = LogAnalyzer()  # a live startup cut short is not called hung from content alone
    for line in (
        "INFO 07-01 08:00:00 api_server.py:1] vLLM API server version 0.5.3",
        "INFO 07-01 08:00:01 pynccl.py:63] vLLM is using nccl==2.20.5",
    ):
        analyzer.feed(line)
    assert analyzer.diagnosis().outcome is Outcome.INCOMPLETE


def test_a_server_answering_requests_is_ready() -> None:
    """No startup lines at all, only vLLM's metrics line: the server is up; a later crash is runtime."""
    d = _diag(
        "2025-04-03 17:38:52,710 - vllm.metrics - INFO - Avg prompt throughput: 10.0 tokens/s, Avg "
        "generation throughput: 1.0 tokens/s",
        "ERROR 04-03 17:39:00 core.py:9] RuntimeError: worker crashed",
    )
    assert d.outcome is Outcome.READY
    assert d.failure is None


def test_gated_repository_asks_for_a_token_not_a_checkpoint_check() -> None:
    """A 401 names HF_TOKEN and the licence, whatever exception carries it."""
    d = _diag(
        "INFO 05-01 10:00:00 [api_server.py:1] vLLM API server version 0.10.0",
        "OSError: You are trying to access a gated repo. 401 Client Error. Cannot access gated repo for url",
    )
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.MISSING_OR_CORRUPT_WEIGHTS
    envs = [r.env for r in d.failure.remedy]
    assert "HF_TOKEN=<token>" in envs
    assert not any("verify" in r.text for r in d.failure.remedy)


def test_v0_worker_header_repeats_the_error_the_exception_line_states() -> None:
    """'Exception in worker ... while processing method m: <error>' echoes; the torch line is the cause."""
    d = _diag(
        "INFO 09-01 10:00:00 api_server.py:1] vLLM API server version 0.6.1",
        "(VllmWorkerProcess pid=5) ERROR 09-01 10:00:05 multiproc_worker_utils.py:2] Exception in worker "
        "VllmWorkerProcess while processing method determine_num_available_blocks: CUDA out of memory. "
        "Tried to allocate 2.00 GiB, Traceback (most recent call last):",
        "(VllmWorkerProcess pid=5) ERROR 09-01 10:00:05 multiproc_worker_utils.py:2] torch.OutOfMemoryError: "
        "CUDA out of memory. Tried to allocate 2.00 GiB.",
    )
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.CUDA_OOM
    assert d.failure.line_number == 3


def test_child_stream_wrapper_and_json_msg_records() -> None:
    """An app's "[ts] [stderr] " around Ollama's lines, and a runner's JSON record with "msg"."""
    ll = logline.parse(
        '[2024-12-05 01:56:09] [stderr] time=2024-12-05T01:56:09.603Z level=INFO source=routes.go:1 msg="Listening on 127.0.0.1:11434 (version 0.3.1)"',
        1,
    )
    assert ll.message == "Listening on 127.0.0.1:11434 (version 0.3.1)"
    ll = logline.parse(
        '{"function":"main","level":"INFO","line":9,"msg":"model loaded","tid":"1"}', 2
    )
    assert ll.message == "model loaded"


def test_ollama_runner_load_is_a_new_attempt_after_the_server_is_up() -> None:
    """Listening is ready; a runner that then fails to load its model is a failed load, not ready."""
    up = (
        'time=2025-01-01T10:00:00.000Z level=INFO source=routes.go:1 msg="server config" env="map[]"',
        'time=2025-01-01T10:00:00.001Z level=INFO source=routes.go:2 msg="Listening on 127.0.0.1:11434 (version 0.5.7)"',
    )
    assert _diag(*up).outcome is Outcome.READY
    d = _diag(
        *up,
        'time=2025-01-01T10:05:00.000Z level=INFO source=server.go:3 msg="starting llama server" cmd="runner --model /m"',
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 40000.00 MiB on device 0: cudaMalloc failed: out of memory",
        'time=2025-01-01T10:05:09.000Z level=ERROR source=sched.go:4 msg="error loading llama server" error="llama runner process has terminated: exit status 2"',
    )
    assert d.engine == "ollama"
    assert d.outcome is Outcome.FAILED
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.CUDA_OOM
    assert d.failure.line_number == 4
    assert d.phase is Phase.WEIGHTS_LOADING
    ok = _diag(
        *up,
        'time=2025-01-01T10:05:00.000Z level=INFO source=server.go:3 msg="starting llama server" cmd="runner --model /m"',
        'time=2025-01-01T10:05:04.000Z level=INFO source=server.go:5 msg="llama runner started in 4.01 seconds"',
    )
    assert ok.outcome is Outcome.READY
    assert ok.facts.get("load_seconds") == 4.01


def test_ollama_second_server_on_a_taken_port() -> None:
    """`ollama serve` while another one listens: port_in_use at start."""
    d = _diag("Error: listen tcp 127.0.0.1:11434: bind: address already in use")
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.PORT_IN_USE
    assert d.engine == "ollama"
    assert ("--port", "11435") not in [(r.flag, r.value) for r in d.failure.remedy]


# -- remedies right for the case --------------------------------------------------------------


def test_free_memory_remedy_never_asks_for_less_than_the_weights() -> None:
    """13 of 93 GiB free, weights unknown: no --gpu-memory-utilization 0.13 to apply blindly."""
    d = _diag(
        "INFO 05-01 10:00:00 [api_server.py:1] vLLM API server version 0.10.2",
        "(EngineCore_DP0 pid=9) ERROR 05-01 10:00:09 [core.py:7] ValueError: Free memory on device "
        "(13.0/93.0 GiB) on startup is less than desired GPU memory utilization (0.9, 83.7 GiB). "
        "Decrease GPU memory utilization or reduce GPU memory used by other processes.",
    )
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.GPU_MEMORY_UTILIZATION
    assert all(r.flag is None for r in d.failure.remedy)
    assert any("weights" in r.text for r in d.failure.remedy)


def test_nccl_remedy_puts_a_small_dev_shm_first() -> None:
    """The log says /dev/shm is 46 MiB: that is the first remedy, before the P2P switches."""
    d = _diag(
        "2024-04-26 01:58:58,742 WARNING services.py:1996 -- WARNING: The object store is using /tmp "
        "instead of /dev/shm because /dev/shm has only 47824896 bytes available.",
        "INFO 04-26 01:59:00 llm_engine.py:1] Initializing an LLM engine (v0.4.1) with config: model='m'",
        "host:1:2 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-x to 9637892 bytes",
    )
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.NCCL_ERROR
    assert d.failure.remedy[0].text.startswith("/dev/shm is too small")


def test_an_exception_that_asks_for_a_setting_is_a_configuration_error() -> None:
    """SGLang's capture wraps any error in "Capture cuda graph failed" with its generic OOM
    list; an inner exception whose message says what must be set or provided is a
    configuration error, not a dead engine (general: no engine or message is named here)."""
    head = (
        "[2026-06-08 01:40:55] server_args=ServerArgs(model_path='m', kv_cache_dtype='fp4_e2m1')",
        "[2026-06-08 01:41:27] Capture cuda graph begin. This can take up to several minutes.",
        "Traceback (most recent call last):",
        '  File "/sglang/srt/mem_cache/memory_pool.py", line 12, in set_kv_buffer',
        "    raise RuntimeError(",
    )
    asks = _diag(
        *head,
        "RuntimeError: FP4 KV scales must be calibrated before graph capture. Run one eager "
        "step first or provide checkpoint k_scale values.",
    )
    assert asks.failure is not None
    assert asks.failure.failure_class is FailureClass.CONFIG_ERROR
    assert asks.failure.line_number == 6
    assert "setting" in asks.failure.summary
    plain = _diag(*head, "RuntimeError: an internal assertion failed in the pool")
    assert plain.failure is not None
    assert plain.failure.failure_class is FailureClass.ENGINE_CORE_DIED


# -- ROCm: remedies for the platform the log shows --------------------------------------------


def _remedies(d: Diagnosis) -> str:
    assert d.failure is not None
    return " | ".join(f"{r.text} {r.env or ''}" for r in d.failure.remedy)


def test_hip_oom_names_rocm_smi_not_nvidia_smi() -> None:
    """A HIP OOM while loading weights: free the GPU, checked with rocm-smi on ROCm."""
    d = _diag(
        *_V1_HEAD,
        "(EngineCore_DP0 pid=20) ERROR 05-01 10:00:03 [core.py:7] torch.OutOfMemoryError: HIP out "
        "of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 15.98 GiB of which "
        "0 bytes is free.",
    )
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.CUDA_OOM
    assert d.facts["platform"] == "rocm"
    assert "rocm-smi" in _remedies(d)
    assert "nvidia-smi" not in _remedies(d)
    cuda = _diag(*_V1_HEAD, *(d.failure.line.replace("HIP", "CUDA"),))
    assert "nvidia-smi" in _remedies(cuda)


@pytest.mark.parametrize(
    ("arch", "version", "target"),
    [
        ("gfx1031", "10.3.0", "gfx1030"),
        ("gfx1032", "10.3.0", "gfx1030"),
        ("gfx1102", "11.0.0", "gfx1100"),
    ],
)
def test_no_code_object_for_a_consumer_card_offers_the_family_override(
    arch: str, version: str, target: str
) -> None:
    """rocBLAS finds no kernels for an RDNA 2/3 card: HSA_OVERRIDE_GFX_VERSION for its family's
    supported target (as public ROCm issues report), or a build for the card itself."""
    d = _diag(
        f"rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: Illegal "
        f"seek for GPU arch : {arch}",
    )
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.UNSUPPORTED_HARDWARE
    first = d.failure.remedy[0]
    assert first.env == f"HSA_OVERRIDE_GFX_VERSION={version}"
    assert target in first.text
    assert arch in d.failure.remedy[1].text


def test_a_supported_or_unknown_family_gets_no_override() -> None:
    """gfx1030 itself, or a data-centre or RDNA 4 part: no override is invented, a build is."""
    for arch in ("gfx1030", "gfx942", "gfx1201"):
        d = _diag(f"rocBLAS error: Cannot read TensileLibrary.dat for GPU arch : {arch}")
        assert "HSA_OVERRIDE_GFX_VERSION=" not in _remedies(d)
        assert arch in _remedies(d)
    hip = _diag("hipErrorNoBinaryForGpu: Unable to find code object for all current devices!")
    assert hip.failure is not None
    assert hip.failure.failure_class is FailureClass.UNSUPPORTED_HARDWARE
    assert "HSA_OVERRIDE" not in _remedies(hip)


def test_a_gpu_hardware_exception_under_rocm_points_at_a_spoofed_architecture() -> None:
    d = _diag(
        "ggml_cuda_init: found 1 ROCm devices:",
        ":0:rocdevice.cpp :3587: 1012 us: Callback: Queue 0x7c aborting with error : "
        "HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. code: 0x1016",
    )
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.UNSUPPORTED_HARDWARE
    assert "HSA_OVERRIDE_GFX_VERSION" in _remedies(d)


def test_rccl_failure_says_rccl_reads_the_nccl_variables() -> None:
    """NCCL's error on ROCm is RCCL's: same NCCL_* variables, rocm-smi --showtopo for links."""
    d = _diag(
        *_V1_HEAD,
        "(EngineCore_DP0 pid=20) INFO 05-01 10:00:02 [rocm.py:1] RCCL version 2.21.5+hip6.3",
        "(EngineCore_DP0 pid=20) ERROR 05-01 10:00:03 [core.py:7] torch.distributed.DistBackendError: "
        "NCCL error in: ProcessGroupNCCL.cpp:1, unhandled system error",
    )
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.NCCL_ERROR
    text = _remedies(d)
    assert "RCCL" in text
    assert "rocm-smi --showtopo" in text
    assert "NCCL_DEBUG=INFO" in text
    plain = _diag(*_V1_HEAD, d.failure.line)
    assert "RCCL" not in _remedies(plain)


def test_a_generic_oom_a_specific_line_may_refine_is_tentative_live() -> None:
    """Live, the worker's torch OOM comes before the sampler-warmup line that explains it: the
    first is offered as tentative (the follower holds it for its grace), the refinement as
    final, so a live run names the same cause as the whole log."""
    from bringup.core.diagnosis import FailureEvent

    lines = [
        *_V1_HEAD,
        "(EngineCore_DP0 pid=20) INFO 05-01 10:00:04 [gpu_worker.py:9] Warming up sampler with 1024 dummy requests",
        (
            "(Worker_TP0 pid=30) ERROR 05-01 10:00:05 [multiproc_executor.py:8] torch.OutOfMemoryError: "
            "CUDA out of memory. Tried to allocate 2.29 GiB. GPU 0 has a total capacity of 95.00 GiB of "
            "which 1.00 GiB is free."
        ),
        (
            "(Worker_TP0 pid=30) ERROR 05-01 10:00:05 [multiproc_executor.py:8] RuntimeError: CUDA out "
            "of memory occurred when warming up sampler with 1024 dummy requests. Please try lowering "
            "`max_num_seqs` or `gpu_memory_utilization` when initializing the engine."
        ),
    ]
    analyzer = LogAnalyzer()
    seen = []
    for line in lines:
        seen += [
            (e.tentative, e.failure.line_number)
            for e in analyzer.feed(line)
            if isinstance(e, FailureEvent)
        ]
    assert seen == [(True, 4), (False, 5)]
