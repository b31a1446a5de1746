"""`bringup plan MODEL.gguf`: llama.cpp's buffers through the plan command."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from bringup.cli.main import Context, main

from builders.gguf import write_tiny_llama_gguf


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    write_tiny_llama_gguf(path)
    return path


def plan(*argv: str) -> tuple[int, dict]:
    out = io.StringIO()
    own, rest = (argv[: argv.index("--")], argv[argv.index("--") :]) if "--" in argv else (argv, ())
    code = main(
        ["plan", *own, "--json", *rest], Context(stdout=out, stderr=io.StringIO(), environ={})
    )
    return code, json.loads(out.getvalue())


def test_tiny_model_fits_with_the_buffers_llama_cpp_reports(tiny: Path) -> None:
    """A tiny GGUF fits in 1 GiB: weights, KV and compute buffers add up to the needed bytes."""
    code, data = plan(str(tiny), "--gpu-memory", "1GiB", "--n-ctx", "512")
    m = data["memory"]
    assert code == 0
    assert data["verdict"]["fits"] is True
    assert data["settings"]["n_ctx"] == 512
    assert (
        m["needed_bytes"]
        == m["weights_bytes"]
        + m["kv_cache_bytes"]
        + m["compute_buffer_bytes"]
        + m["output_buffer_bytes"]
    )
    assert (
        m["kv_cache_bytes"] == 512 * 2 * 2 * (2 * 16) * 2
    )  # ctx x layers x (K+V) x (2 heads x 16) x f16


def test_huge_context_does_not_fit_and_the_recommended_context_does(tiny: Path) -> None:
    """n_ctx 100M from the llama.cpp command is kv_cache_insufficient; the recommended -c fits."""
    code, data = plan(
        str(tiny), "--gpu-memory", "1GiB", "--", "llama-server", "-m", str(tiny), "-c", "100000000"
    )
    assert code == 1
    verdict = data["verdict"]
    assert (verdict["failure_class"], verdict["phase"]) == (
        "kv_cache_insufficient",
        "kv_cache_alloc",
    )
    ctx = next(r["value"] for r in data["recommendations"] if r["flag"] == "-c")
    code2, again = plan(str(tiny), "--gpu-memory", "1GiB", "--n-ctx", ctx)
    assert code2 == 0
    assert again["verdict"]["fits"] is True


@pytest.mark.parametrize(
    ("layout", "named"),
    [
        (["-tp", "2"], "-tp 2"),
        (["-pp", "2"], "-pp 2"),
        (["--enable-expert-parallel"], "--enable-expert-parallel"),
        (["-dcp", "2"], "-dcp 2"),
        (["-q", "fp8"], "-q fp8"),
    ],
)
def test_vllm_layout_flags_are_refused_for_gguf(tiny: Path, layout: list[str], named: str) -> None:
    """-tp, -pp, --enable-expert-parallel, -dcp and -q are vLLM's: a GGUF plan with any of
    them is one line naming it, exit 2."""
    err = io.StringIO()
    code = main(
        ["plan", str(tiny), "--gpu", "L4", *layout],
        Context(stdout=io.StringIO(), stderr=err, environ={}),
    )
    assert code == 2
    assert named in err.getvalue()
    assert "tensor-split" in err.getvalue()
    assert err.getvalue().count("\n") == 1


@pytest.mark.parametrize(
    ("words", "named"),
    [
        (["-c", "lots"], "--n-ctx: 'lots' is not a whole number (give e.g. --n-ctx 4096)"),
        (["-np", "four"], "-np: 'four' is not a whole number (give e.g. -np 4)"),
    ],
)
def test_a_llamacpp_number_that_is_not_one_is_one_line(
    tiny: Path, words: list[str], named: str
) -> None:
    """-c or -np after -- that is not a whole number: one line naming it, exit 2 (it was an
    internal error)."""
    err = io.StringIO()
    argv = ["plan", str(tiny), "--gpu-memory", "1GiB", "--", "llama-server", "-m", "x", *words]
    code = main(argv, Context(stdout=io.StringIO(), stderr=err, environ={}))
    assert code == 2
    assert named in err.getvalue()
    assert err.getvalue().count("\n") == 1


@pytest.mark.parametrize(
    ("environ", "extra", "spins"),
    [
        ({"FORCE_COLOR": "1"}, (), True),  # a terminal
        ({}, (), False),  # a pipe
        ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, (), False),
        ({"FORCE_COLOR": "1"}, ("--json",), False),
    ],
)
def test_measuring_bandwidth_shows_a_spinner_only_on_a_terminal(
    tiny: Path,
    monkeypatch: pytest.MonkeyPatch,
    environ: dict[str, str],
    extra: tuple[str, ...],
    spins: bool,
) -> None:
    """Without --memory-bandwidth a CPU plan measures this machine's bandwidth (seconds): a
    spinner says so on stderr on a terminal, and nothing does under NO_COLOR, --json or a
    pipe; stdout is the plan either way."""
    from bringup.adapters import membw

    measured: list[int] = []

    def fake(threads: int) -> float:
        measured.append(threads)
        return 2e10

    monkeypatch.setattr(membw, "cached_read_bandwidth", fake)
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["plan", str(tiny), "--n-ctx", "512", *extra, "--", "llama-server", "-t", "1"],
        Context(stdout=out, stderr=err, environ=environ),
    )
    assert code == 0
    assert measured == [1]
    assert ("measuring memory bandwidth (1 thread;" in err.getvalue()) is spins
    if "--json" in extra:
        assert json.loads(out.getvalue())["decode"]["ceiling_tokens_per_s"] > 0
    else:
        assert "(measured, 1 thread)" in out.getvalue()  # not "1 threads"


def test_gguf_plan_lines_hang_on_an_80_column_terminal(tiny: Path) -> None:
    """The GGUF plan's long lines (the model line, decode) wrap with a hanging indent on an
    80-column colour terminal, as plan's and verify's do."""
    import re

    out = io.StringIO()
    argv = ["plan", str(tiny), "--n-ctx", "512", "--memory-bandwidth", "20GB/s"]
    environ = {"FORCE_COLOR": "1", "COLUMNS": "80"}
    assert main(argv, Context(stdout=out, stderr=io.StringIO(), environ=environ)) == 0
    rows = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue()).splitlines()
    assert max(len(r) for r in rows) <= 80
    ceiling = rows.index(next(r for r in rows if r.startswith("decode ceiling:")))
    assert re.match(r"    \S", rows[ceiling + 1])
