"""Human output of ``bringup plan MODEL.gguf``: llama.cpp's buffers, the verdict, the flags
to append and the decode speed, one line each."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from bringup.core.words import count
from bringup.render.console import fit
from bringup.units import format_bytes


def print_gguf_plan(result: dict[str, Any], made: Console) -> None:
    """The GGUF plan (the ``plan --json`` object) for people."""

    class _Fitted:  # each line wrapped with a hanging indent on a terminal
        def print(self, text: str, *, markup: bool = True) -> None:
            line = Text.from_markup(text) if markup else Text(text)
            made.print(fit(made, line), crop=False, overflow="ignore")

    console = _Fitted()
    m, s, v = result["memory"], result["settings"], result["verdict"]
    console.print(
        f"{result['model']['architecture']}: {result['model']['parameters']:,} parameters, "
        f"{format_bytes(m['weights_bytes'])} of weights; llama.cpp, n_ctx {s['n_ctx_padded']}, "
        f"{count(s['n_parallel'], 'slot')}, KV {s['cache_type_k']}/{s['cache_type_v']}"
    )
    for label, key in (
        ("weights", "weights_bytes"),
        ("KV cache", "kv_cache_bytes"),
        ("compute buffer", "compute_buffer_bytes"),
        ("output buffer", "output_buffer_bytes"),
        ("needed", "needed_bytes"),
        (f"available ({m['where']})", "total_bytes"),
    ):
        console.print(f"  {label:<22} {format_bytes(m[key]):>12}")
    console.print(
        "verdict: FITS"
        if v["fits"]
        else f"verdict: DOES NOT FIT - {v['failure_class']} at {v['phase']}: {v['reason']}"
    )
    for r in result["recommendations"]:
        console.print(f"  append {r['flag']} {r['value']}   # {r['why']}")
    speed = result["decode"]
    if speed is None:
        console.print("decode: no memory bandwidth known for this GPU (give --memory-bandwidth)")
    else:
        console.print(speed.ceiling_line(), markup=False)
        console.print(speed.expected_line(), markup=False)
