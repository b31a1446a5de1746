"""A setup that does not fit ends with the smallest changes that make it fit, each planned:
re-planning the setup with the change applied fits."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from bringup.cli.main import Context, main


def _run(*argv: str) -> tuple[int, dict[str, Any]]:
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["plan", *argv, "--json"], Context(stdout=out, stderr=err, environ={"NO_COLOR": "1"})
    )
    assert out.getvalue(), err.getvalue()
    data: dict[str, Any] = json.loads(out.getvalue())
    return code, data


def _applied(model: str, gpu: str, given: list[str], change: dict[str, Any]) -> list[str]:
    """The setup's argv with the change applied (its flags replace the given ones)."""
    flags = list(change["flags"])
    names = set(flags[::2])
    kept: list[str] = []
    i = 0
    while i < len(given):
        if given[i] in names or (given[i] == "-tp" and "--tensor-parallel-size" in names):
            i += 2
            continue
        kept.append(given[i])
        i += 1
    return [change["model"] or model, "--gpu", gpu, *kept, *flags]


CASES = [
    (
        "Mixtral-8x7B",
        "A100 40GB",
        ["-tp", "2"],
        {"-tp 4 on 4 GPUs", "--quantization fp8", "--cpu-offload-gb"},
    ),
    (
        "Qwen3-30B-A3B",
        "RTX 4090",
        [],
        {"-tp 4 on 4 GPUs", "Qwen/Qwen3-30B-A3B-FP8", "--cpu-offload-gb"},
    ),
    ("Llama-3.1-8B", "H100", ["-tp", "3"], {"--tensor-parallel-size 1"}),
    ("Llama-3.1-8B", "RTX 4090", [], {"--max-model-len", "-tp 2"}),
]


@pytest.mark.parametrize(("model", "gpu", "given", "expected"), CASES)
def test_the_changes_are_named_and_each_fits(
    model: str, gpu: str, given: list[str], expected: set[str]
) -> None:
    """Mixtral on 2 x A100 40GB, Qwen3-30B-A3B on one RTX 4090, TP 3, a context too long:
    the plan names the changes (more GPUs, FP8 weights, a quantized checkpoint, offload, a
    shorter context), and each one, applied, plans as fitting."""
    code, data = _run(model, "--gpu", gpu, *given)
    assert code == 1
    changes = data["what_fits"] + [
        {"change": f"{r['flag']} {r['value']}", "flags": [r["flag"], r["value"]], "model": None}
        for r in data["recommendations"]
    ]
    text = " | ".join(c["change"] for c in changes)
    for needle in expected:
        assert needle in text, text
    for change in data["what_fits"]:
        argv = _applied(model, gpu, given, change)
        if change["gpus"] > 1:
            argv += ["--gpus", str(change["gpus"])]
        fits, again = _run(*argv)
        assert fits == 0, (change, again["verdict"])
        assert again["kv_cache"]["tokens"] == change["kv_tokens"]


def test_a_setup_that_fits_has_no_changes() -> None:
    """Nothing to change when it fits."""
    code, data = _run("Llama-3.1-8B", "--gpu", "H100", "--max-model-len", "8192")
    assert code == 0
    assert data["what_fits"] == []
