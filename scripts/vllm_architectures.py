"""Regenerate src/bringup/data/vllm_architectures.json from vLLM's own code, per version.

    python scripts/vllm_architectures.py SOURCE [SOURCE...]

Each SOURCE is a vLLM wheel (``pip download vllm==0.11.0 --no-deps``), an installed
``vllm`` package folder (``.../site-packages/vllm``) or a source checkout. From
``vllm/model_executor/models/registry.py`` it takes the keys of every module-level
``_*_MODELS`` dict literal (the architectures ``ModelRegistry`` knows) and
``_PREVIOUSLY_SUPPORTED_MODELS`` (architecture -> the last version that had it) and
``_OOT_SUPPORTED_MODELS`` (architectures served by an out-of-tree plugin, with its address);
from ``vllm/config/model.py`` (``vllm/config/__init__.py`` or ``vllm/config.py`` before) the suffixes of
``_SUFFIX_TO_DEFAULTS``, with which vLLM converts an unknown ``XForSequenceClassification``
to a registered ``XForCausalLM``. Only names are kept (facts), never code. Versions already
in the file and not given again are kept.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src/bringup/data/vllm_architectures.json"
REGISTRY = "vllm/model_executor/models/registry.py"
CONFIGS = ("vllm/config/model.py", "vllm/config/__init__.py", "vllm/config.py")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    data = json.loads(OUT.read_text()) if OUT.exists() else {"versions": {}}
    for source in argv:
        version, files = _read(Path(source))
        entry = _entry(files)
        data["versions"][version] = entry
        print(f"vLLM {version}: {len(entry['architectures'])} architectures", file=sys.stderr)
    data["versions"] = dict(sorted(data["versions"].items(), key=lambda kv: _key(kv[0])))
    data["source"] = (
        "keys of the _*_MODELS dicts in vllm/model_executor/models/registry.py and the "
        "suffixes of _SUFFIX_TO_DEFAULTS in vllm/config, per released version; regenerate "
        "with scripts/vllm_architectures.py"
    )
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return 0


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", version)[:3])


def _read(source: Path) -> tuple[str, dict[str, str]]:
    """(version, {path in the package: text}) of the files needed."""
    wanted = (REGISTRY, *CONFIGS)
    if source.suffix == ".whl":
        with zipfile.ZipFile(source) as whl:
            names = set(whl.namelist())
            files = {n: whl.read(n).decode() for n in wanted if n in names}
        version = source.name.split("-")[1]
        return version, files
    root = source.parent if source.name == "vllm" else source
    files = {n: (root / n).read_text() for n in wanted if (root / n).is_file()}
    return _installed_version(root), files


def _installed_version(root: Path) -> str:
    for meta in sorted(root.glob("vllm*.dist-info/METADATA")):
        for line in meta.read_text().splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip().split("+")[0]
    version_file = root / "vllm/_version.py"
    match = re.search(r"version = .?['\"]([^'\"]+)", version_file.read_text())
    if match is None:
        raise SystemExit(f"no vLLM version found under {root}")
    return match.group(1).split("+")[0]


def _entry(files: dict[str, str]) -> dict[str, object]:
    if REGISTRY not in files:
        raise SystemExit(f"{REGISTRY} is not in that source")
    tree = ast.parse(files[REGISTRY])
    names: set[str] = set()
    aside: dict[str, dict[str, str]] = {}
    for target, value in _assignments(tree):
        if not (isinstance(value, ast.Dict) and re.fullmatch(r"_[A-Z0-9_]+_MODELS", target)):
            continue
        if target in ("_PREVIOUSLY_SUPPORTED_MODELS", "_OOT_SUPPORTED_MODELS"):
            aside[target] = {
                k.value: v.value
                for k, v in zip(value.keys, value.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)
            }
        else:
            names |= {k.value for k in value.keys if isinstance(k, ast.Constant)}
    config = next((files[c] for c in CONFIGS if c in files), "")
    return {
        "architectures": sorted(names),
        "previously_supported": dict(sorted(aside.get("_PREVIOUSLY_SUPPORTED_MODELS", {}).items())),
        "out_of_tree": dict(sorted(aside.get("_OOT_SUPPORTED_MODELS", {}).items())),
        "convert_suffixes": _suffixes(config),
    }


def _assignments(tree: ast.Module) -> list[tuple[str, ast.expr]]:
    out = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                out.append((target.id, node.value))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            out.append((node.target.id, node.value))
    return out


def _suffixes(text: str) -> list[str]:
    if not text:
        return []
    for target, value in _assignments(ast.parse(text)):
        if target == "_SUFFIX_TO_DEFAULTS" and isinstance(value, ast.List):
            return [
                e.elts[0].value
                for e in value.elts
                if isinstance(e, ast.Tuple) and isinstance(e.elts[0], ast.Constant)
            ]
    return []


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
