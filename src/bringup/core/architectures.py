"""config.json's ``architectures`` against vLLM's model registry, per vLLM version.

vLLM picks the model class by the first name it knows in ``architectures``: its
``ModelRegistry`` (``vllm/model_executor/models/registry.py``) lists every name; one
ending in a task suffix (``XForSequenceClassification``) whose base (``XForCausalLM``) is
listed is converted (``_SUFFIX_TO_DEFAULTS``); a name it once had is refused with the
version that last had it (``_PREVIOUSLY_SUPPORTED_MODELS``), one served by a plugin with
the plugin (``_OOT_SUPPORTED_MODELS``); anything else is refused ("Model architectures
[...] are not supported for now") unless transformers itself knows the class (its
Transformers backend). The names are data (``bringup/data/vllm_architectures.json``,
written by ``scripts/vllm_architectures.py`` from each version's code); a close known name
is suggested for a typo (difflib).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bringup.core.checkpoint import Problem


@dataclass(frozen=True, slots=True)
class Registry:
    """What one vLLM version's registry knows."""

    version: str
    architectures: frozenset[str]
    previously_supported: Mapping[str, str]
    out_of_tree: Mapping[str, str]
    convert_suffixes: tuple[str, ...]

    def knows(self, arch: str) -> bool:
        """Listed, or convertible from a listed base (vLLM's ``_normalize_arch``)."""
        if arch in self.architectures:
            return True
        for suffix in self.convert_suffixes:
            if arch.endswith(suffix):
                return any(
                    arch.replace(suffix, other) in self.architectures
                    for other in self.convert_suffixes
                )
        return False


def registries(data: Mapping[str, Any]) -> list[Registry]:
    """The registries in ``vllm_architectures.json``, oldest version first."""
    out = []
    for version, entry in data.get("versions", {}).items():
        out.append(
            Registry(
                version,
                frozenset(entry.get("architectures", ())),
                dict(entry.get("previously_supported", {})),
                dict(entry.get("out_of_tree", {})),
                tuple(entry.get("convert_suffixes", ())),
            )
        )
    return sorted(out, key=lambda r: tuple(int(n) for n in re.findall(r"\d+", r.version)[:3]))


def check_architecture(config: Mapping[str, Any] | None, known: list[Registry]) -> list[Problem]:
    """A problem when no version of vLLM bringup knows would load ``architectures``."""
    archs = config.get("architectures") if config else None
    if not known or not isinstance(archs, list) or not archs or "auto_map" in (config or {}):
        return []  # auto_map: custom code, which vLLM may load through its Transformers backend
    newest = known[-1]
    names = [a for a in archs if isinstance(a, str)]
    if not names or any(newest.knows(a) for a in names):  # no names: config_invalid says so
        return []
    older = [r.version for r in known if any(r.knows(a) for a in names)]
    arch = names[0]
    span = f"{known[0].version}-{newest.version}" if len(known) > 1 else newest.version
    if older:
        return [_problem(arch, f"vLLM {newest.version} does not list it (vLLM {older[-1]} did)",
                         f"serve it with vLLM {older[-1]}, or fix \"architectures\" in config.json")]  # fmt: skip
    if arch in newest.previously_supported:
        until = newest.previously_supported[arch]
        return [_problem(arch, f"vLLM supported it until v{until} only",
                         f"serve it with vLLM {until} (pip install vllm=={until})")]  # fmt: skip
    if arch in newest.out_of_tree:
        return [_problem(arch, "vLLM serves it only through a plugin",
                         f"install the plugin: {newest.out_of_tree[arch]}")]  # fmt: skip
    close = difflib.get_close_matches(arch, sorted(newest.architectures), n=1, cutoff=0.8)
    if close:
        return [_problem(arch, f"vLLM's model registry ({span}) does not list it; did you mean "
                         f"{close[0]!r}?", f'set "architectures": ["{close[0]}"] in config.json')]  # fmt: skip
    return [
        _problem(
            arch,
            f"vLLM's model registry ({span}) does not list it",
            "check the name against the model card; vLLM then tries its Transformers backend, "
            "which needs transformers to know the class (or an auto_map with --trust-remote-code)",
        )
    ]


def _problem(arch: str, why: str, fix: str) -> Problem:
    return Problem(
        "architecture_unknown",
        "config.json",
        f"config.json names the architecture {arch!r}: {why}",
        fix,
    )
