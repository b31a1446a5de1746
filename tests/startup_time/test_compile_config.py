"""What a vLLM command's compilation config does to the startup: the Inductor compiles
(compile sizes, compile ranges), the capture (-O levels, cudagraph_mode, explicit sizes) and
which Inductor adaptor compiles, per version."""

from __future__ import annotations

import pytest

from bringup.core import vllm_compile as cc

NEW, OLD = (0, 32), (0, 11)


def _plan(flags: list[str], version: tuple[int, int] = NEW, **kw: object) -> cc.CompilePlan:
    args: dict[str, object] = {"max_num_batched_tokens": 8192, "default_capture_sizes": 51}
    args.update(kw)
    return cc.resolve(cc.parse(flags), version, **args)  # type: ignore[arg-type]


def test_defaults_compile_once_and_capture_vllms_sizes() -> None:
    p = _plan([])
    assert (p.compiles, p.piecewise, p.captures) == (True, True, True)
    assert p.inductor_compiles == 1
    assert p.capture_sizes is None
    assert p.note == ""


@pytest.mark.parametrize(
    "flags",
    [
        ["--compilation-config", '{"compile_sizes": [1, 2, 4]}'],
        ["-cc", '{"compile_sizes": [1, 2, 4, 4]}'],  # a repeated size counts once
        ["-cc.compile_sizes=[1,2,4]"],
        ["--compilation-config.compile_sizes=[4,2,1]"],
    ],
)
def test_each_compile_size_is_one_more_inductor_compile(flags: list[str]) -> None:
    p = _plan(flags)
    assert p.inductor_compiles == 4
    assert "4 Inductor compiles of every piece" in p.note


def test_capture_sizes_in_compile_sizes_stand_for_every_captured_size() -> None:
    flags = ["-cc", '{"compile_sizes": ["cudagraph_capture_sizes"]}']
    assert _plan(flags, default_capture_sizes=35).inductor_compiles == 36
    explicit = [*flags, "--cudagraph-capture-sizes", "1", "2", "4"]
    assert _plan(explicit).inductor_compiles == 4


def test_compile_ranges_from_0_13_split_below_max_num_batched_tokens() -> None:
    flags = ["-cc", '{"compile_ranges_split_points": [512, 2048, 8192, 20000]}']
    # ranges [1, 512], [513, 2048], [2049, 8192]: points at or past the end add none
    assert _plan(flags).inductor_compiles == 3
    assert _plan(flags, max_num_batched_tokens=1024).inductor_compiles == 2
    assert _plan(flags, version=(0, 12)).inductor_compiles == 1  # no ranges before 0.13
    renamed = ["-cc", '{"compile_ranges_endpoints": [2048]}']  # 0.32's name
    assert _plan(renamed).inductor_compiles == 2


@pytest.mark.parametrize(
    ("flags", "version", "compiles", "piecewise", "captures"),
    [
        (["-O0"], NEW, False, False, False),
        (["-O", "0"], OLD, False, False, False),
        (["--optimization-level", "0"], NEW, False, False, False),
        (["-O1"], NEW, True, True, True),  # 0.12 on: PIECEWISE graphs
        (["-O1"], OLD, True, False, False),  # up to 0.11: level 1, torch.compile's own
        (["-O2"], OLD, True, False, False),
        (["-O3"], OLD, True, True, True),
        (["-O=2"], NEW, True, True, True),
        # 0.32: a mode other than 3 keeps FULL_AND_PIECEWISE's decode graphs (without_piecewise)
        (["-cc", '{"mode": 2}'], NEW, True, False, True),
        (["-cc", '{"mode": 2}'], (0, 20), True, False, False),  # 0.12-0.31: to NONE
        (["-cc", '{"mode": 0, "cudagraph_mode": "FULL"}'], (0, 20), False, False, True),
        (["-O", '{"level": 1}'], OLD, True, False, False),
        (["-cc", '{"mode": "VLLM_COMPILE"}'], NEW, True, True, True),
        (["-cc", '{"cudagraph_mode": "NONE"}'], NEW, True, True, False),
        (["-cc.cudagraph_mode=PIECEWISE"], NEW, True, True, True),
    ],
)
def test_levels_and_modes(
    flags: list[str], version: tuple[int, int], compiles: bool, piecewise: bool, captures: bool
) -> None:
    p = _plan(flags, version)
    assert (p.compiles, p.piecewise, p.captures) == (compiles, piecewise, captures)
    if not captures:
        assert p.capture_sizes == 0


