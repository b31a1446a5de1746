"""Score `diagnose` on the real startup-log corpus, per folder, per engine and per class.

Not a test (tests/diagnose/test_real_corpus.py asserts the goals with the same scoring). Run:
``.venv/bin/python bench/bench_corpus.py [--corpus DIR] [--out FILE]``. The corpus is third-party
text: it is read where it lies (``../shared/corpus`` from the repository root, or
``$BRINGUP_CORPUS``), never copied into the repository. Metrics follow
``score_corpus.py``: class right on failed/hung logs (certain and uncertain apart), false
alarms on ready logs, phase reached exact, root-cause line (equal or contained, ANSI and
whitespace normalised), and crashes (an exception while diagnosing).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bringup.core.analyzer import diagnose_bytes
from bringup.render.diagnosis import to_json

ROOT = Path(__file__).resolve().parents[1]
GOALS = {"class": 0.90, "line": 0.80, "phase": 0.85}
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def corpus_dir() -> Path | None:
    """Where the corpus is: $BRINGUP_CORPUS, else ../shared/corpus beside the checkout (or
    beside the folder of worktrees the checkout is in)."""
    env = os.environ.get("BRINGUP_CORPUS")
    near = [ROOT.parent / "shared" / "corpus", ROOT.parent.parent / "shared" / "corpus"]
    for cand in ([Path(env)] if env else []) + near:
        if (cand / "logs").is_dir():
            return cand
    return None


def _norm(s: object) -> str:
    if not isinstance(s, str):
        return ""
    return re.sub(r"\s+", " ", _ANSI.sub("", s).replace("\r", "")).strip()


def line_match(reported: object, expected: str) -> bool:
    """Equal, or one contains the other (the shorter at least 16 characters or all of it)."""
    a, b = _norm(reported), _norm(expected)
    if not a or not b:
        return False
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return a == b or (len(short) >= min(16, len(long_)) and short in long_)


@dataclass
class Tally:
    """Counts for one row of a table."""

    logs: int = 0
    cls_ok: int = 0
    cls_n: int = 0
    unc_ok: int = 0
    unc_n: int = 0
    alarms: int = 0
    ready_n: int = 0
    phase_ok: int = 0
    line_ok: int = 0
    line_n: int = 0
    crashes: int = 0
    misses: list[str] = field(default_factory=list)

    def rate(self, ok: int, n: int) -> float | None:
        return ok / n if n else None


def score_case(folder: Path, case: dict[str, Any]) -> dict[str, Any]:
    """One log's verdict against its manifest row."""
    data = (folder / case["file"]).read_bytes()
    try:
        got = to_json(diagnose_bytes(data))
    except Exception as exc:  # a crash is what is measured here
        return {"crash": f"{type(exc).__name__}: {exc}"}
    f = got["failure"] or {}
    failed = case["outcome"] in ("failed", "hung")
    return {
        "crash": None,
        "failed": failed,
        "class_ok": failed and f.get("class") == case["failure_class"],
        "alarm": not failed
        and (got["outcome"] in ("failed", "hung") or got["failure"] is not None),
        "phase_ok": got["phase"] == case["last_phase"],
        "line_ok": line_match(f.get("line"), case["failure_line"])
        if failed and case.get("failure_line")
        else None,
        "got_class": f.get("class"),
        "got_phase": got["phase"],
    }


def score_folder(folder: Path) -> tuple[Tally, dict[str, Tally], dict[str, Tally]]:
    """The folder's totals, and the same per engine and per failure class."""
    cases = [json.loads(x) for x in (folder / "manifest.jsonl").read_text().splitlines() if x]
    total, engines, classes = Tally(), defaultdict(Tally), defaultdict(Tally)
    for case in cases:
        r = score_case(folder, case)
        rows = [total, engines[case["engine"]]]
        if case["outcome"] in ("failed", "hung"):
            rows.append(classes[case["failure_class"]])
        for t in rows:
            t.logs += 1
            if r["crash"]:
                t.crashes += 1
                continue
            t.phase_ok += int(r["phase_ok"])
            if r["failed"]:
                if case.get("uncertain"):
                    t.unc_n += 1
                    t.unc_ok += int(r["class_ok"])
                else:
                    t.cls_n += 1
                    t.cls_ok += int(r["class_ok"])
                if r["line_ok"] is not None:
                    t.line_n += 1
                    t.line_ok += int(r["line_ok"])
            else:  # ready and incomplete logs: neither may be called a failure
                t.ready_n += 1
                t.alarms += int(r["alarm"])
        if not r["crash"] and r["failed"] and not r["class_ok"] and not case.get("uncertain"):
            total.misses.append(f"{case['file']}: {case['failure_class']} -> {r['got_class']}")
    return total, dict(engines), dict(classes)


def _pct(ok: int, n: int) -> str:
    return f"{ok}/{n} ({100 * ok / n:.0f} %)" if n else "-"


def _row(name: str, t: Tally) -> str:
    return (
        f"| {name} | {t.logs} | {_pct(t.cls_ok, t.cls_n)} | {_pct(t.unc_ok, t.unc_n)} | "
        f"{t.alarms}/{t.ready_n} | {_pct(t.line_ok, t.line_n)} | {_pct(t.phase_ok, t.logs)} | "
        f"{t.crashes} |"
    )


HEAD = (
    "| {k} | logs | class right (certain) | class right (uncertain) | false alarms | "
    "root-cause line | phase exact | crashes |\n|---|---:|---:|---:|---:|---:|---:|---:|"
)


def report(corpus: Path) -> str:
    """The markdown page: per folder, then per engine and per class inside each."""
    out = [
        "# diagnose on the real-log corpus (issue 14)",
        "",
        (
            f"`bench/bench_corpus.py` over `{corpus.name}/logs/*` (read in place, never copied). "
            f"Goals per folder: certain class >= {GOALS['class']:.0%}, root-cause line >= "
            f"{GOALS['line']:.0%}, phase exact >= {GOALS['phase']:.0%}, no false alarm, no crash; "
            "uncertain labels are counted apart."
        ),
        "",
    ]
    folders = sorted(p for p in (corpus / "logs").iterdir() if (p / "manifest.jsonl").exists())
    results = {f.name: score_folder(f) for f in folders}
    out += [HEAD.format(k="folder")]
    out += [_row(name, tot) for name, (tot, _, _) in results.items()]
    for name, (tot, engines, classes) in results.items():
        out += ["", f"## {name}: per engine", "", HEAD.format(k="engine")]
        out += [_row(e, t) for e, t in sorted(engines.items())]
        out += ["", f"## {name}: per failure class", "", HEAD.format(k="class")]
        out += [_row(c, t) for c, t in sorted(classes.items())]
        if tot.misses:
            out += ["", "Certain failures classified wrong: " + "; ".join(tot.misses) + "."]
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "corpus.md")
    a = ap.parse_args()
    corpus = a.corpus or corpus_dir()
    if corpus is None:
        raise SystemExit("no corpus: set BRINGUP_CORPUS or put it at ../shared/corpus")
    t0 = time.perf_counter()
    text = report(corpus)
    text += f"\nScored in {time.perf_counter() - t0:.1f} s.\n"
    a.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
