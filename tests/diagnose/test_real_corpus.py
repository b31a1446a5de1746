"""diagnose on the real-log corpus (../shared/corpus, read in place): the goals of issue 14.

Skips with one line when the corpus is not there (a fresh clone elsewhere); CI has it.
The scoring is bench/bench_corpus.py's, which also writes the per-engine, per-class table.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).parents[2] / "bench" / "bench_corpus.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_corpus", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


bench = _bench()
CORPUS = bench.corpus_dir()
FOLDERS = sorted(p.name for p in (CORPUS / "logs").iterdir()) if CORPUS else []


@pytest.mark.skipif(
    CORPUS is None, reason="no real-log corpus (../shared/corpus or $BRINGUP_CORPUS)"
)
@pytest.mark.parametrize("folder", FOLDERS)
def test_corpus_folder_meets_the_goals(folder: str) -> None:
    """Certain failures classified, root-cause lines, phases, no false alarm, no crash."""
    assert CORPUS is not None
    total, _, _ = bench.score_folder(CORPUS / "logs" / folder)
    assert total.crashes == 0
    assert total.alarms == 0
    assert total.cls_ok / total.cls_n >= bench.GOALS["class"], total.misses
    assert total.line_ok / total.line_n >= bench.GOALS["line"]
    assert total.phase_ok / total.logs >= bench.GOALS["phase"]
