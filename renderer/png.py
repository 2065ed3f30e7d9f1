"""PNG files that carry their trace: the metadata that decides the pixels, in a text chunk."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np

TRACE_KEY = "modelfarm.trace"


def png_bytes(rgba: np.ndarray, trace: dict | None = None) -> bytes:
    """Deterministic PNG bytes (same pixels and trace -> same bytes)."""
    from PIL import Image, PngImagePlugin

    info = PngImagePlugin.PngInfo()
    if trace is not None:
        info.add_text(TRACE_KEY, json.dumps(trace, sort_keys=True, separators=(",", ":")))
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgba, np.uint8), "RGBA").save(buf, "PNG", pnginfo=info, compress_level=6)
    return buf.getvalue()


def write_png(path: str | Path, rgba: np.ndarray, trace: dict | None = None) -> bytes:
    """Write atomically (temporary file, then rename); returns the bytes written."""
    path = Path(path)
    data = png_bytes(rgba, trace)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return data


def read_png(path: str | Path) -> tuple[np.ndarray, dict | None]:
    from PIL import Image

    with Image.open(path) as im:
        rgba = np.asarray(im.convert("RGBA"))
        text = im.text.get(TRACE_KEY) if hasattr(im, "text") else None
    return rgba, (json.loads(text) if text else None)
