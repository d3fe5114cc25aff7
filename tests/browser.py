"""A real browser for the HTML pages: chromium's screenshot of a page, and the pixels of a colour in it."""

from __future__ import annotations

import struct
import subprocess
import zlib
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")


def chromium_screenshot(page: Path, png: Path, width: int, height: int, tmp: Path) -> None:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: the HTML report is checked in a real browser. "
                    f"Install it with `apt-get install -y chromium` (Debian), as .ci/run does.")
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--force-device-scale-factor=1", "--force-color-profile=srgb", "--hide-scrollbars",
           f"--user-data-dir={tmp / 'chromium-profile'}", f"--screenshot={png}", f"--window-size={width},{height}",
           page.as_uri()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and png.exists(), r.stderr[-2000:]


def read_png(path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB bytes) of an 8-bit RGB or RGBA PNG without interlacing: zlib and the
    five PNG filters, enough for a browser's screenshot."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, []
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
        elif kind == b"IDAT":
            idat.append(body)
    raw = zlib.decompress(b"".join(idat))
    bpp = 3 if colour == 2 else 4
    stride = width * bpp
    low7, high = int.from_bytes(b"\x7f" * stride, "big"), int.from_bytes(b"\x80" * stride, "big")
    prev, rows = bytes(stride), []
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], raw[start + 1:start + 1 + stride]
        if kind == 0:
            row = line
        elif kind == 2:  # Up: add the row above byte by byte, all bytes at once without carries
            a, b = int.from_bytes(line, "big"), int.from_bytes(prev, "big")
            row = (((a & low7) + (b & low7)) ^ ((a ^ b) & high)).to_bytes(stride, "big")
        else:
            cur = bytearray(line)
            for i in range(stride):
                left = cur[i - bpp] if i >= bpp else 0
                if kind == 1:
                    cur[i] = (cur[i] + left) & 0xFF
                elif kind == 3:
                    cur[i] = (cur[i] + ((left + prev[i]) >> 1)) & 0xFF
                else:  # 4, Paeth
                    up, corner = prev[i], (prev[i - bpp] if i >= bpp else 0)
                    p = left + up - corner
                    pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                    cur[i] = (cur[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
            row = bytes(cur)
        prev = row
        rows.append(row if bpp == 3 else bytes(b for i, b in enumerate(row) if i % 4 != 3))
    return width, height, rows


def pixels_of(rows: list[bytes], colour: str) -> list[tuple[int, int]]:
    rgb = bytes.fromhex(colour.lstrip("#"))
    found = []
    for y, row in enumerate(rows):
        i = row.find(rgb)
        while i != -1:
            if i % 3 == 0:
                found.append((i // 3, y))
            i = row.find(rgb, i + 1)
    return found
