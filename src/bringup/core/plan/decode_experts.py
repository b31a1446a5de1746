"""Where one token's experts land under expert parallelism: vLLM's placement and the busiest GPU.

:mod:`.decode` bounds an expert-parallel decode step by the GPU that holds the most of the
token's top-k experts; this module counts that exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

__all__ = ["busiest_experts", "expert_counts"]


def expert_counts(num_experts: int, ranks: int) -> tuple[int, ...]:
    """Experts per EP rank as vLLM places them: ``E // EP`` each, the first ``E % EP`` one more."""
    base, extra = divmod(num_experts, ranks)
    return tuple(base + (1 if r < extra else 0) for r in range(ranks))


@lru_cache(maxsize=256)
def busiest_experts(num_experts: int, top_k: int, ranks: int) -> float:
    """Expected number of one token's ``top_k`` experts on the GPU that holds the most of them.

    The k experts are k distinct experts of E, drawn uniformly; rank r holds ``n_r`` of them
    (:func:`expert_counts`). ``P(max <= m)`` is the number of draws with at most m on every
    rank, the coefficient of ``x^k`` in ``prod_r sum_{j<=m} C(n_r, j) x^j``, over ``C(E, k)``;
    ``E[max] = sum_{m>=1} P(max >= m)``. Exact integers, then one division.

    >>> busiest_experts(128, 8, 4), busiest_experts(8, 2, 8), busiest_experts(64, 6, 1)
    (3.4859..., 1.0, 6.0)
    """
    k = min(top_k, num_experts)
    if ranks <= 1 or k <= 0:
        return float(k)
    sizes = expert_counts(num_experts, ranks)
    total = math.comb(num_experts, k)
    expected = 0.0
    for m in range(1, k + 1):  # P(max >= m) = 1 - P(max <= m - 1)
        expected += 1.0 - _draws_at_most(sizes, k, m - 1) / total
    return expected


def _draws_at_most(sizes: Sequence[int], k: int, cap: int) -> int:
    """How many k-subsets of the experts put at most ``cap`` on every rank."""
    poly = [1] + [0] * k  # coefficients of x^0..x^k
    for n in sizes:
        term = [math.comb(n, j) for j in range(min(n, cap) + 1)]
        out = [0] * (k + 1)
        for i, a in enumerate(poly):
            if a:
                for j, b in enumerate(term[: k + 1 - i]):
                    out[i + j] += a * b
        poly = out
    return poly[k]
