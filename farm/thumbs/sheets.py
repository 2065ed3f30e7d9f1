"""Contact sheets: the thumbnails of N models in one image, each captioned, failures as placeholders.

A sheet is a grid of ceil(sqrt(N)) columns (every sheet of a folder has the same width) of tiles
min(size, 256) pixels square, each composited over grey (so transparent pixels read as background)
and captioned with the model's file name and the sequence shown. A model that failed gets a dark red
placeholder tile with the start of its error. Sheets are drawn in the coordinator with Pillow
alone (no GL); the same entries give the same bytes, so a sheet whose models did not change is not
drawn again.
"""

from __future__ import annotations

import io
import math
import textwrap
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from farm.images import WEBP_LOSSLESS
from renderer.png import encode_png

__all__ = ["SHEET_VERSION", "caption_lines", "draw_sheet", "placeholder_tile", "sheet_bytes", "short_error",
           "tile_size"]

SHEET_VERSION = 1
MAX_TILE = 256
PAD = 4
SHEET_BG = (24, 24, 24, 255)
TILE_BG = (58, 58, 58, 255)
FAIL_BG = (96, 24, 24, 255)
TEXT = (230, 230, 230, 255)
DIM = (160, 160, 160, 255)


def tile_size(size: int) -> int:
    return max(16, min(int(size), MAX_TILE))


def _font(px: int):
    try:
        return ImageFont.load_default(size=px)  # Pillow >= 10.1 with FreeType: a scalable font
    except (TypeError, OSError, ImportError):
        return ImageFont.load_default()


def _fit(draw: ImageDraw.ImageDraw, text: str, font, width: int) -> str:
    """`text` cut with an ellipsis to fit `width` pixels."""
    text = " ".join(str(text).split())
    if draw.textlength(text, font=font) <= width:
        return text
    while text and draw.textlength(text + "…", font=font) > width:
        text = text[:-1]
    return text + "…"


def short_error(entry: dict) -> str:
    """The entry's error without the model's path in front (the tile already names the model)."""
    error = " ".join(str(entry.get("error") or "").split())
    heads = [str(entry.get("id") or "")]
    if entry.get("root") and entry.get("path"):
        heads.insert(0, str(Path(entry["root"]) / entry["path"]))
    for head in heads:
        for sep in (": ", " "):
            if head and error.startswith(head + sep):
                return error[len(head) + len(sep):]
    return error


def caption_lines(entry: dict) -> tuple[str, str]:
    second = "FAILED" if entry.get("status") != "done" else (entry.get("sequence") or "(bind pose)")
    return str(entry.get("file") or entry.get("id") or "?"), str(second)


def placeholder_tile(tile: int, error: str | None, font_px: int) -> Image.Image:
    """A failed model's tile: dark red, a cross, and the start of the error."""
    im = Image.new("RGBA", (tile, tile), FAIL_BG)
    d = ImageDraw.Draw(im)
    d.line([(0, 0), (tile - 1, tile - 1)], fill=(140, 40, 40, 255), width=max(1, tile // 64))
    d.line([(0, tile - 1), (tile - 1, 0)], fill=(140, 40, 40, 255), width=max(1, tile // 64))
    font = _font(font_px)
    small = _font(max(8, font_px - 2))
    d.text((PAD, PAD), "failed", font=font, fill=TEXT)
    chars = max(8, int(tile / max(small.getlength("m"), 1)))
    y = PAD + font_px + 4
    for line in textwrap.wrap(" ".join(str(error or "").split()), width=chars)[: max(1, (tile - y) // (font_px + 1))]:
        d.text((PAD, y), line, font=small, fill=TEXT)
        y += font_px + 1
    return im


def _thumbnail_tile(path: Path, tile: int) -> Image.Image | None:
    try:
        with Image.open(path) as im:
            im = im.convert("RGBA")
    except (OSError, ValueError):
        return None
    if im.size != (tile, tile):
        im = im.resize((tile, tile), Image.Resampling.LANCZOS)
    bg = Image.new("RGBA", (tile, tile), TILE_BG)
    return Image.alpha_composite(bg, im)


def draw_sheet(entries: list[dict], out_dir: Path, capacity: int, size: int) -> Image.Image:
    """One sheet for `entries` (index entries, in order); thumbnails are read from out_dir."""
    tile = tile_size(size)
    cols = max(1, math.ceil(math.sqrt(max(capacity, 1))))
    rows = max(1, math.ceil(len(entries) / cols))
    font_px = max(9, min(14, tile // 12))
    font = _font(font_px)
    cap_h = 2 * (font_px + 3) + 2
    cell_w, cell_h = tile + 2 * PAD, tile + cap_h + 2 * PAD
    sheet = Image.new("RGBA", (cols * cell_w, rows * cell_h), SHEET_BG)
    d = ImageDraw.Draw(sheet)
    for i, e in enumerate(entries):
        x, y = (i % cols) * cell_w + PAD, (i // cols) * cell_h + PAD
        im = None
        if e.get("status") == "done" and e.get("thumbnail"):
            im = _thumbnail_tile(out_dir / e["thumbnail"], tile)
        if im is None:
            im = placeholder_tile(tile, short_error(e) or "no thumbnail", font_px)
        sheet.alpha_composite(im, (x, y))
        first, second = caption_lines(e)
        d.text((x, y + tile + 2), _fit(d, first, font, tile), font=font, fill=TEXT)
        d.text((x, y + tile + 2 + font_px + 3), _fit(d, second, font, tile), font=font,
               fill=(255, 120, 120, 255) if e.get("status") != "done" else DIM)
    return sheet


def sheet_bytes(im: Image.Image, fmt: str) -> bytes:
    if fmt != "webp":
        return encode_png(np.asarray(im.convert("RGBA")))
    buf = io.BytesIO()
    im.save(buf, "WEBP", **WEBP_LOSSLESS)
    return buf.getvalue()
