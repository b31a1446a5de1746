"""Lines that look like causes in a healthy startup are not taken as causes."""

from __future__ import annotations

from bringup.core.analyzer import LogAnalyzer
from bringup.core.diagnosis import FailureEvent
from bringup.core.vocab import Engine, FailureClass

from builders.read_log import read_lines

CONFIG_DUMP = (
    "(EngineCore pid=4242) INFO 11-30 09:47:00 [core.py:139] Initializing a V1 LLM engine (v0.33.0) with config: "
    "model='MiniMaxAI/MiniMax-M2.5', speculative_config=None, tokenizer='MiniMaxAI/MiniMax-M2.5', "
    "skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, trust_remote_code=True, dtype=torch.bfloat16"
)


def test_trust_remote_code_in_the_config_dump_is_not_a_config_error() -> None:
    """vLLM echoes trust_remote_code=True in its engine config line; that is no failure."""
    d = read_lines(
        [
            "(APIServer pid=4200) INFO 11-30 09:46:55 [utils.py:253] non-default args: {'trust_remote_code': True}",
            CONFIG_DUMP,
        ],
        engine=Engine.VLLM,
    )
    assert d.failure is None


def test_transformers_remote_code_error_is_a_config_error() -> None:
    """transformers' refusal to run custom code is a config_error with the --trust-remote-code remedy."""
    line = (
        "ValueError: The repository for MiniMaxAI/MiniMax-M2.5 contains custom code which must be executed to "
        "correctly load the model. Please pass the argument `trust_remote_code=True` to allow custom code to be run."
    )
    d = read_lines(
        ["(APIServer pid=4200) INFO 11-30 09:46:55 [utils.py:253] non-default args: {}", line],
        engine=Engine.VLLM,
    )
    assert d.failure is not None
    assert d.failure.failure_class is FailureClass.CONFIG_ERROR
    assert any(r.flag == "--trust-remote-code" for r in d.failure.remedy)


def test_engine_core_echo_gives_way_to_the_workers_own_line() -> None:
    """EngineCore's "Worker failed with error '...'" repeats the cause; the worker's line is the root cause."""
    echo = (
        "(EngineCore pid=4300) ERROR 11-30 09:52:10 [core.py:1080] RuntimeError: Worker failed with error 'CUDA out of "
        "memory occurred when warming up sampler with 1024 dummy requests. Please try lowering `max_num_seqs` or "
        "`gpu_memory_utilization` when initializing the engine.', please check the stack trace above for the root cause"
    )
    own = (
        "(Worker_TP1 pid=4302) ERROR 11-30 09:52:10 [multiproc_executor.py:871] RuntimeError: CUDA out of memory occurred "
        "when warming up sampler with 1024 dummy requests. Please try lowering `max_num_seqs` or "
        "`gpu_memory_utilization` when initializing the engine."
    )
    a = LogAnalyzer(Engine.VLLM)
    a.feed("(APIServer pid=4200) INFO 11-30 09:46:55 [utils.py:253] non-default args: {}")
    first = [e for e in a.feed(echo) if isinstance(e, FailureEvent)]
    assert len(first) == 1
    assert not first[0].failure.is_final
    a.feed(own)
    d = a.finish(1)
    assert d.failure is not None
    assert d.failure.line == own
    assert d.failure.failure_class is FailureClass.CUDA_OOM
