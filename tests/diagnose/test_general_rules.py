"""The general rules of issue 24, each on lines written here (no corpus text).

(a) a summary names the nearest cause before it, else its own signal; (b) a figure no healthy
start reports is the cause, with its numbers; (c) an exception no signature knows is read by
its type, message and frames; the verdict says how sure it is.
"""

from __future__ import annotations

import pytest

from bringup.core import causes, fact_checks
from bringup.core.analyzer import LogAnalyzer, diagnose_bytes
from bringup.core.diagnosis import Confidence, Diagnosis, FailureEvent
from bringup.core.vocab import FailureClass

F = FailureClass
V = "(EngineCore_DP0 pid=7) {level} 01-02 03:04:05 [{file}:10] {msg}"
BANNER = "(APIServer pid=1) INFO 01-02 03:04:00 [api_server.py:1] vLLM API server version 0.11.0"


def _v(msg: str, level: str = "INFO", file: str = "worker.py") -> str:
    return V.format(level=level, file=file, msg=msg)


def _diag(lines: list[str]) -> Diagnosis:
    return diagnose_bytes(("\n".join(lines) + "\n").encode())


def _live(lines: list[str]) -> Diagnosis:
    analyzer = LogAnalyzer()
    for line in lines:
        analyzer.feed(line)
    return analyzer.finish(whole_log=True)


# -- (b) facts that contradict a healthy start --------------------------------------------


def test_negative_kv_memory_is_the_cause_before_the_summary() -> None:
    lines = [
        BANNER,
        _v("Model loading took 10.5 GiB and 3.0 seconds"),
        _v("Available KV cache memory: -1.25 GiB"),
        _v("EngineCore failed to start.", "ERROR", "core.py"),
        _v("Traceback (most recent call last):", "ERROR", "core.py"),
    ]
    d = _diag(lines)
    assert d.failure is not None
    assert d.failure.failure_class is F.KV_CACHE_INSUFFICIENT
    assert d.failure.line_number == 3
    assert "-1.25 GiB" in d.failure.summary  # the numbers in the summary
    assert d.failure.confidence is Confidence.CERTAIN
    assert _live(lines) == d


def test_the_engines_own_error_after_the_figure_names_it_in_its_words() -> None:
    lines = [
        BANNER,
        _v("Available KV cache memory: 0.00 GiB"),
        _v(
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine.",
            "ERROR",
            "core.py",
        ),
    ]
    d = _diag(lines)
    assert d.failure is not None
    assert (d.failure.failure_class, d.failure.line_number) == (F.KV_CACHE_INSUFFICIENT, 3)


def test_a_positive_kv_memory_is_no_failure() -> None:
    d = _diag([BANNER, _v("Available KV cache memory: 7.50 GiB")])
    assert d.failure is None


def test_a_negative_profiled_token_budget_is_the_cause_without_any_error_line() -> None:
    sg = "[2030-01-02 03:04:05 TP0] "
    lines = [
        sg + "server_args=ServerArgs(model_path='m', tp_size=1)",
        sg + "Load weight end. type=X, dtype=torch.bfloat16, avail mem=1.00 GB, mem usage=9.00 GB.",
        sg
        + "max_total_tokens=4096 is larger than the profiled value -1234. Use the profiled value instead.",
    ]
    d = _diag(lines)
    assert d.failure is not None
    assert d.failure.failure_class is F.KV_CACHE_INSUFFICIENT
    assert d.failure.line_number == 3
    assert "-1234" in d.failure.summary


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (
            {"free_gib_at_start": 10.0, "total_gib": 80.0, "gpu_memory_utilization": 0.9},
            "free_below_share",
        ),
        ({"free_gib_at_start": 79.0, "total_gib": 80.0, "gpu_memory_utilization": 0.9}, None),
        ({"tensor_parallel_size": 4, "gpus_visible": 2}, "ranks_above_gpus"),
        (
            {"tensor_parallel_size": 2, "pipeline_parallel_size": 2, "gpus_visible": 2},
            "ranks_above_gpus",
        ),
        ({"tensor_parallel_size": 2, "gpus_visible": 2}, None),
        ({"available_kv_gib": 0.0}, "kv_memory_not_positive"),
        ({"available_kv_gib": 0.5}, None),
    ],
)
def test_fact_checks(facts: dict[str, float | int | str], expected: str | None) -> None:
    check = fact_checks.broken(facts, set(facts))
    assert (check.name if check else None) == expected


