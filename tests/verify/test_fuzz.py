"""Whatever the bytes, the header readers return findings and never raise."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bringup.adapters.gguf_file import read_part
from bringup.core import safetensors
from bringup.core.checkpoint import PROBLEM_KINDS

from builders.gguf import write_tiny_llama_gguf

FAST = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _read(data: bytes) -> list[str]:
    """Run the pure reader over a whole file's bytes, as the adapter does; return the kinds found."""
    head = safetensors.read_prefix(data[: safetensors.PREFIX_BYTES], len(data), "f.safetensors")
    if head.header_bytes is None:
        assert head.problem is not None
        return [head.problem.kind]
    header = data[8 : 8 + head.header_bytes]
    tensors, problems = safetensors.parse_header(header, "f.safetensors", len(data))
    assert all(t.nbytes >= 0 for t in tensors)
    return [p.kind for p in problems]


@FAST
@given(st.binary(max_size=300))
def test_random_bytes_never_raise(data: bytes) -> None:
    """Random bytes give known problem kinds (or none), never an exception."""
    assert set(_read(data)) <= set(PROBLEM_KINDS)


@FAST
@given(st.integers(min_value=0, max_value=2**64 - 1), st.binary(max_size=64))
def test_any_length_field_is_bounded_before_reading(length: int, rest: bytes) -> None:
    """Any 8-byte length is checked against the limit and the file size before any allocation."""
    data = struct.pack("<Q", length) + rest
    head = safetensors.read_prefix(data, len(data), "f")
    if length > safetensors.MAX_HEADER_BYTES:
        assert head.problem is not None
        assert head.problem.kind == "header_too_large"
    elif 8 + length > len(data):
        assert head.problem is not None
        assert head.problem.kind == "truncated"
    else:
        assert head.header_bytes == length


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 2**70) | st.text(max_size=5),
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4)
    ),
    max_leaves=12,
)
_entry = st.fixed_dictionaries(
    {
        "dtype": st.sampled_from(["F32", "BF16", "F8_E4M3", "I32", "F4", "XX"]) | _json,
        "shape": st.lists(st.integers(0, 6), max_size=3) | _json,
        "data_offsets": st.lists(st.integers(0, 80), min_size=2, max_size=2) | _json,
    }
)


@FAST
@given(st.dictionaries(st.text(max_size=8), _entry | _json, max_size=5), st.integers(0, 100))
def test_structured_headers_never_raise(header: dict[str, object], data_bytes: int) -> None:
    """Headers of plausible shape with wrong types, offsets and dtypes give findings, never exceptions."""
    raw = json.dumps(header).encode()
    data = struct.pack("<Q", len(raw)) + raw + b"\0" * data_bytes
    kinds = _read(data)
    assert set(kinds) <= set(PROBLEM_KINDS)


@FAST
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["F32", "BF16", "U8", "F4"]), st.lists(st.integers(0, 5), max_size=3)
        ),
        max_size=6,
    )
)
def test_well_formed_headers_have_no_problems(specs: list[tuple[str, list[int]]]) -> None:
    """Tensors laid out back to back with the right sizes are accepted with no problem."""
    header, offset = {}, 0
    for i, (dtype, shape) in enumerate(specs):
        n = 1
        for d in shape:
            n *= d
        size = (n * safetensors.DTYPE_BITS[dtype] + 7) // 8
        if size * 8 != n * safetensors.DTYPE_BITS[dtype]:
            shape, size = [0], 0  # F4 with an odd count cannot be stored; use an empty tensor
        header[f"t{i}"] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    assert _read(struct.pack("<Q", len(raw)) + raw + b"\0" * offset) == []


GGUF_KINDS = ("gguf_invalid", "bad_magic", "truncated", "dtype_unknown", "offsets_invalid")


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(st.integers(0, 20_000), st.integers(0, 255)), min_size=1, max_size=8))
def test_corrupted_gguf_is_a_finding_not_a_crash(
    tmp_path: Path, edits: list[tuple[int, int]]
) -> None:
    """A tiny GGUF with bytes overwritten in its header region reads as OK or a GGUF finding, never raises."""
    path = tmp_path / "fuzz.gguf"
    if not path.exists():
        write_tiny_llama_gguf(path)
        (tmp_path / "orig").write_bytes(path.read_bytes())
    data = bytearray((tmp_path / "orig").read_bytes())
    for pos, value in edits:
        data[pos] = value
    path.write_bytes(bytes(data))
    part = read_part(path)
    assert part.problem is None or part.problem.kind in GGUF_KINDS
