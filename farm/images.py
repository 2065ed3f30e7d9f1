"""Frames as the farm handles them: PNG bytes in and out, lossless WebP out, and the pixel digest.

The PNG codec (with the trace in its ``modelfarm.trace`` text chunk) is the renderer's
(renderer.png); this module adds what the farm needs on top: RGBA normalisation and the pixel
digest, a sha256 of the canonical RGBA bytes and the size, independent of PNG encoding, that
goldens and comparisons use to recognise the same picture. `encode_image` writes either format
(`farm render -o x.webp`, `farm thumbnails --format webp`): a WebP carries no trace, so its writer
puts the trace in a JSON sidecar next to it (``x.webp.json``). `encode_animation` writes one animated
image of several frames (`farm render --animate`): lossless WebP or APNG, or a GIF as a lossy preview.
"""

from __future__ import annotations

import hashlib
import io
from fractions import Fraction

import numpy as np
from PIL import Image, ImageSequence

from renderer.png import TRACE_KEY, png_bytes, read_png, read_png_header

__all__ = ["ANIMATION_FORMATS", "ANIMATION_MAX_BYTES", "IMAGE_FORMATS", "TRACE_KEY", "WEBP_LOSSLESS",
           "animation_sidecar", "as_rgba", "blank_reason", "encode_animation", "encode_image", "frame_durations",
           "image_digest", "image_sidecar", "png_bytes", "png_pixel_digest", "read_animation", "read_png",
           "read_png_header"]

IMAGE_FORMATS = ("png", "webp")  # what encode_image writes; also the extensions `farm render -o` takes
ANIMATION_FORMATS = ("webp", "png", "gif")  # what encode_animation writes: WebP and APNG lossless, GIF lossy
ANIMATION_MAX_BYTES = 4 << 30  # the RGBA of every frame is held until the animation is encoded
WEBP_LOSSLESS = {"lossless": True, "quality": 80, "method": 4}  # Pillow's options for every WebP the farm writes


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
        Image.fromarray(np.ascontiguousarray(rgba, np.uint8), "RGBA").save(buf, "WEBP", exact=True, **WEBP_LOSSLESS)
        return buf.getvalue()
    raise ValueError(f"image format must be one of {', '.join(IMAGE_FORMATS)}, not {fmt!r}")


def image_sidecar(trace: dict, diagnostics: list[dict], diagnostic_count: int | None = None) -> dict:
    """The JSON kept next to an image that carries no trace of its own (``x.webp.json``: `farm render
    -o x.webp`, `farm thumbnails --format webp`; each frame of `animation_sidecar`): its trace and
    diagnostics, and how many there were (`diagnostic_count`, when `diagnostics` is a shortened list)."""
    return {"trace": trace, "diagnostics": diagnostics,
            "diagnostic_count": len(diagnostics) if diagnostic_count is None else diagnostic_count}


def frame_durations(times: list[int], fps: float | None = None) -> list[int]:
    """How long each frame shows, in whole ms: with `fps`, 1000/fps each (rounded so that they add up
    to the exact total); else the gap to the next timestamp, the last frame keeping the gap before it
    (a lone frame: 100 ms)."""
    if fps is not None:
        step = Fraction(1000) / Fraction(fps).limit_denominator(1000)
        return [round((i + 1) * step) - round(i * step) for i in range(len(times))]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    return gaps + [gaps[-1] if gaps else 100]


def encode_animation(frames: list, durations: list[int], fmt: str) -> bytes:
    """One looping animated image of `frames` (RGBA arrays), each shown its duration (ms). "webp":
    lossless, every visible pixel exact (libwebp's animation encoder stores the colour under alpha 0
    as 0); "png": APNG, every byte of RGBA exact; "gif": a lossy preview (a 256-colour palette per
    frame, 1-bit transparency, durations in 10 ms steps). Consecutive identical frames become one
    frame that lasts their total (every encoder does this): the picture at each moment is the same."""
    if fmt not in ANIMATION_FORMATS:
        raise ValueError(f"animation format must be one of {', '.join(ANIMATION_FORMATS)}, not {fmt!r}")
    if not frames or len(frames) != len(durations):
        raise ValueError(f"an animation needs one duration per frame: {len(frames)} frames, {len(durations)} durations")
    images = [Image.fromarray(as_rgba(f, f"frame {i}"), "RGBA") for i, f in enumerate(frames)]
    options = {"webp": {"format": "WEBP", **WEBP_LOSSLESS},
               "png": {"format": "PNG"}, "gif": {"format": "GIF", "disposal": 2}}[fmt]
    buf = io.BytesIO()
    images[0].save(buf, save_all=True, append_images=images[1:], duration=[int(d) for d in durations], loop=0,
                   **options)
    return buf.getvalue()


def animation_sidecar(fmt: str, times: list[int], durations: list[int], traces: list[dict],
                      diagnostics: list[list[dict]]) -> dict:
    """The JSON kept next to an animation (``x.webp.json``): every frame rendered, in order, with its
    time, duration, renderer trace and diagnostics (the image itself may have merged identical ones)."""
    return {"format": fmt, "lossless": fmt != "gif", "loop": 0,
            "frames": [{"time_ms": t, "duration_ms": d, **image_sidecar(trace, diags)}
                       for t, d, trace, diags in zip(times, durations, traces, diagnostics, strict=True)]}


def read_animation(data: bytes) -> list[tuple[np.ndarray, int]]:
    """(RGBA, duration ms) of each frame of an animated (or still) WebP, APNG or GIF, as shown."""
    with Image.open(io.BytesIO(data)) as im:
        return [(np.asarray(f.convert("RGBA")).copy(), int(round(f.info.get("duration") or 0)))
                for f in ImageSequence.Iterator(im)]
