"""Heatmaps for the report: a difference or an SSIM map as an opaque RGBA image on one fixed colour
ramp (black for no difference, through blue, purple, red and orange, to pale yellow for the
largest)."""

from __future__ import annotations

import numpy as np

from farm.compare.metrics import max_channel_diff, premultiply
from farm.images import as_rgba

__all__ = ["RAMP", "diff_heatmap", "ssim_heatmap"]

_RAMP_STOPS = (
    (0.00, (0, 0, 0)),
    (0.15, (20, 20, 110)),
    (0.35, (130, 30, 150)),
    (0.55, (220, 50, 60)),
    (0.75, (250, 150, 30)),
    (1.00, (255, 255, 200)),
)


def _make_ramp() -> np.ndarray:
    t = np.linspace(0.0, 1.0, 256)
    xs = [s[0] for s in _RAMP_STOPS]
    lut = np.empty((256, 4), np.uint8)
    for ch in range(3):
        lut[:, ch] = np.rint(np.interp(t, xs, [s[1][ch] for s in _RAMP_STOPS]))
    lut[:, 3] = 255
    lut.setflags(write=False)
    return lut


RAMP = _make_ramp()  # (256, 4) uint8: index 0 = no difference, 255 = the largest


def _ramp(t: np.ndarray) -> np.ndarray:
    t = np.nan_to_num(np.asarray(t, np.float64), nan=1.0)
    idx = np.rint(np.clip(t, 0.0, 1.0) * 255).astype(np.intp)
    return RAMP[idx]


def diff_heatmap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(H, W, 4) uint8: each pixel's largest channel difference (alpha rule applied) on the ramp.

    The ramp runs over sqrt(difference / 255), so small differences stay visible: a difference of
    16 (the default gate) sits a quarter of the way along, in the blue-purple.
    """
    p, q = premultiply(as_rgba(a, "a")), premultiply(as_rgba(b, "b"))
    if p.shape != q.shape:
        raise ValueError(f"images differ in size: {p.shape[1]}x{p.shape[0]} vs {q.shape[1]}x{q.shape[0]}")
    d = max_channel_diff(p, q)
    return _ramp(np.sqrt(d / 255.0))


def ssim_heatmap(ssim_map: np.ndarray) -> np.ndarray:
    """(H, W, 4) uint8: an SSIM map ((H, W), or (H, W, C) averaged over C) on the ramp.

    SSIM 1 is black; the ramp runs over sqrt(1 - SSIM), so 0.99 sits a tenth of the way along and
    0 or below is the brightest colour. NaN shows as the brightest colour.
    """
    m = np.asarray(ssim_map, np.float64)
    if m.ndim == 3:
        m = m.mean(axis=2)
    if m.ndim != 2:
        raise ValueError(f"an SSIM map must be (H, W) or (H, W, C), not shape {m.shape}")
    with np.errstate(invalid="ignore"):
        t = np.sqrt(np.clip(1.0 - m, 0.0, 1.0))
    t[np.isnan(m)] = 1.0
    return _ramp(t)
