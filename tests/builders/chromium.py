"""Debian's Chromium, headless, for screenshots of what bringup draws; and a PNG reader
(stdlib zlib) to check a screenshot is of the expected size and not blank.

Without Chromium a test skips with one line; under ``BRINGUP_REQUIRE_REAL=1`` (CI) it fails.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def require_chromium() -> str:
    found = shutil.which("chromium")
    if found is not None:
        return found
    if os.environ.get("BRINGUP_REQUIRE_REAL") == "1":
        pytest.fail(
            "BRINGUP_REQUIRE_REAL=1 but chromium is not installed (scripts/install-real.sh)",
            pytrace=False,
        )
    pytest.skip("chromium absent; scripts/install-real.sh installs it (apt)")


def screenshot(page: Path, out: Path, width: int, height: int, folder: Path) -> Path:
    """A headless screenshot of ``page`` at ``width`` x ``height``, in a new empty profile."""
    exe = require_chromium()
    profile = folder / "chromium-profile"
    profile.mkdir()
    argv = [
        exe,
        *FLAGS,
        f"--user-data-dir={profile}",
        f"--screenshot={out}",
        f"--window-size={width},{height}",
        page.resolve().as_uri(),
    ]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert out.is_file(), f"no screenshot (exit {done.returncode}): {done.stderr[-2000:]}"
    return out


@dataclass
class Image:
    width: int
    height: int
    pixels: list[tuple[int, int, int]]  # row by row

    def share_not(self, colour: tuple[int, int, int]) -> float:
        return sum(p != colour for p in self.pixels) / len(self.pixels)

    def count_near(self, colour: tuple[int, int, int], tolerance: int = 40) -> int:
        return sum(
            all(abs(a - b) <= tolerance for a, b in zip(p, colour, strict=True))
            for p in self.pixels
        )


def read_png(path: Path) -> Image:
    """An 8-bit RGB or RGBA PNG (what Chromium writes), its filters undone."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour_type = struct.unpack(">IIBB", body[:10])
            assert depth == 8, depth
            channels = {2: 3, 6: 4}[colour_type]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytearray] = []
    previous = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (
                    line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)
                ) & 255
        rows.append(line)
        previous = line
    pixels = [(r[i], r[i + 1], r[i + 2]) for r in rows for i in range(0, stride, channels)]
    return Image(width, height, pixels)
