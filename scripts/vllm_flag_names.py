"""Write ``src/bringup/data/vllm_flags.json``: the flag names ``vllm serve`` accepts, read from
a vLLM source tree (its parsers, not a list kept by hand).

    .venv/bin/python scripts/vllm_flag_names.py PATH/TO/vllm-0.32.0 [--out FILE]

vLLM builds ``serve``'s parser from ``add_argument`` calls with literal names
(``vllm/engine/arg_utils.py``: ``--max-model-len``, ``--tensor-parallel-size``/``-tp``, ...)
and, for the front end, from the fields of its ``*FrontendArgs`` dataclasses
(``vllm/entrypoints/launchers/cli_args.py``: ``--{field.replace('_', '-')}``). This script
reads both with ``ast`` (nothing of vLLM is imported or run). A boolean flag's ``--no-`` form
is not listed: ``plan`` accepts ``--no-X`` wherever ``--X`` is known. ``frontend_flags`` are
the API server's own (host, port, keys, templates): they cannot change a memory plan.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path

PARSER_FILES = (
    "vllm/engine/arg_utils.py",
    "vllm/entrypoints/launchers/cli_args.py",
    "vllm/entrypoints/openai/cli_args.py",
    "vllm/entrypoints/cli/serve.py",
)
FRONTEND_FILES = ("vllm/entrypoints/launchers/cli_args.py", "vllm/entrypoints/openai/cli_args.py")


def literal_flags(tree: ast.AST) -> set[str]:
    """Every ``"-x"``/``"--x"`` string given positionally to an ``add_argument`` call."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            for arg in node.args:
                text = arg.value if isinstance(arg, ast.Constant) else None
                if isinstance(text, str) and re.fullmatch(r"--?[A-Za-z][\w-]*", text):
                    found.add(text)
    return found


def frontend_fields(tree: ast.AST) -> set[str]:
    """``--field-name`` for the annotated fields of every ``*FrontendArgs`` class."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name.endswith("FrontendArgs"):
            for item in node.body:
                target = item.target if isinstance(item, ast.AnnAssign) else None
                if isinstance(target, ast.Name) and not target.id.startswith("_"):
                    found.add("--" + target.id.replace("_", "-"))
    return found


def version_of(root: Path) -> str:
    """The version in the tree's ``PKG-INFO`` or folder name (``vllm-0.32.0``)."""
    info = root / "PKG-INFO"
    if info.is_file():
        m = re.search(r"^Version: (\S+)", info.read_text(errors="replace"), re.M)
        if m:
            return m.group(1)
    m = re.search(r"(\d+\.\d+(\.\d+)?)", root.name)
    return m.group(1) if m else "unknown"


def main() -> None:
    """Read the tree, write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path)
    ap.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parents[1] / "src/bringup/data/vllm_flags.json",
    )
    args = ap.parse_args()
    flags: set[str] = set()
    frontend: set[str] = set()
    for rel in PARSER_FILES:
        path = args.root / rel
        if path.is_file():
            tree = ast.parse(path.read_text())
            found = literal_flags(tree)
            if rel in FRONTEND_FILES:
                found |= frontend_fields(tree)
                frontend |= found
            flags |= found
    data = {
        "about": "the flags `vllm serve` accepts, read by scripts/vllm_flag_names.py from "
        f"vLLM {version_of(args.root)}'s parsers ({', '.join(PARSER_FILES)})",
        "version": version_of(args.root),
        "flags": sorted(flags),
        "frontend_flags": sorted(frontend),  # the API server's: they cannot change a plan
    }
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{len(flags)} flags of vLLM {data['version']} -> {args.out}")


if __name__ == "__main__":
    main()