def test_a_check_waits_for_every_figure_it_needs() -> None:
    assert fact_checks.broken({"tensor_parallel_size": 8}, {"tensor_parallel_size"}) is None


# -- (c) exceptions no signature knows ----------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "text", "frames", "expected"),
    [
        (
            "RuntimeError",
            "Allocation on device 0 would exceed allowed memory. (out of memory)",
            (),
            F.CUDA_OOM,
        ),
        (
            "OSError",
            "[Errno 98] could not bind the socket: Address already in use",
            (),
            F.PORT_IN_USE,
        ),
        (
            "RuntimeError",
            "failed to bind to 0.0.0.0:1234 (errno: 98 - whatever)",
            (),
            F.PORT_IN_USE,
        ),
        (
            "RuntimeError",
            "Cards with compute capability below 6.0 are not supported.",
            (),
            F.UNSUPPORTED_HARDWARE,
        ),
        ("AcceleratorError", "CUDA error: invalid device ordinal", (), F.CONFIG_ERROR),
        ("TimeoutError", "Timed out waiting for the worker to report READY", (), F.TIMEOUTS),
        (
            "FileNotFoundError",
            "[Errno 2] No such file or directory: '/m/config.json'",
            (),
            F.MISSING_OR_CORRUPT_WEIGHTS,
        ),
        (
            "KeyError",
            "'layers.0.weight'",
            ("load_model", "load_weights"),
            F.MISSING_OR_CORRUPT_WEIGHTS,
        ),
        (
            "ValueError",
            "you should pass the model with --served-model-name, not --model",
            (),
            F.CONFIG_ERROR,
        ),
        ("ValueError", "Cannot find the config file for gptq", (), F.CONFIG_ERROR),
        ("AssertionError", "", ("main", "check_server_args"), F.CONFIG_ERROR),
        ("AttributeError", "'FooConfig' object has no attribute 'hidden_size'", (), F.CONFIG_ERROR),
        # a bug, not a setup: no rule claims it
        ("TypeError", "'NoneType' object is not subscriptable", ("forward",), None),
        ("ValueError", "not enough values to unpack (expected 3, got 2)", ("forward",), None),
        ("ImportError", "libfoo.so: undefined symbol: _Zbar", (), None),
    ],
)
def test_an_error_is_read_by_its_type_message_and_frames(
    kind: str, text: str, frames: tuple[str, ...], expected: FailureClass | None
) -> None:
    cause = causes.classify(kind, text, frames)
    assert (cause.failure_class if cause else None) is expected


def test_an_unknown_exception_gets_a_class_a_likely_confidence_and_where_to_look() -> None:
    lines = [
        BANNER,
        _v("Traceback (most recent call last):", "ERROR", "core.py"),
        _v('  File "/x/engine/arg_utils.py", line 9, in create_engine_config', "ERROR", "core.py"),
        _v("ValueError: --max-foo 3 cannot be combined with --bar", "ERROR", "core.py"),
        _v("EngineCore failed to start.", "ERROR", "core.py"),
    ]
    d = _diag(lines)
    assert d.failure is not None
    assert (d.failure.failure_class, d.failure.line_number) == (F.CONFIG_ERROR, 4)
    assert d.failure.confidence is Confidence.LIKELY
    assert d.failure.remedy
    assert "flag" in d.failure.remedy[0].text
    assert _live(lines) == d


def test_an_exception_no_rule_explains_is_an_honest_guess() -> None:
    d = _diag([BANNER, _v("TypeError: 'NoneType' object is not callable", "ERROR", "core.py")])
    assert d.failure is not None
    assert d.failure.failure_class is F.ENGINE_CORE_DIED
    assert d.failure.confidence is Confidence.GUESS


