"""Hostile inputs for every file reader, as hypothesis strategies, and the readers they feed.

Shared by the fuzz tests in ``make test`` (a few hundred examples each) and ``bench/fuzz.py``
(100,000 and more per reader). Each strategy builds what a reader is pointed at, from
nearly right (a real format with one field wrong) to plain garbage:

- ``safetensors_files``: an 8-byte length (honest, off by some, or absurd: 10**15) and a JSON
  header of tensors with wrong dtypes, shapes and offsets, or bytes that are not JSON;
- ``checkpoint_folders``: shards, an index naming shards that are there or not, a config;
- ``gguf_files``: a GGUF header built field by field (magic, version, counts, metadata of
  every value type, tensor table) with any field wrong, then data of any length;
- ``logs``: random bytes, real-format engine lines cut and spliced with wrappers, ANSI, CR,
  NUL holes and garbage between them;
- ``readings``, ``inventories``, ``datasets``, ``manifests``: JSON/TOML/text near the format.

``READERS`` maps each reader's name to (strategy, function); the function takes the example
and a scratch folder and runs the reader as its command does. Allowed outcomes: a result, or
a :class:`~bringup.errors.BringupError` (one line, exit 2). Anything else is a problem.
"""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
DTYPES = ["F32", "F16", "BF16", "I8", "U8", "F8_E4M3", "I64", "F4", "BOOL", "Q4", "", "f32"]

# -- safetensors -------------------------------------------------------------------------

_ints = st.one_of(st.integers(-2, 64), st.integers(-(2**63), 2**64), st.just(10**15))
_tensor = st.fixed_dictionaries(
    {},
    optional={
        "dtype": st.one_of(st.sampled_from(DTYPES), st.integers(), st.none()),
        "shape": st.one_of(st.lists(_ints, max_size=5), st.text(max_size=4), st.none()),
        "data_offsets": st.one_of(st.lists(_ints, max_size=3), st.integers(), st.none()),
    },
)
_json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=12)
)
json_values = st.recursive(
    _json_leaf,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=8), kids, max_size=4)
    ),
    max_leaves=12,
)
_header = st.dictionaries(
    st.one_of(st.text(max_size=16), st.just("__metadata__")),
    st.one_of(_tensor, json_values),
    max_size=6,
)


@st.composite
def safetensors_files(draw: Any) -> bytes:
    """The bytes of one .safetensors file, most of them broken in one place."""
    if draw(st.integers(0, 9)) == 0:
        return bytes(draw(st.binary(max_size=512)))
    header = draw(_header)
    raw = json.dumps(header, allow_nan=True).encode()
    cut = draw(st.integers(0, 3))
    if cut == 0:
        raw = raw[: draw(st.integers(0, len(raw)))]  # a header cut short
    elif cut == 1:
        raw = raw + bytes(draw(st.binary(max_size=16)))  # junk after it
    length = draw(
        st.one_of(
            st.just(len(raw)),
            st.integers(0, len(raw) + 64),
            st.sampled_from([10**15, 2**64 - 1, 100_000_001]),
        )
    )
    data = bytes(draw(st.binary(max_size=256)))
    return struct.pack("<Q", length) + raw + data


@st.composite
def checkpoint_folders(draw: Any) -> dict[str, bytes]:
    """A model folder: file name -> bytes (shards, an index, a config)."""
    n = draw(st.integers(1, 3))
    names = [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)]
    out = {name: draw(safetensors_files()) for name in names if draw(st.integers(0, 5))}
    if draw(st.booleans()):
        mapped = draw(st.lists(st.sampled_from([*names, "gone.safetensors", ""]), max_size=6))
        index: Any = {"weight_map": {f"t{i}": shard for i, shard in enumerate(mapped)}}
        if draw(st.integers(0, 4)) == 0:
            index = draw(json_values)
        out["model.safetensors.index.json"] = json.dumps(index).encode()
    if draw(st.booleans()):
        config = draw(
            st.one_of(
                json_values,
                st.fixed_dictionaries(
                    {"architectures": st.one_of(st.lists(st.text(max_size=12)), json_values)},
                    optional={"quantization_config": json_values, "hidden_size": _ints},
                ),
            )
        )
        out["config.json"] = json.dumps(config).encode()
    return out


# -- GGUF --------------------------------------------------------------------------------

_GGUF_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}


def _gguf_string(text: bytes, claimed: int | None = None) -> bytes:
    return struct.pack("<Q", len(text) if claimed is None else claimed) + text


