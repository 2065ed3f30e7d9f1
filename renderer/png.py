"""PNG files that carry their trace: the metadata that decides the pixels, in a text chunk."""

from __future__ import annotations

import io
import json
import zlib
from pathlib import Path

import numpy as np

from renderer.files import atomic_write

TRACE_KEY = "modelfarm.trace"


# zlib's run-length strategy: a rendered frame is mostly background, which PNG's row filters turn
# into long runs of zeros; on the corpus frames this gives files as small as the default strategy
# at level 6 (a little smaller) in a third of the time, and encoding a frame had cost more than
# rendering it (512x512: 34 ms against 8 ms). Lossless either way: goldens compare pixels.
PNG_OPTIONS = {"compress_level": 6, "compress_type": zlib.Z_RLE}


def png_bytes(rgba: np.ndarray, trace: dict | None = None) -> bytes:
    """Deterministic PNG bytes (same pixels and trace -> same bytes)."""
    from PIL import Image, PngImagePlugin

    info = PngImagePlugin.PngInfo()
    if trace is not None:
        info.add_text(TRACE_KEY, json.dumps(trace, sort_keys=True, separators=(",", ":")))
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgba, np.uint8), "RGBA").save(buf, "PNG", pnginfo=info, **PNG_OPTIONS)
    return buf.getvalue()


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