def test_a_rust_panic_is_read_like_an_exception_before_the_launchers_summary() -> None:
    lines = [
        "2030-01-02T03:04:05.000001Z  INFO text_generation_launcher: Starting Webserver",
        (
            "thread 'main' panicked at 'Warmup failed: device ran out of memory (out of memory)', "
            "router/src/main.rs:1:2"
        ),
        "2030-01-02T03:04:06.000001Z ERROR text_generation_launcher: Webserver Crashed",
        "Error: WebserverFailed",
    ]
    d = _diag(lines)
    assert d.failure is not None
    assert (d.failure.failure_class, d.failure.line_number) == (F.CUDA_OOM, 2)
    assert d.engine == "tgi"


# -- (a) summaries point at the cause before them -----------------------------------------


def test_a_summary_with_a_signal_is_the_cause_when_nothing_before_states_one() -> None:
    lines = [
        "2030-01-02T03:04:05.000001Z  INFO shard-manager: text_generation_launcher: Starting shard rank=0",
        (
            "2030-01-02T03:04:09.000001Z ERROR shard-manager: text_generation_launcher: Shard process "
            "was signaled to shutdown with signal 4 rank=0"
        ),
        "2030-01-02T03:04:09.000002Z ERROR text_generation_launcher: Shard 0 failed to start",
    ]
    d = _diag(lines)
    assert d.failure is not None
    assert (d.failure.failure_class, d.failure.line_number) == (F.UNSUPPORTED_HARDWARE, 2)
    assert d.failure.confidence is Confidence.LIKELY


def test_an_error_line_with_a_reason_before_a_summary_is_its_cause() -> None:
    lines = [
        BANNER,
        _v("Could not reserve the buffer: the device ran out of memory", "ERROR", "loader.py"),
        _v("EngineCore failed to start.", "ERROR", "core.py"),
    ]
    d = _diag(lines)
    assert d.failure is not None
    assert (d.failure.failure_class, d.failure.line_number) == (F.CUDA_OOM, 2)
    assert _live(lines) == d


def test_error_lines_without_a_summary_after_them_are_no_failure() -> None:
    """A healthy start full of harmless ERROR lines stays healthy: an error line becomes a
    cause only when a summary says the start failed."""
    lines = [
        BANNER,
        _v("Could not reach the metrics endpoint: device ran out of memory", "ERROR", "m.py"),
        "(APIServer pid=1) INFO 01-02 03:04:09 [api_server.py:2] Starting vLLM API server 0 on http://0.0.0.0:8000",
        "INFO:     Application startup complete.",
    ]
    d = _diag(lines)
    assert d.failure is None
    assert d.outcome.value == "ready"


def test_a_summary_alone_is_a_guess() -> None:
    d = _diag([BANNER, _v("EngineCore failed to start.", "ERROR", "core.py")])
    assert d.failure is not None
    assert d.failure.failure_class is F.ENGINE_CORE_DIED
    assert d.failure.confidence is Confidence.GUESS


def test_the_cause_a_summary_names_is_offered_tentatively_live() -> None:
    """Live, a cause found by a rule may still be replaced by the engine's own words close
    after it: it is tentative, so the follower holds it for its grace."""
    analyzer = LogAnalyzer()
    seen = []
    for line in [BANNER, _v("Available KV cache memory: -3.00 GiB")]:
        seen += [e for e in analyzer.feed(line) if isinstance(e, FailureEvent)]
    assert [(e.failure.failure_class, e.tentative) for e in seen] == [
        (F.KV_CACHE_INSUFFICIENT, True)
    ]


# -- (d) an engine is recognised from any characteristic line -------------------------------


