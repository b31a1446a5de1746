"""The long fuzz run (a script, not a test): every file reader on 100,000+ hostile inputs each.

    .venv/bin/python bench/fuzz.py [--examples 100000] [--readers log,gguf] [--out bench/results/fuzz.md]

The inputs: a few hundred seeds per reader from the hypothesis strategies in
``tests/builders/fuzz_inputs.py`` (the ones ``make test`` runs a few dozen of), then AFL-style
mutations of them (hypothesis alone generates ~20 inputs a second here). For each
input the reader runs as its command runs it (files written to a scratch folder in
/dev/shm when there is one). Allowed outcomes: a result, or a ``BringupError`` (one line,
exit 2). Problems: any other exception, a message over one line, or one input that takes
longer than ``--slow`` seconds (a hang in the making). Counts go to bench/results/fuzz.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402

from bringup.errors import BringupError  # noqa: E402

from builders.fuzz_inputs import READERS  # noqa: E402

_INTERESTING = [
    b"\0",
    b"\xff",
    b"\0" * 8,
    b"\xff" * 8,
    (10**15).to_bytes(8, "little"),
    b"\n",
    b"{",
    b'"',
]


def mutate(example: Any, pool: list[Any], rng: random.Random) -> Any:
    """One AFL-style mutation of ``example``: bytes flipped, inserted, deleted, duplicated,
    truncated, overwritten with edge values, or spliced with another seed."""
    if isinstance(example, dict):
        out = dict(example)
        if out and rng.random() < 0.2:
            out.pop(rng.choice(sorted(out)))
        elif out:
            key = rng.choice(sorted(out))
            out[key] = mutate(out[key], [v for d in pool for v in d.values()] or [b""], rng)
        return out
    data = bytearray(example)
    for _ in range(rng.choice((1, 1, 2, 4, 8))):
        op = rng.randrange(7)
        pos = rng.randrange(len(data) + 1)
        if op == 0 and data:
            data[min(pos, len(data) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:
            data[pos:pos] = rng.randbytes(rng.randrange(1, 16))
        elif op == 2:
            del data[pos : pos + rng.randrange(1, 64)]
        elif op == 3:
            data[pos:pos] = data[pos : pos + rng.randrange(1, 256)]
        elif op == 4:
            del data[pos:]
        elif op == 5:
            data[pos : pos + 8] = rng.choice(_INTERESTING)
        else:
            other = rng.choice(pool)
            if isinstance(other, bytes):
                data[pos:] = other[rng.randrange(len(other) + 1) :]
    return bytes(data)


def fuzz(name: str, examples: int, seeds: int, scratch: Path, slow: float) -> dict[str, Any]:
    """Run one reader over ``examples`` inputs: ``seeds`` from the hypothesis strategy, the
    rest mutations of them; count outcomes and problems."""
    strategy, read = READERS[name]
    pool: list[Any] = []

    @settings(
        max_examples=seeds,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(example: Any) -> None:
        pool.append(example)

    started = time.perf_counter()
    collect()
    rng = random.Random(name)
    outcomes: Counter[str] = Counter()
    problems: list[str] = []
    slowest = 0.0
    for i in range(examples):
        example = pool[i] if i < len(pool) else mutate(rng.choice(pool), pool, rng)
        begun = time.perf_counter()
        try:
            read(example, scratch)
            outcomes["result"] += 1
        except BringupError as exc:
            outcomes["error"] += 1
            if "\n" in str(exc):
                problems.append(f"message over one line: {str(exc)[:200]!r}")
        except Exception:
            outcomes["problem"] += 1
            problems.append(traceback.format_exc(limit=4)[-600:])
        took = time.perf_counter() - begun
        slowest = max(slowest, took)
        if took > slow:
            problems.append(f"one input took {took:.1f} s")
    return {
        "tried": examples,
        "seeds": len(pool),
        "outcomes": outcomes,
        "problems": problems,
        "seconds": time.perf_counter() - started,
        "slowest": slowest,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=100_000, help="inputs per reader")
    parser.add_argument("--seeds", type=int, default=300, help="of them from hypothesis")
    parser.add_argument("--readers", default=",".join(READERS))
    parser.add_argument("--slow", type=float, default=10.0, help="seconds one input may take")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/fuzz.md")
    args = parser.parse_args()
    names = [n for n in args.readers.split(",") if n]
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    rows = []
    found: list[str] = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix="bringup-fuzz-", dir=base) as scratch:
            r = fuzz(name, args.examples, args.seeds, Path(scratch), args.slow)
        rows.append((name, r))
        found += [f"{name}: {p}" for p in r["problems"]]
        print(
            f"{name}: {r['tried']:,} inputs in {r['seconds']:.0f} s, {len(r['problems'])} problems",
            flush=True,
        )
    load = os.getloadavg()
    lines = [
        "# bringup file readers: fuzz run",
        "",
        (
            f"`bench/fuzz.py --examples {args.examples} --seeds {args.seeds}`: per reader, "
            f"{args.seeds} seeds from the hypothesis strategies of `tests/builders/fuzz_inputs.py` "
            "(generate phase only), the rest AFL-style mutations of them (bytes flipped, "
            "inserted, deleted, duplicated, truncated, edge values, splices); each reader run "
            "as its command runs it. A problem is any exception other than "
            f"BringupError, a message over one line, or one input over {args.slow:g} s. "
            f"Python {platform.python_version()}, load average {load[0]:.1f} at the end "
            "(shared 2-core machine)."
        ),
        "",
        "| reader | inputs tried | of them seeds | results | one-line errors (exit 2) | problems | seconds | slowest input (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows:
        o = r["outcomes"]
        lines.append(
            f"| {name} | {r['tried']:,} | {r['seeds']:,} | {o['result']:,} | {o['error']:,} | "
            f"{len(r['problems'])} | {r['seconds']:.0f} | {r['slowest']:.2f} |"
        )
    total = sum(r["tried"] for _, r in rows)
    lines += ["", f"Total: {total:,} inputs, {len(found)} problems."]
    if found:
        lines += ["", "Problems:", "", *[f"- `{p.splitlines()[-1][:160]}`" for p in found[:20]]]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