def test_o1_from_0_12_says_piecewise_graphs_only() -> None:
    assert "PIECEWISE graphs only" in _plan(["-O1"]).capture_note
    assert "torch.compile's own backend" in _plan(["-O1"], OLD).note


@pytest.mark.parametrize(
    ("flags", "sizes"),
    [
        (["--cudagraph-capture-sizes", "1", "2", "4", "8"], 4),
        (["--cudagraph-capture-sizes", "1", "2", "2", "--enforce-eager"], 2),
        (["-cc", '{"cudagraph_capture_sizes": [1, 2, 4, 16384]}'], 3),  # cut at batched tokens
        (["--max-cudagraph-capture-size", "64"], 11),  # 1, 2, 4, 8..64
        (["-cc", '{"max_cudagraph_capture_size": 16}'], 5),
    ],
)
def test_capture_sizes_from_the_flags(flags: list[str], sizes: int) -> None:
    assert _plan(flags).capture_sizes == sizes


def test_cuda_graph_sizes_of_0_10_one_value_is_the_ladder_top() -> None:
    assert _plan(["--cuda-graph-sizes", "16"], (0, 10)).capture_sizes == 5  # 1, 2, 4, 8, 16
    assert _plan(["--cuda-graph-sizes", "1", "8"], (0, 10)).capture_sizes == 2


@pytest.mark.parametrize(
    ("version", "environ", "adaptor"),
    [
        ("0.9.2", {}, "legacy"),  # torch 2.7: no standalone_compile
        ("0.10.1.1", {}, "legacy"),
        ("0.10.2", {}, "standalone"),
        ("0.10", {}, None),  # 0.10.0/0.10.1 and 0.10.2 differ
        ("0.11.0", {}, "legacy"),  # VLLM_USE_STANDALONE_COMPILE defaults to "0" in 0.11.0
        ("0.11", {}, None),
        ("0.11.0", {"VLLM_USE_STANDALONE_COMPILE": "1"}, "standalone"),
        ("0.11.1rc3.dev29", {}, "standalone"),
        ("0.33", {}, "standalone"),
        ("0.33", {"VLLM_USE_STANDALONE_COMPILE": "0"}, "legacy"),
        ("0.10.1", {"VLLM_USE_STANDALONE_COMPILE": "1"}, "legacy"),  # torch too old
        (None, {}, None),
    ],
)
def test_inductor_adaptor_by_version_and_environment(
    version: str | None, environ: dict[str, str], adaptor: str | None
) -> None:
    assert cc.inductor_adaptor(cc.version_parts(version), environ) == adaptor


def test_version_parts() -> None:
    assert cc.version_parts("v0.14.0rc1.dev2+g7d9f6663a") == (0, 14, 0)
    assert cc.version_parts("0.11") == (0, 11)
    assert cc.version_parts("0.8.5.post1") == (0, 8, 5)
    assert cc.version_parts("latest") is None


def test_full_decode_only_captures_the_decode_sizes_the_plan_pools() -> None:
    """FULL_DECODE_ONLY captures only the uniform-decode sizes up to max_num_seqs
    (``CudagraphDispatcher.initialize_cudagraph_keys``, 0.32.0): the startup counts the sizes
    the plan's graph pool has (``graph_capture``), not every size of the list."""
    flags = ["-cc", '{"cudagraph_mode": "FULL_DECODE_ONLY"}']
    p = _plan(flags, max_num_seqs=16)
    pool = cc.graph_capture(cc.parse(flags), NEW, max_num_seqs=16, max_num_batched_tokens=8192)
    assert p.capture_sizes == len(pool.sizes) == 5  # 1, 2, 4, 8, 16
    assert "FULL_DECODE_ONLY" in p.capture_note
    explicit = [*flags, "--cudagraph-capture-sizes", "1", "8", "64", "128"]
    assert _plan(explicit, max_num_seqs=64).capture_sizes == 3
    # compile sizes' "cudagraph_capture_sizes" is the whole list, not its decode part
    both = [
        "-cc",
        '{"cudagraph_mode": "FULL_DECODE_ONLY", "compile_sizes": ["cudagraph_capture_sizes"]}',
    ]
    assert (
        _plan(
            [*both, "--cudagraph-capture-sizes", "1", "8", "64"], max_num_seqs=4
        ).inductor_compiles
        == 4
    )
    # 0.32: mode 2 keeps FULL_AND_PIECEWISE's decode graphs only (without_piecewise)
    assert _plan(["-cc", '{"mode": 2}'], max_num_seqs=16).capture_sizes == 5
    assert _plan([], max_num_seqs=16).capture_sizes is None  # the default list: the caller's