@pytest.mark.parametrize(
    ("lines", "engine"),
    [
        (["INFO 01-02 03:04:05 launcher.py:20] Route: /health, Methods: GET"], "vllm"),
        (["WARNING 01-02 03:04:05 [gpu_worker.py:99] something harmless"], "vllm"),
        (["[2030-01-02 03:04:05 DP1 TP1] Scheduler started"], "sglang"),
        (["[TP3] Init torch distributed ends."], "sglang"),
        (
            ["[2030-01-02 03:04:05] Load weight end. type=XForCausalLM, dtype=torch.float16"],
            "sglang",
        ),
        (
            ['time=2030-01-02T03:04:05Z level=INFO source=gpu.go:12 msg="looking for GPUs"'],
            "ollama",
        ),
        (["2030-01-02T03:04:05.000001Z  INFO text_generation_launcher: Args {"], "tgi"),
        (["llama_model_loader: - kv   0: general.architecture str = llama"], "llamacpp"),
        (["an unrelated line", "another one"], None),
    ],
)
def test_an_engine_is_recognised_from_one_characteristic_line(
    lines: list[str], engine: str | None
) -> None:
    assert _diag(lines).engine == engine
    assert _live(lines).engine == engine


def test_a_fragment_without_a_banner_gets_the_class_its_line_states() -> None:
    lines = [
        "INFO 01-02 03:04:05 api_server.py:5] Started server process",
        (
            "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): "
            "[errno 98] address already in use"
        ),
    ]
    d = _diag(lines)
    assert d.engine == "vllm"
    assert d.failure is not None
    assert d.failure.failure_class is F.PORT_IN_USE


def test_a_torch_watchdog_line_is_nccl_whichever_engine_prints_it() -> None:
    lines = [
        (
            "2030-01-02T03:04:05.000000001Z [E ProcessGroupNCCL.cpp:1] [Rank 0] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 9 ms"
        )
    ]
    d = _diag(lines)
    assert d.failure is not None
    assert d.failure.failure_class is F.NCCL_ERROR


def test_a_ci_column_border_is_peeled_like_a_quote() -> None:
    from bringup.core import logline

    ll = logline.parse("  | [2030-01-02T03:04:05Z] ERROR:    boom", 1)
    assert (ll.message, ll.level) == ("boom", "ERROR")


# -- honest confidence and ranked candidates ------------------------------------------------


def test_candidates_rank_the_verdict_first_then_other_classes_at_most_three() -> None:
    from bringup.render.diagnosis import format_plain, to_json

    lines = [
        BANNER,
        _v("TypeError: 'NoneType' object is not callable", "ERROR", "core.py"),
        _v("Could not bind: Address already in use", "ERROR", "api.py"),
        _v("TimeoutError: Timed out waiting for the peer", "ERROR", "core.py"),
        _v("RuntimeError: the device ran out of memory", "ERROR", "core.py"),
        _v("EngineCore failed to start.", "ERROR", "core.py"),
    ]
    d = _diag(lines)
    assert d.failure is not None
    got = to_json(d)["failure"]
    assert got["class"] == "engine_core_died"  # the first exception, honestly a guess
    assert got["confidence"] == "guess"
    cands = got["candidates"]
    assert len(cands) == 3
    assert cands[0] == {
        "class": "engine_core_died",
        "line_number": 2,
        "line": lines[1],
        "why": "no known signature or rule explains it",
    }
    assert {c["class"] for c in cands[1:]} <= {"timeouts", "cuda_oom"}
    text = format_plain(d, "x.log")
    assert "confidence guess" in text
    assert "candidate 3" in text


def test_a_certain_verdict_prints_no_candidates() -> None:
    from bringup.render.diagnosis import format_plain

    d = _diag([BANNER, _v("OSError: [Errno 98] Address already in use", "ERROR", "api.py")])
    assert d.failure is not None
    assert d.failure.confidence is Confidence.CERTAIN
    assert "candidate" not in format_plain(d, "x.log")


# -- the phase of a fragment that shows none -----------------------------------------------


