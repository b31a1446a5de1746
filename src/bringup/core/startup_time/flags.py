"""What a vLLM command line says about its startup's time: the loader, and whether
torch.compile runs.

- ``--load-format`` (``auto``/``safetensors`` read through mmap, one reader per rank;
  ``fastsafetensors``, ``runai_streamer``: several readers, each rank its share);
- torch.compile is off with ``--enforce-eager``, with optimization level 0 (``-O0``,
  ``-O 0``, ``--optimization-level 0``) and with a compilation config whose ``level`` or
  ``mode`` is 0 (``--compilation-config '{"level": 0}'``, ``-O '{"mode": 0}'``,
  ``-cc.mode=0``), as vLLM's ``CompilationConfig`` reads them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from bringup.core import engine_args


def load_format(flags: Sequence[str]) -> str:
    """``--load-format``'s value (``auto`` when absent)."""
    return (engine_args.get_flag(flags, "--load-format") or "auto").strip().lower()


def compile_off(flags: Sequence[str], enforce_eager: bool = False) -> str | None:
    """Why torch.compile does not run (the flag that turns it off), or None when it runs."""
    if enforce_eager or engine_args.has_flag(flags, "--enforce-eager"):
        return "--enforce-eager"
    for word in flags:
        if word in ("-O0", "-O=0", "--optimization-level=0"):
            return word
        if word.startswith(("-cc.mode=", "-cc.level=", "-O.mode=", "-O.level=")) and word.endswith(
            "=0"
        ):
            return word
    level = engine_args.get_flag(flags, "-O", "--optimization-level")
    if level is not None and level.strip() == "0":
        return f"-O {level}"
    config = engine_args.get_flag(flags, "--compilation-config", "-cc")
    for text in (config, level):
        if text and _level_zero(text):
            return f"--compilation-config {text}"
    return None


def _level_zero(text: str) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    if isinstance(value, dict):
        return any(value.get(k) in (0, "0", "NONE", "none") for k in ("level", "mode"))
    return bool(value == 0)
