"""The CUDA-graph pool follows the compilation flags after `--` (issue 25): explicit capture
sizes, ``max_cudagraph_capture_size``, ``cudagraph_mode``, ``-O`` levels per version and
``--enforce-eager`` (``core.vllm_compile.graph_capture``, ``core.plan.peaks``)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from bringup.cli.main import Context, main
from bringup.core import vllm_compile
from bringup.core.plan import parse_architecture, peaks
from plan.helpers import bundled_config


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["plan", *argv], Context(stdout=out, stderr=err, environ={"NO_COLOR": "1"}))
    return code, out.getvalue(), err.getvalue()


def _gpu(*serve_flags: str, version: str | None = None) -> dict[str, Any]:
    own = ["--engine-version", version] if version else []
    code, out, err = _run(
        "--gpu", "H100", *own, "--json", "--", "vllm", "serve", "Llama-3.1-8B", *serve_flags
    )
    assert code in (0, 1), err
    per_gpu: dict[str, Any] = json.loads(out)["per_gpu"]
    return per_gpu


def _capture(flags: list[str], version: tuple[int, int] = (0, 32), **kw: Any) -> Any:
    args: dict[str, Any] = {"max_num_seqs": 256, "max_num_batched_tokens": 8192}
    args.update(kw)
    return vllm_compile.graph_capture(vllm_compile.parse(flags), version, **args)


def test_an_explicit_small_capture_list_gives_a_smaller_pool() -> None:
    default = _gpu()
    small = _gpu("-cc", '{"cudagraph_capture_sizes": [8, 1, 2, 4, 2]}')
    assert small["cuda_graph_capture_sizes"] == [1, 2, 4, 8]  # de-duplicated, sorted
    assert len(default["cuda_graph_capture_sizes"]) > 4
    assert 0 < small["cuda_graph_bytes"] < default["cuda_graph_bytes"]
    # from 0.21 the pool is in the KV budget: the room it leaves goes to the KV cache
    assert small["kv_cache_bytes"] > default["kv_cache_bytes"]
    top = _gpu("--max-cudagraph-capture-size", "64")
    assert top["cuda_graph_capture_sizes"][-1] == 64
    assert small["cuda_graph_bytes"] < top["cuda_graph_bytes"] < default["cuda_graph_bytes"]


@pytest.mark.parametrize(
    ("flags", "version"),
    [
        (["-cc", '{"cudagraph_mode": "NONE"}'], None),
        (["-cc.cudagraph_mode=NONE"], None),
        (["-O0"], None),  # the optimization level (0.12 on)
        (["--compilation-config", '{"mode": 0}'], "0.20"),
        (["--enforce-eager"], None),
        (["-O0"], "0.11"),  # the compilation level (up to 0.11)
        (["-O1"], "0.11"),  # torch.compile's own backend: no capture
    ],
)
def test_no_capture_is_no_pool(flags: list[str], version: str | None) -> None:
    g = _gpu(*flags, version=version)
    assert g["cuda_graph_bytes"] == 0
    assert (g["cuda_graph_mode"], g["cuda_graph_capture_sizes"]) == ("NONE", [])


def test_full_graphs_need_no_compile() -> None:
    """A compilation mode other than 3 drops only the piecewise graphs (0.12 on; 0.32 keeps
    FULL_AND_PIECEWISE's decode half, ``CUDAGraphMode.without_piecewise``): FULL graphs with
    mode 0 are still a pool, and the default mode becomes FULL_DECODE_ONLY in 0.32."""
    full = _gpu("-cc", '{"mode": 0, "cudagraph_mode": "FULL"}', version="0.20")
    assert full["cuda_graph_mode"] == "FULL"
    assert full["cuda_graph_bytes"] > 0
    new = _gpu("-cc", '{"mode": 0}', version="0.32")
    assert new["cuda_graph_mode"] == "FULL_DECODE_ONLY"
    assert new["cuda_graph_bytes"] > 0
    assert (
        _gpu("-cc", '{"mode": 0, "cudagraph_mode": "PIECEWISE"}', version="0.32")[
            "cuda_graph_bytes"
        ]
        == 0
    )


def test_o1_is_piecewise_from_0_12_with_the_default_sizes() -> None:
    default, o1 = _gpu(), _gpu("-O1")
    assert o1["cuda_graph_mode"] == "PIECEWISE"
    assert o1["cuda_graph_capture_sizes"] == default["cuda_graph_capture_sizes"]


def test_sizes_beyond_max_num_seqs_are_kept_and_cut_at_the_batched_tokens() -> None:
    """vLLM cuts an explicit list at max_num_batched_tokens, not at max_num_seqs
    (``_set_cudagraph_sizes``); FULL_DECODE_ONLY captures only the decode sizes, up to
    max_num_seqs (``CudagraphDispatcher.initialize_cudagraph_keys``)."""
    sizes = "[1, 2, 4, 8, 16, 32, 4096]"
    base = ["--max-num-seqs", "8", "--max-num-batched-tokens", "2048"]
    mixed = _gpu(*base, "-cc", f'{{"cudagraph_capture_sizes": {sizes}}}')
    assert mixed["cuda_graph_capture_sizes"] == [1, 2, 4, 8, 16, 32]
    decode = _gpu(
        *base,
        "-cc",
        f'{{"cudagraph_capture_sizes": {sizes}, "cudagraph_mode": "FULL_DECODE_ONLY"}}',
    )
    assert decode["cuda_graph_mode"] == "FULL_DECODE_ONLY"
    assert decode["cuda_graph_capture_sizes"] == [1, 2, 4, 8]
    assert decode["cuda_graph_bytes"] < mixed["cuda_graph_bytes"]
    listed = _gpu(*base, "--cudagraph-capture-sizes", "1", "2", "4", "8", "16", "32", "4096")
    assert listed["cuda_graph_capture_sizes"] == mixed["cuda_graph_capture_sizes"]


def test_a_malformed_compilation_config_is_one_warning_line() -> None:
    code, out, err = _run(
        "--gpu", "H100", "--", "vllm", "serve", "Llama-3.1-8B", "-cc", '{"cudagraph_mode": NONE'
    )
    assert code == 0, err
    assert "Traceback" not in out + err
    lines = [line for line in err.splitlines() if "--compilation-config" in line]
    assert len(lines) == 1
    assert "not JSON" in lines[0]
    assert "not planned" not in lines[0]


def test_the_mode_per_version() -> None:
    """cudagraph_mode exists from 0.10 (PIECEWISE by default), FULL_AND_PIECEWISE from 0.11;
    before 0.10 the V1 engine captured PIECEWISE graphs whatever the config said."""
    assert _capture([], (0, 9)).mode == "PIECEWISE"
    assert _capture(["-cc", '{"cudagraph_mode": "NONE"}'], (0, 9)).mode == "PIECEWISE"
    assert _capture([], (0, 10)).mode == "PIECEWISE"
    assert _capture([], (0, 11)).mode == "FULL_AND_PIECEWISE"
    assert _capture(["-cc", '{"cudagraph_mode": [2, 0]}'], (0, 11)).mode == "FULL_DECODE_ONLY"
    assert _capture(["-O2"], (0, 11)).mode == "NONE"  # compilation level 2
    assert _capture(["-O2"], (0, 12)).mode == "FULL_AND_PIECEWISE"  # optimization level 2
    v0 = _capture(["-cc", '{"cudagraph_mode": "NONE"}'], (0, 6), v0_engine=True)
    assert v0.mode != "NONE"
    assert not v0.from_flags


def test_a_given_top_is_not_held_to_the_defaults_512() -> None:
    top = _capture(["--max-cudagraph-capture-size", "1024"], max_num_batched_tokens=16384)
    assert top.sizes[-1] == 1024
    assert len(top.sizes) == 83
    cut = _capture(["--max-cudagraph-capture-size", "1024"], max_num_batched_tokens=300)
    assert cut.sizes[-1] <= 300
    old = _capture(["--cuda-graph-sizes", "100"], (0, 11))  # one value: the ladder's top
    assert old.sizes == (1, 2, 4, *range(8, 97, 8))


def test_the_pool_grows_with_the_largest_size_and_the_count() -> None:
    arch = parse_architecture(bundled_config("Llama-3.1-8B"))

    def pool(flags: list[str]) -> int:
        return peaks.cuda_graph_bytes(
            arch, 32, 256, enforce_eager=False, max_num_batched_tokens=8192,
            capture=_capture(flags),
        )  # fmt: skip

    assert pool(["-cc", '{"cudagraph_capture_sizes": [1, 2]}']) < pool(
        ["-cc", '{"cudagraph_capture_sizes": [256, 512]}']
    )
    assert pool(["-cc", '{"cudagraph_capture_sizes": [1, 2]}']) < pool(
        ["-cc", '{"cudagraph_capture_sizes": [1, 2, 3]}']
    )
    # without flags the pool is the one the model always gave (the corpus scores stay put)
    assert pool([]) == peaks.cuda_graph_bytes(
        arch, 32, 256, enforce_eager=False, max_num_batched_tokens=8192
    )