@pytest.mark.parametrize(
    ("lines", "phase"),
    [
        # the message names the step
        (["RuntimeError: Warmup failed: the device ran out of memory"], "warmup"),
        # the frames name it, innermost first
        (
            [
                "Traceback (most recent call last):",
                '  File "/x/worker/model_runner.py", line 1, in capture_model',
                '  File "/x/torch/cuda/graphs.py", line 2, in capture_end',
                "RuntimeError: CUDA error: out of memory",
            ],
            "cuda_graph_capture",
        ),
        # nothing names it: where the class happens
        (["RuntimeError: NCCL error: unhandled system error"], "distributed_init"),
        (["ValueError: --foo-bar must be one of a, b"], "config"),
    ],
)
def test_a_fragment_without_phase_lines_gets_the_phase_its_failure_names(
    lines: list[str], phase: str
) -> None:
    d = _diag(lines)
    assert d.failure is not None
    assert d.failure.phase.value == phase
    assert d.phase.value == phase


def test_a_phase_the_log_reached_is_never_moved_back_by_a_message() -> None:
    lines = [
        BANNER,
        _v("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 10/10", file="runner.py"),
        _v("RuntimeError: failed while loading the model weights again", "ERROR", "core.py"),
    ]
    d = _diag(lines)
    assert d.failure is not None
    assert d.failure.phase.value == "cuda_graph_capture"


def test_a_llamacpp_server_loop_line_shows_ready_whatever_came_before() -> None:
    lines = [
        "srv  llama_server: server is listening on http://127.0.0.1:8080",  # before the load
        "llama_model_loader: loaded meta data with 3 key-value pairs",
        "srv  llama_server: model loaded",
        "srv  update_slots: all slots are idle",
    ]
    d = _diag(lines)
    assert d.outcome.value == "ready"
    assert _diag(lines[:2]).outcome.value == "incomplete"  # listening alone is not ready


def test_vllms_route_list_is_the_api_server_starting() -> None:
    lines = [
        "INFO 01-02 03:04:05 launcher.py:27] Route: /health, Methods: GET",
        "INFO:     Application startup complete.",
    ]
    assert _diag(lines).outcome.value == "ready"
    assert _diag(lines[:1]).phase.value == "api_server_starting"


# -- a status that only an intermediary produces names the intermediary --------------------


@pytest.mark.parametrize(
    "line",
    [
        "AssertionError: res=<Response [502]>, res.text=''",
        "RuntimeError: warmup request failed: 504 Gateway Timeout",
        "requests.exceptions.HTTPError: 502 Bad Gateway for url: http://127.0.0.1:30000/generate",
        # urllib3's connection log: the proxy's address, then a request in absolute form
        '[2025-01-02 03:06:06] http://10.1.2.3:3128 "GET http://0.0.0.0:30000/get_model_info HTTP/1.1" 403 512',
    ],
)
def test_a_gateway_status_on_a_local_request_is_a_proxy_in_the_environment(line: str) -> None:
    lines = [
        "[2025-01-02 03:04:05 TP0] Load weight end. type=LlamaForCausalLM, avail mem=9.00 GB",
        "[2025-01-02 03:04:06] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
        "[2025-01-02 03:06:06] Initialization failed. warmup error: Traceback (most recent call last):",
        '  File "/opt/sglang/srt/entrypoints/http_server.py", line 900, in _wait_and_warmup',
        line,
    ]
    d = _diag(lines)
    assert d.failure is not None
    assert d.failure.failure_class is F.CONFIG_ERROR
    assert d.failure.line_number == 5
    assert any("no_proxy=" in r.text for r in d.failure.remedy)
    assert _live(lines) == d


def test_a_gateway_word_at_info_is_not_a_failure() -> None:
    """Advice or a client's access line at INFO that mentions a 502 is not the server failing."""
    lines = [
        BANNER,
        _v("Retrying: upstream answered 502 Bad Gateway, will try again"),
        # a direct request (origin form) that got an error is not a proxy's answer
        '[2025-01-02 03:06:06] http://127.0.0.1:8000 "GET /v1/models HTTP/1.1" 404 22',
        '[2025-01-02 03:06:07] http://127.0.0.1:8000 "GET /health HTTP/1.1" 200 0',
        _v("Starting vLLM API server 0 on http://0.0.0.0:8000", file="api_server.py"),
        _v("Application startup complete.", file="launcher.py"),
    ]
    d = _diag(lines)
    assert d.failure is None
