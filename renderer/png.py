"""PNG files that carry their trace: the metadata that decides the pixels, in a text chunk.

Frames are encoded here rather than by Pillow (issue 27): Pillow tries all five row filters on
every row and deflates with zlib, which cost more than rendering the frame (OrcMale 512x512: 7.4 ms
against 4.1). A rendered frame is mostly background; the Sub filter (one numpy subtraction for the
whole image) turns it into runs of zeros, and ISA-L's deflate at level 1 (python-isal) packs them
in 1.3 ms, files within 20% of Pillow's. Without isal (a platform it has no wheel for) zlib's
run-length strategy does it in 4 ms. A standard PNG either way: 8-bit RGBA or RGB, one IDAT,
the trace in a tEXt chunk before it; Pillow, browsers and libpng read it.
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from pathlib import Path

import numpy as np

from renderer.files import atomic_write

try:  # the fast deflate; optional so that a platform without its wheel still encodes (slower)
    from isal import isal_zlib as _deflate

    DEFLATE = ("isal", 1, _deflate.Z_DEFAULT_STRATEGY)
except ImportError:  # pragma: no cover - isal is a dependency; this is the fallback's path
    _deflate = zlib
    DEFLATE = ("zlib", 6, zlib.Z_RLE)

TRACE_KEY = "modelfarm.trace"
SIGNATURE = b"\x89PNG\r\n\x1a\n"
_COLOUR_TYPE = {4: 6, 3: 2}  # channels -> PNG colour type (RGBA, RGB)
_SUB = 1  # PNG filter type: each byte minus the byte one pixel to its left


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))


def _filtered(pixels: np.ndarray) -> np.ndarray:
    """The image's rows, each its filter byte (Sub) then its bytes minus those one pixel left."""
    h, w, c = pixels.shape
    rows = pixels.reshape(h, w * c)
    out = np.empty((h, w * c + 1), np.uint8)
    out[:, 0] = _SUB
    out[:, 1:c + 1] = rows[:, :c]
    np.subtract(rows[:, c:], rows[:, :-c], out=out[:, c + 1:])  # uint8 wraps modulo 256, as PNG's filter
    return out  # handed to deflate as a buffer: a tobytes() copy took as long as the filter and deflate


def encode_png(pixels: np.ndarray, text: dict[str, str] | None = None) -> bytes:
    """PNG bytes of an (h, w, 4) RGBA or (h, w, 3) RGB uint8 array, with Latin-1 `text` chunks;
    the same pixels and text give the same bytes with the same deflate library (another ISA-L or
    zlib build may pack them differently, as zlib versions do: goldens compare pixel digests)."""
    pixels = np.ascontiguousarray(pixels, np.uint8)
    if pixels.ndim != 3 or pixels.shape[2] not in _COLOUR_TYPE or not pixels.shape[0] or not pixels.shape[1]:
        raise ValueError(f"encode_png takes an RGBA or RGB image, not an array of shape {pixels.shape}")
    h, w, c = pixels.shape
    _, level, strategy = DEFLATE
    packer = _deflate.compressobj(level, zlib.DEFLATED, zlib.MAX_WBITS, 9, strategy)
    data = packer.compress(_filtered(pixels)) + packer.flush()
    head = _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, _COLOUR_TYPE[c], 0, 0, 0))
    notes = b"".join(_chunk(b"tEXt", k.encode("latin-1") + b"\0" + v.encode("latin-1"))
                     for k, v in (text or {}).items())
    return SIGNATURE + head + notes + _chunk(b"IDAT", data) + _chunk(b"IEND", b"")


def png_bytes(rgba: np.ndarray, trace: dict | None = None) -> bytes:
    """Deterministic PNG bytes of a frame (same pixels and trace -> same bytes), the trace as JSON
    in the `modelfarm.trace` text chunk (ASCII: json escapes the rest)."""
    text = None if trace is None else {TRACE_KEY: json.dumps(trace, sort_keys=True, separators=(",", ":"))}
    return encode_png(rgba, text)


def write_png(path: str | Path, rgba: np.ndarray, trace: dict | None = None) -> bytes:
    """Write atomically (temporary file, then rename); returns the bytes written."""
    data = png_bytes(rgba, trace)
    atomic_write(path, data)
    return data


def read_png(source: str | Path | bytes) -> tuple[np.ndarray, dict | None]:
    """(RGBA array, trace or None) of a PNG file or of PNG bytes; a trace that is not JSON is None."""
    from PIL import Image

    with Image.open(io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source) as im:
        rgba = np.asarray(im.convert("RGBA"))
        text = im.text.get(TRACE_KEY) if hasattr(im, "text") else None
    try:
        trace = json.loads(text) if text else None
    except ValueError:
        trace = None
    return rgba, trace


def read_png_header(data: bytes) -> tuple[tuple[int, int], dict | None] | None:
    """((width, height), trace or None) of PNG bytes from the chunks before the image data, without
    decoding a pixel (a comparison that finds the bytes already approved needs nothing else); None
    when `data` is not a PNG this can read that way (read_png reads it)."""
    if not data.startswith(SIGNATURE) or data[12:16] != b"IHDR":
        return None
    size = struct.unpack(">II", data[16:24])
    pos, trace = 8, None
    while pos + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind in (b"IDAT", b"IEND"):
            return size, trace
        if kind == b"tEXt":
            name, _, text = data[pos + 8:pos + 8 + n].partition(b"\0")
            if name == TRACE_KEY.encode("latin-1"):
                try:
                    trace = json.loads(text.decode("latin-1"))
                except ValueError:
                    trace = None
        pos += 12 + n
    return None
