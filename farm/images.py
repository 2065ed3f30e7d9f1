"""Frames as the farm handles them: PNG bytes in and out, lossless WebP out, and the pixel digest.

The PNG codec (with the trace in its ``modelfarm.trace`` text chunk) is the renderer's
(renderer.png); this module adds what the farm needs on top: RGBA normalisation and the pixel
digest, a sha256 of the canonical RGBA bytes and the size, independent of PNG encoding, that
goldens and comparisons use to recognise the same picture. `encode_image` writes either format
(`farm render -o x.webp`, `farm thumbnails --format webp`): a WebP carries no trace, so its writer
puts the trace in a JSON sidecar next to it (``x.webp.json``).
"""

from __future__ import annotations

import hashlib
import io

import numpy as np
from PIL import Image

from renderer.png import TRACE_KEY, png_bytes, read_png

__all__ = ["IMAGE_FORMATS", "TRACE_KEY", "as_rgba", "blank_reason", "encode_image", "image_digest", "png_bytes",
           "png_pixel_digest", "read_png"]

IMAGE_FORMATS = ("png", "webp")  # what encode_image writes; also the extensions `farm render -o` takes


def as_rgba(image: np.ndarray, name: str = "image") -> np.ndarray:
    """A C-contiguous (H, W, 4) uint8 copy-or-view of an RGBA or RGB (alpha 255) uint8 image."""
    image = np.asarray(image)
    if image.dtype != np.uint8:
        raise ValueError(f"{name} must be uint8, not {image.dtype}")
    if image.ndim != 3 or image.shape[2] not in (3, 4):
        raise ValueError(f"{name} must be an (H, W, 4) RGBA or (H, W, 3) RGB array, not shape {image.shape}")
    if image.shape[2] == 3:
        out = np.empty(image.shape[:2] + (4,), np.uint8)
        out[..., :3] = image
        out[..., 3] = 255
        return out
    return np.ascontiguousarray(image)


def image_digest(rgba: np.ndarray) -> str:
    """sha256 (hex) of the canonical RGBA bytes and the size: independent of PNG encoding."""
    px = as_rgba(rgba)
    h, w = px.shape[:2]
    digest = hashlib.sha256(b"modelfarm-rgba8 %d %d\n" % (w, h))
    digest.update(px.data)
    return digest.hexdigest()


def png_pixel_digest(png: bytes) -> tuple[str, tuple[int, int], dict | None]:
    """(pixel digest, (width, height), trace) of PNG bytes."""
    rgba, trace = read_png(png)
    return image_digest(rgba), (rgba.shape[1], rgba.shape[0]), trace


def blank_reason(rgba: np.ndarray) -> str | None:
    """Why a frame is blank (nothing was drawn, most likely), or None: "fully transparent" when
    every alpha is 0, "every pixel is #rrggbbaa" when all pixels have one value. The report shows
    a warning badge for such a frame and approving one needs --allow-blank (farm.goldens.approve)."""
    px = as_rgba(rgba)
    if px.size == 0:
        return "empty image"
    if not px[..., 3].any():
        return "fully transparent"
    flat = px.reshape(-1, 4)
    if (flat == flat[0]).all():
        return "every pixel is #" + "".join(f"{int(v):02x}" for v in flat[0])
    return None


def encode_image(rgba, trace: dict, fmt: str) -> bytes:
    """PNG with the trace in its text chunk, or lossless WebP (exact RGBA, even under alpha 0; its
    writer keeps the trace in a JSON sidecar)."""
    if fmt == "png":
        return png_bytes(rgba, trace)
    if fmt == "webp":
        buf = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(rgba, np.uint8), "RGBA").save(buf, "WEBP", lossless=True, quality=80,
                                                                          method=4, exact=True)
        return buf.getvalue()
    raise ValueError(f"image format must be one of {', '.join(IMAGE_FORMATS)}, not {fmt!r}")
