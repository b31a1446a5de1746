"""The batch sizes vLLM captures CUDA graphs for by default, per version: the list, its length
and its largest size. The plan's graph pool (``core.plan.peaks``) and the startup's capture
(``core.vllm_compile``) both read them.

Pure: settings and versions in, sizes out.
"""

from __future__ import annotations


def default_capture_sizes(
    max_num_seqs: int,
    version: tuple[int, int] = (0, 33),
    *,
    v0_engine: bool = False,
    max_num_batched_tokens: int | None = None,
    ceiling: int | None = None,
) -> tuple[int, ...]:
    """The batch sizes vLLM captures CUDA graphs for (the PIECEWISE list), per version,
    ascending.

    - **V0 engine** (``vllm/worker/model_runner.py``, ``_BATCH_SIZES_TO_CAPTURE``): 1, 2, 4,
      then steps of 8 to 256, up to ``max_num_seqs`` rounded up to that list;
    - **V1 before 0.10**: 1, 2, 4, then steps of 8 to 512 (67 sizes), whatever
      ``max_num_seqs`` (``[1, 2, 4] + [8 * i for i in range(1, 65)]``, vLLM PR #18698);
    - **0.10 and 0.11**: the scheduler's ``cuda_graph_sizes = [min(max_num_seqs * 2, 512)]``
      ("avoids OOM in tight memory scenarios with small max_num_seqs"): 1, 2 and 4, then
      steps of 8 up to it;
    - **0.12 on** (``vllm/config/vllm.py::_set_cudagraph_sizes``, 0.32): up to
      ``min(2 x max_num_seqs, 512)``, the sizes 1, 2, 4 not above it, steps of 8 below 256
      and of 16 from 256.

    - **a model's own ceiling** (``ceiling``, from 0.10: ``peaks.capture_ceiling``): 1, 2, 4,
      steps of 8 below 256 and of 16 up to it, whatever ``max_num_seqs``.

    Every list is cut at ``max_num_batched_tokens``. The startups of the corpus print these
    lists (or count them in "Capturing CUDA graphs ... n/N"): 67 at 0.8.3 with max_num_seqs 1,
    3 at 0.10.2 with 1, 35 at 0.11.0 with 128, 51 from 0.13 at the default 256;
    ``bench/bench_plan_memory.py`` checks each. Not modelled: the decode sizes 0.32 appends
    off-stride, and the 992 ceiling an older gpt-oss override used with FA3.

    >>> len(default_capture_sizes(256, (0, 13))), default_capture_sizes(2, (0, 13))
    (51, (1, 2, 4))
    """
    cap = max_num_batched_tokens if max_num_batched_tokens else 1 << 30
    ladder: list[int]
    if ceiling is not None and not v0_engine and version >= (0, 10):
        ladder = [1, 2, 4, *range(8, 256, 8), *range(256, ceiling + 1, 16)]
    elif v0_engine:
        ladder = [1, 2, 4, *range(8, 257, 8)]
        top = next((s for s in ladder if s >= max_num_seqs), ladder[-1])
        ladder = [s for s in ladder if s <= top]
    elif version < (0, 10):
        ladder = [1, 2, 4, *range(8, 513, 8)]
    elif version < (0, 12):  # 1, 2 and 4 always (0.10.2 with max_num_seqs 1: [4, 2, 1])
        ladder = [1, 2, 4, *range(8, min(2 * max_num_seqs, 512) + 1, 8)]
    else:
        ladder = ladder_up_to(min(2 * max_num_seqs, 512, cap))
    return tuple(s for s in ladder if s <= cap)


def ladder_up_to(top: int) -> list[int]:
    """vLLM's ladder of sizes from 0.12 up to ``top``: 1, 2, 4 not above it, steps of 8 below
    256 and of 16 from 256 (``_set_cudagraph_sizes``, 0.32)."""
    sizes = [s for s in (1, 2, 4) if s <= top]
    sizes += list(range(8, min(top, 255) + 1, 8))
    sizes += list(range(256, top + 1, 16)) if top >= 256 else []
    return sizes


def capture_sizes(
    max_num_seqs: int,
    version: tuple[int, int] = (0, 33),
    *,
    v0_engine: bool = False,
    max_num_batched_tokens: int | None = None,
    ceiling: int | None = None,
) -> int:
    """How many batch sizes vLLM captures CUDA graphs for (:func:`default_capture_sizes`)."""
    return len(
        default_capture_sizes(
            max_num_seqs,
            version,
            v0_engine=v0_engine,
            max_num_batched_tokens=max_num_batched_tokens,
            ceiling=ceiling,
        )
    )


def largest_capture_size(
    max_num_seqs: int,
    version: tuple[int, int] = (0, 33),
    *,
    v0_engine: bool = False,
    ceiling: int | None = None,
) -> int:
    """The largest batch size captured (the graph pool's static buffers are this large)."""
    if ceiling is not None and not v0_engine and version >= (0, 10):
        return ceiling
    if v0_engine:
        ladder: list[int] = [1, 2, 4, *range(8, 257, 8)]
        return next((s for s in ladder if s >= max_num_seqs), ladder[-1])
    if version < (0, 10):
        return 512
    top = min(2 * max_num_seqs, 512)
    if version < (0, 12):
        return max(4, top // 8 * 8)
    sizes: list[int] = [s for s in (1, 2, 4, *range(8, top + 1, 8)) if s <= max(top, 1)]
    return max(sizes)