@st.composite
def _gguf_value(draw: Any) -> bytes:
    vtype = draw(st.one_of(st.sampled_from([*_GGUF_SCALARS, 8, 9]), st.integers(0, 2**32 - 1)))
    out = struct.pack("<I", vtype)
    if vtype in _GGUF_SCALARS:
        size = struct.calcsize(_GGUF_SCALARS[vtype])
        return out + bytes(draw(st.binary(min_size=size, max_size=size)))
    if vtype == 8:
        return out + _gguf_string(
            bytes(draw(st.binary(max_size=16))),
            draw(st.one_of(st.none(), st.just(10**15), st.integers(0, 64))),
        )
    if vtype == 9:
        itype = draw(st.sampled_from([*_GGUF_SCALARS, 8, 9, 99]))
        count = draw(st.one_of(st.integers(0, 8), st.just(2**40), st.just(10**15)))
        items = bytes(draw(st.binary(max_size=64)))
        return out + struct.pack("<IQ", itype, count) + items
    return out + bytes(draw(st.binary(max_size=8)))


@st.composite
def gguf_files(draw: Any) -> bytes:
    """The bytes of one .gguf file: a header built field by field, any field wrong."""
    if draw(st.integers(0, 9)) == 0:
        return bytes(draw(st.binary(max_size=512)))
    magic = draw(st.sampled_from([b"GGUF"] * 8 + [b"GGUX", b"FUGG", b"\0\0\0\0"]))
    version = draw(st.sampled_from([3, 3, 3, 2, 1, 0, 99, 3 << 24]))
    kvs = draw(st.lists(st.tuples(st.binary(max_size=24), _gguf_value()), max_size=4))
    if draw(st.booleans()):
        kvs.append(
            (
                b"general.alignment",
                struct.pack("<II", 4, draw(st.sampled_from([32, 0, 3, 64, 2**31]))),
            )
        )
    tensors = []
    offset = 0
    for i in range(draw(st.integers(0, 4))):
        dims = draw(st.lists(st.one_of(st.integers(1, 64), st.just(2**40), st.just(0)), max_size=5))
        ttype = draw(st.one_of(st.sampled_from([0, 1, 2, 8, 12, 30]), st.integers(0, 2**32 - 1)))
        off = draw(st.one_of(st.just(offset), st.integers(0, 2**64 - 1), st.just(offset + 32)))
        n = 1
        for d in dims:
            n *= d
        offset += -(-4 * n // 32) * 32
        tensors.append(
            _gguf_string(f"t{i}".encode())
            + struct.pack("<I", len(dims))
            + b"".join(struct.pack("<Q", d) for d in dims)
            + struct.pack("<IQ", ttype, off % 2**64)
        )
    n_tensors = draw(st.one_of(st.just(len(tensors)), st.integers(0, 8), st.just(10**15)))
    n_kv = draw(st.one_of(st.just(len(kvs)), st.integers(0, 8), st.just(2**63)))
    head = magic + struct.pack("<IQQ", version, n_tensors, n_kv)
    body = b"".join(_gguf_string(k) + v for k, v in kvs) + b"".join(tensors)
    pad = b"\0" * (-(len(head) + len(body)) % 32)
    data = bytes(draw(st.binary(max_size=512)))
    blob = head + body + pad + data
    return blob[: draw(st.integers(0, len(blob)))] if draw(st.integers(0, 4)) == 0 else blob


# -- logs --------------------------------------------------------------------------------


def _real_format_lines() -> list[bytes]:
    lines: list[bytes] = []
    for path in sorted(LOGS.glob("*.log")):
        lines += path.read_bytes().splitlines()[:400:7]
    return lines or [b"INFO 11-30 09:47:00 [api_server.py:1] vLLM API server version 0.11.0"]


_LINES = _real_format_lines()
_WRAPPERS = [
    b"",
    b"vllm-1  | ",
    b"Nov 30 09:47:00 host vllm[12]: ",
    b"> ",
    b"\x1b[1;31m",
    b'{"MESSAGE":"',
]
_NOISE = [
    b"\r",
    b"\0" * 64,
    b"\0",
    b"\x1b[",
    b"\xff\xfe",
    b"\n\n",
    b"Traceback (most recent call last):",
]


@st.composite
def logs(draw: Any) -> bytes:
    """A log: random bytes, or real-format engine lines cut, spliced, wrapped and soiled."""
    if draw(st.integers(0, 4)) == 0:
        return bytes(draw(st.binary(max_size=2048)))
    out = []
    for _ in range(draw(st.integers(0, 40))):
        line = draw(st.sampled_from(_LINES))
        if draw(st.integers(0, 3)) == 0:  # cut, and maybe spliced onto another line
            a, b = sorted(draw(st.tuples(st.integers(0, len(line)), st.integers(0, len(line)))))
            line = line[:a] + draw(st.sampled_from(_LINES))[b:]
        out.append(draw(st.sampled_from(_WRAPPERS)) + line)
        if draw(st.integers(0, 5)) == 0:
            out.append(draw(st.one_of(st.sampled_from(_NOISE), st.binary(max_size=32))))
    return b"\n".join(out)


# -- small formats -------------------------------------------------------------------------

_gpu = st.fixed_dictionaries(
    {},
    optional={
        "index": st.one_of(st.integers(-1, 8), json_values),
        "name": json_values,
        "uuid": json_values,
        "memory_total_bytes": st.one_of(_ints, json_values),
        "memory_used_bytes": st.one_of(_ints, json_values),
        "processes": st.one_of(
            st.lists(
                st.fixed_dictionaries(
                    {}, optional={"pid": _ints, "name": json_values, "used_bytes": _ints}
                ),
                max_size=3,
            ),
            json_values,
        ),
    },
)
readings = st.one_of(
    st.binary(max_size=256),
    st.builds(lambda gpus: json.dumps({"gpus": gpus}).encode(), st.lists(_gpu, max_size=4)),
    st.builds(lambda v: json.dumps(v).encode(), json_values),
)
inventories = st.one_of(
    st.binary(max_size=256),
    st.builds(
        lambda hosts: "".join(
            f"[[host]]\naddress = {json.dumps(a)}\nunits = {json.dumps(u)}\n" for a, u in hosts
        ).encode(),
        st.lists(st.tuples(json_values, json_values), max_size=3),
    ),
    st.text(alphabet="[]=\"'\n #hostunitsaddr.,{}0123", max_size=120).map(str.encode),
)
datasets = st.one_of(
    st.binary(max_size=256),
    st.builds(lambda v: json.dumps(v).encode(), json_values),
    st.builds(
        lambda convs: json.dumps([{"conversations": c} for c in convs]).encode(),
        st.lists(
            st.lists(
                st.fixed_dictionaries({"from": json_values, "value": json_values}), max_size=3
            ),
            max_size=3,
        ),
    ),
    st.builds(
        lambda rows: b"\n".join(json.dumps(r).encode() for r in rows),
        st.lists(
            st.one_of(st.fixed_dictionaries({"prompt": json_values}), json_values), max_size=5
        ),
    ),
)
manifests = st.one_of(
    st.binary(max_size=256),
    st.lists(
        st.tuples(
            st.text("0123456789abcdefABCDEFg", min_size=60, max_size=66), st.text(max_size=20)
        ),
        max_size=4,
    ).map(lambda rows: "".join(f"{h}  {n}\n" for h, n in rows).encode()),
)


# -- the readers ---------------------------------------------------------------------------


def _write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


def read_safetensors(data: bytes, scratch: Path) -> Any:
    from bringup.adapters.checkpoint import scan_checkpoint

    return scan_checkpoint(_write(scratch, "model.safetensors", data))


def read_checkpoint(folder: dict[str, bytes], scratch: Path) -> Any:
    from bringup.adapters.checkpoint import scan_checkpoint

    root = scratch / "model"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir()
    for name, data in folder.items():
        _write(root, name, data)
    return scan_checkpoint(root)


def read_gguf(data: bytes, scratch: Path) -> Any:
    from bringup.adapters.gguf_file import read_part

    return read_part(_write(scratch, "model.gguf", data))


def read_log(data: bytes, scratch: Path) -> Any:
    from bringup.core.logfeed import diagnose_chunks

    return diagnose_chunks([data[i : i + 97] for i in range(0, len(data), 97)])


def read_readings(data: bytes, scratch: Path) -> Any:
    from bringup.adapters.gpus import ReadingsFile

    return ReadingsFile(_write(scratch, "gpus.json", data)).read()


def read_inventory(data: bytes, scratch: Path) -> Any:
    from bringup.cli.commands.status import _read_toml
    from bringup.core.fleet import parse_inventory

    path = _write(scratch, "hosts.toml", data)
    return parse_inventory(_read_toml(str(path)), source=str(path))


def read_dataset(data: bytes, scratch: Path) -> Any:
    from bringup.adapters.datasets import load_prompts

    return load_prompts(str(_write(scratch, "data.jsonl", data)), 16)


def read_manifest(data: bytes, scratch: Path) -> Any:
    from bringup.adapters.hashing import read_manifest as read

    return read(_write(scratch, "SHA256SUMS", data))


READERS: dict[str, tuple[Any, Callable[[Any, Path], Any]]] = {
    "safetensors": (safetensors_files(), read_safetensors),
    "checkpoint": (checkpoint_folders(), read_checkpoint),
    "gguf": (gguf_files(), read_gguf),
    "log": (logs(), read_log),
    "readings": (readings, read_readings),
    "inventory": (inventories, read_inventory),
    "dataset": (datasets, read_dataset),
    "manifest": (manifests, read_manifest),
}
