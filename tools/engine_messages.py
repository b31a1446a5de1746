#!/usr/bin/env python3
"""The failures each engine can print on its startup path, read from its own source, per version.

    tools/engine_messages.py extract vllm 0.32.0 DIR      # DIR: an unpacked source tree or wheel
    tools/engine_messages.py extract tgi 3.3.7 GITDIR@v3.3.7
    tools/engine_messages.py check [--source vllm-0.32.0=DIR ...]
    tools/engine_messages.py coverage
    tools/engine_messages.py reclassify                   # after a change of the mapping

``extract`` lists every failure site on the engine's startup path (see ``STARTUP_PATH``; what
is read per language is in ``message_extract``), turns each message into a pattern (literal text
escaped, each value the program fills in a lazy wildcard), gives it a class by the reviewable
mapping of ``message_classes`` and writes ``src/bringup/data/messages/<engine>-<version>.jsonl``:
a header line (``meta``: the source, the startup path, digests of the files read and of the
mapping, the coverage) and one row per site: engine, version, file, line, function, kind, type,
template (``{}`` for a value), pattern, class, rule, load, why. Only the message templates and
their places are kept: no code. ``check`` says whether the tables are current: always, that the
mapping still gives every row its class; with ``--source`` for a table, that the source still
gives the same rows. ``coverage`` prints, per table, the share of its sites bringup recognises
with a class (the figure the issue sets goals for); resource warnings and Go errors that only
wrap another (kind ``wrap``: ``"%s: %w"``, whose wrapped error's own site is counted) are listed
apart from it. ``reclassify`` gives the stored rows the mapping's classes again (no source).

The startup path of each engine, and what is left out of it: ``message_paths``; templates
to patterns: ``message_patterns``; rows, classes and coverage: ``message_rows``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from message_paths import STARTUP_PATH, Source, sites
from message_rows import Row, build_rows, coverage, reclassified

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "bringup" / "data" / "messages"


# -- tables ------------------------------------------------------------------------------------


def mapping_digest() -> str:
    text = (Path(__file__).parent / "message_classes.py").read_bytes()
    return hashlib.sha256(text).hexdigest()[:16]


def table_path(engine: str, version: str) -> Path:
    return DATA / f"{engine}-{version}.jsonl"


def write_table(engine: str, version: str, spec: str, rows: list[Row], digest: str) -> Path:
    meta = {
        "meta": {
            "engine": engine,
            "version": version,
            "source": spec_label(spec),
            "startup_path": list(STARTUP_PATH[engine]),
            "source_digest": digest[:16],
            "mapping_digest": mapping_digest(),
            "coverage": coverage(rows),
        }
    }
    path = table_path(engine, version)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(meta, ensure_ascii=False)]
    lines += [json.dumps(r.to_json(), ensure_ascii=False) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def spec_label(spec: str) -> str:
    """Where the source came from, without this machine's paths."""
    if "@" in spec and not Path(spec).exists():
        gitdir, _, ref = spec.rpartition("@")
        name = Path(gitdir).parent.name.replace("+", "/")
        return f"github:{name}@{ref}"
    return Path(spec).name


def read_table(path: Path) -> tuple[dict[str, object], list[Row]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    meta = json.loads(lines[0])["meta"]
    return meta, [Row.from_json(json.loads(line)) for line in lines[1:] if line.strip()]


def tables() -> Iterator[Path]:
    yield from sorted(DATA.glob("*.jsonl"))


# -- commands ----------------------------------------------------------------------------------


def cmd_extract(engine: str, version: str, spec: str) -> int:
    found, digest = sites(Source(spec), engine)
    rows = build_rows(engine, version, found)
    path = write_table(engine, version, spec, rows, digest)
    print(f"{path.relative_to(ROOT)}: {_coverage_line(coverage(rows))}")
    return 0


def _coverage_line(c: dict[str, int | float]) -> str:
    return (
        f"{c['recognised']}/{c['sites']} startup-path failure sites recognised with a class "
        f"({c['share_percent']} %; {c['with_class']} with a class; {c['warnings']} resource "
        f"warnings and {c.get('wraps', 0)} pure wraps listed apart)"
    )


def cmd_check(sources: dict[str, str]) -> int:
    stale = 0
    for path in tables():
        meta, rows = read_table(path)
        name = path.stem
        before = [r.to_json() for r in rows]
        again = [r.to_json() for r in reclassified(rows)]
        problems = []
        if before != again:
            changed = sum(a != b for a, b in zip(before, again, strict=True))
            problems.append(f"{changed} rows get another class from the mapping now")
        spec = sources.get(name)
        if spec is not None:
            found, digest = sites(Source(spec), str(meta["engine"]))
            fresh = [
                r.to_json() for r in build_rows(str(meta["engine"]), str(meta["version"]), found)
            ]
            if fresh != before:
                problems.append("the source gives other rows")
            if digest[:16] != meta["source_digest"]:
                problems.append(
                    "the source's startup files differ from those the table was read from"
                )
            where = "rows and source checked"
        else:
            where = "source not given: its rows were not read again"
        if problems:
            stale += 1
            print(f"{name}: STALE ({'; '.join(problems)}); regenerate with extract")
        else:
            print(f"{name}: current ({where})")
    return 1 if stale else 0


def cmd_reclassify() -> int:
    """Every table's rows given their class by the mapping as it is now (no source needed: the
    rows, their templates and places stay; class, rule, pattern, load, why and phase are
    computed again, and the header's mapping digest and coverage with them)."""
    for path in tables():
        meta, rows = read_table(path)
        fresh = reclassified(rows)
        meta = {**meta, "mapping_digest": mapping_digest(), "coverage": coverage(fresh)}
        lines = [json.dumps({"meta": meta}, ensure_ascii=False)]
        lines += [json.dumps(r.to_json(), ensure_ascii=False) for r in fresh]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"{path.stem}: {_coverage_line(coverage(fresh))}")
    return 0


def cmd_coverage() -> int:
    for path in tables():
        _meta, rows = read_table(path)
        print(f"{path.stem}: {_coverage_line(coverage(rows))}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("extract", help="read one engine version's source into its table")
    ex.add_argument("engine", choices=sorted(STARTUP_PATH))
    ex.add_argument("version")
    ex.add_argument("source", help="a source directory, or GITDIR@REF")
    ck = sub.add_parser("check", help="say whether the tables are current")
    ck.add_argument("--source", action="append", default=[], metavar="ENGINE-VERSION=SPEC")
    sub.add_parser("coverage", help="print each table's coverage")
    sub.add_parser("reclassify", help="give every table's rows the mapping's classes again")
    args = parser.parse_args(argv)
    if args.command == "reclassify":
        return cmd_reclassify()
    if args.command == "extract":
        return cmd_extract(args.engine, args.version, args.source)
    if args.command == "check":
        return cmd_check(dict(s.split("=", 1) for s in args.source))
    return cmd_coverage()


if __name__ == "__main__":
    raise SystemExit(main())
