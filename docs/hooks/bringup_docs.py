"""MkDocs hook: the parts of the pages that come from the code, filled in at build time.

``<!-- bringup:usage COMMAND -->`` becomes ``bringup COMMAND --help`` as the parser prints
it (so no usage is ever copied by hand), ``<!-- bringup:phases -->`` and
``<!-- bringup:classes -->`` the vocabulary tables, ``<!-- bringup:engines -->`` what each
engine's pack knows, ``<!-- bringup:exit-codes -->`` every command's exit codes and
``<!-- bringup:schema COMMAND -->`` the JSON Schema of COMMAND's ``--json`` output
(``docs/schemas/COMMAND.json``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"<!-- bringup:([a-z-]+)(?: ([a-z-]+))? -->")


def usage(command: str) -> str:
    from bringup.cli.parser_tree import command_help

    return "```\n" + command_help(command).rstrip() + "\n```"


def phases() -> str:
    from bringup.core.phase_words import PHASE_WORDS
    from bringup.core.vocab import Phase

    rows = [f"| {i} | `{p.value}` | {PHASE_WORDS[p]} |" for i, p in enumerate(Phase)]
    return "\n".join(["| order | phase | what the server is doing |", "|---|---|---|", *rows])


def classes() -> str:
    from bringup.core.vocab import FailureClass

    rows = [
        f"| `{c.value}` | {'yes' if c.is_retryable else 'no'} | [troubleshooting](troubleshooting.md#{c.value}) |"
        for c in FailureClass
    ]
    head = ["| class | `--retry` may remedy it | what to do |", "|---|---|---|"]
    return "\n".join(head + rows)


def engines() -> str:
    from bringup.core import packs
    from bringup.core.vocab import Engine, FailureClass

    head = ["| | " + " | ".join(e.value for e in Engine) + " |", "|---" * (len(Engine) + 1) + "|"]
    got = {e: packs.get(e) for e in Engine}
    rows = [
        "| default port | " + " | ".join(str(got[e].http.default_port) for e in Engine) + " |",
        "| health endpoint | " + " | ".join(f"`{got[e].http.health_path}`" for e in Engine) + " |",
        "| phases it marks | "
        + " | ".join(str(len({m.phase for m in got[e].phases})) for e in Engine)
        + " |",
        "| several nodes (`run --nodes`) | "
        + " | ".join("yes" if got[e].multinode else "no" for e in Engine)
        + " |",
    ]
    for c in FailureClass:
        counts = [sum(1 for s in got[e].signatures if s.failure_class is c) for e in Engine]
        rows.append(f"| `{c.value}` lines | " + " | ".join(str(n) for n in counts) + " |")
    return "\n".join(head + rows)


def exit_codes() -> str:
    from bringup.cli.help_text import EXIT_CODES

    out = ["| command | exit codes |", "|---|---|"]
    for command, rows in EXIT_CODES.items():
        codes = "<br>".join(f"`{code}` {text}" for code, text in rows)
        out.append(f"| [`{command}`](cli/{command}.md) | {codes} |")
    return "\n".join(out)


def schema(command: str) -> str:
    text = json.loads((DOCS / "schemas" / f"{command}.json").read_text())
    return "```json\n" + json.dumps(text, indent=2) + "\n```"


def fill(match: re.Match[str]) -> str:
    kind, arg = match.group(1), match.group(2)
    if kind == "usage" and arg:
        return usage(arg)
    if kind == "schema" and arg:
        return schema(arg)
    makers = {"phases": phases, "classes": classes, "engines": engines, "exit-codes": exit_codes}
    if kind in makers:
        return makers[kind]()
    raise ValueError(f"unknown marker <!-- bringup:{kind} -->")


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Fill every marker of the page."""
    return MARKER.sub(fill, markdown)
